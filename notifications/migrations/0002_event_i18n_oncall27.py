"""Notification events keep their title and text as translatable texts (issue 27)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notifications", "0001_notifications_i27_notify")]

    operations = [
        migrations.AddField(
            model_name="event",
            name="title_i18n",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="event",
            name="text_i18n",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
