"""Create the first operator on a fresh installation and say how to log in."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from hal.actions.base import Actor, record_audit


class Command(BaseCommand):
    help = "Create the first operator when none exists (DJANGO_SUPERUSER_* or a generated one)."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write("HAL: operators exist; log in with your account.")
            return
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin")
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        with transaction.atomic():
            user = User.objects.create_superuser(
                username, os.environ.get("DJANGO_SUPERUSER_EMAIL", ""), password
            )
            record_audit(
                Actor.for_system("cli", label="hal_bootstrap"), "operator.bootstrap", target=user
            )
        self.stdout.write(self.style.SUCCESS(f"HAL: created the first operator '{username}'."))
        if generated:
            # Shown once, on the operator's own terminal; change it after the first login.
            self.stdout.write(f"HAL: log in at /login/ as '{username}' with password: {password}")
