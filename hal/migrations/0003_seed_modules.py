"""Seed the Suite's modules (portal, agent, webmaker, arimail, hal)."""

from django.db import migrations

MODULES = [
    ("portal", "Customer portal"),
    ("agent", "HAL node agent"),
    ("webmaker", "Website builder"),
    ("arimail", "Mail service"),
    ("hal", "This operations console"),
]


def seed(apps, schema_editor):
    Module = apps.get_model("hal", "Module")
    for name, description in MODULES:
        Module.objects.get_or_create(name=name, defaults={"description": description})


def unseed(apps, schema_editor):
    Module = apps.get_model("hal", "Module")
    Module.objects.filter(name__in=[m[0] for m in MODULES], releases__isnull=True).delete()


class Migration(migrations.Migration):
    dependencies = [("hal", "0002_fleet")]

    operations = [migrations.RunPython(seed, unseed)]
