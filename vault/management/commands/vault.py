"""manage.py vault rotate | verify | generate-key: keyring maintenance from the HAL host."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from hal.actions.base import Actor, record_audit
from vault import keyring, maintenance


def _cli_actor(subcommand: str) -> Actor:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = "unknown"
    return Actor.for_system("cli", f"{user} (manage.py vault {subcommand})")


class Command(BaseCommand):
    help = "Vault keyring maintenance: rotate, verify, generate-key. Never prints secrets."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True)
        sub.add_parser("rotate", help="Re-wrap every data key under the newest (first) key.")
        sub.add_parser("verify", help="Decrypt every secret; exit non-zero on any failure.")
        gen = sub.add_parser("generate-key", help="Print a new kid:base64 keyring entry.")
        gen.add_argument("--kid", help="Key id (default: k<UTC timestamp>-<random>).")
        gen.add_argument(
            "--add-to-key-file",
            action="store_true",
            help="Prepend the key to the key file instead of printing it.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        subcommand = options["subcommand"]
        actor = _cli_actor(subcommand)
        if subcommand == "rotate":
            self.rotate(actor)
        elif subcommand == "verify":
            self.verify(actor)
        else:
            self.generate_key(actor, options.get("kid"), options.get("add_to_key_file", False))

    def rotate(self, actor: Actor) -> None:
        try:
            report = maintenance.rotate(actor=actor)
        except keyring.KeyringError as exc:
            raise CommandError(f"No usable vault keyring: {exc}") from None
        counts = report.counts
        summary = (
            f"Rotation to key {report.key_id}: {counts['rewrapped']} re-wrapped, "
            f"{counts['current']} already current, {counts['failed']} failed."
        )
        if report.failed_ids:
            for pk in report.failed_ids:
                self.stderr.write(f"FAILED secret {pk} (see the audit log)")
            raise CommandError(summary + " Re-run after fixing the keyring; see `vault verify`.")
        self.stdout.write(summary)

    def verify(self, actor: Actor) -> None:
        report = maintenance.verify(actor=actor)
        keys = ", ".join(f"{kid}={n}" for kid, n in sorted(report.by_key.items())) or "none"
        summary = (
            f"{report.total} secrets: {report.ok} ok, {len(report.failures)} failed. "
            f"By key: {keys}."
        )
        for pk, purpose, reason in report.failures:
            self.stderr.write(f"FAILED secret {pk} ({purpose}): {reason}")
        if report.failures:
            raise CommandError(summary)
        self.stdout.write(summary)

    def generate_key(self, actor: Actor, kid: str | None, add_to_key_file: bool) -> None:
        try:
            kid, key = keyring.generate_key(kid)
            if add_to_key_file:
                ring = keyring.prepend_key_to_file(kid, key)
            else:
                entry = keyring.format_entry(kid, key)
        except keyring.KeyringError as exc:
            raise CommandError(str(exc)) from None
        record_audit(
            actor,
            "vault.generate_key",
            target_type="vault",
            target_label=kid,
            after={"key_id": kid, "added_to_key_file": add_to_key_file},
        )
        if add_to_key_file:
            self.stdout.write(
                f"Added key {kid} to {ring.source} as the encrypting key "
                f"(keyring: {', '.join(ring.key_ids)}). Now run `manage.py vault rotate`."
            )
        else:
            # The one place the vault prints key material: it is the command's purpose.
            self.stdout.write(entry)
