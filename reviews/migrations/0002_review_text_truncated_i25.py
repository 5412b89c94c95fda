# The reviewer's answer is capped (reviews.models.MAX_REVIEW_CHARS); this marks a cut one.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="proposalreview",
            name="truncated",
            field=models.BooleanField(default=False),
        ),
    ]
