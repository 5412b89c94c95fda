"""Admin-curated web sources: preferred search sources and the fetch allowlist."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models

_DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9-]{1,63}")


def normalize_domain(value: str) -> str:
    """'HTTPS://Docs.Example.com/x' or 'Docs.Example.com.' → 'docs.example.com'."""
    value = (value or "").strip().lower()
    if "://" in value:
        value = value.split("://", 1)[1]
    value = value.split("/", 1)[0].split(":", 1)[0].rstrip(".")
    try:
        value = value.encode("idna").decode("ascii")
    except UnicodeError:
        pass
    return value


def validate_domain(value: str) -> None:
    if not _DOMAIN.fullmatch(normalize_domain(value)):
        raise ValidationError(f"{value!r} is not a domain name")


class FetchAllowDomain(models.Model):
    """A domain whose pages models may fetch as a plain read (others need approval)."""

    domain = models.CharField(
        max_length=253,
        unique=True,
        validators=[validate_domain],
        help_text="Matches the domain and its subdomains.",
    )
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["domain"]
        verbose_name = "fetch allowlist domain"

    def __str__(self) -> str:
        return self.domain

    def clean(self) -> None:
        self.domain = normalize_domain(self.domain)


class CuratedSource(models.Model):
    """An admin's preferred source for web search, matched by tags; never searched online."""

    domain = models.CharField(max_length=253, validators=[validate_domain])
    url = models.URLField(
        max_length=500, blank=True, help_text="Entry page; empty means https://<domain>/."
    )
    title = models.CharField(max_length=200)
    tags = models.CharField(
        max_length=300, blank=True, help_text="Comma-separated, e.g. 'postgres, backup, dr'."
    )
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["domain", "title"]

    def __str__(self) -> str:
        return f"{self.title} ({self.domain})"

    def clean(self) -> None:
        self.domain = normalize_domain(self.domain)

    @property
    def tag_list(self) -> list[str]:
        return [t.strip().lower() for t in self.tags.split(",") if t.strip()]

    @property
    def entry_url(self) -> str:
        return self.url or f"https://{self.domain}/"


class BudgetLimit(models.Model):
    """Daily limits of one AI connection (null = the settings' default; 0 = unlimited)."""

    # A plain id like hal.Proposal.connection_id: providers owns the connection model.
    connection_id = models.BigIntegerField(unique=True)
    tokens_per_day = models.BigIntegerField(null=True, blank=True)
    fetch_bytes_per_day = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["connection_id"]

    def __str__(self) -> str:
        return f"budget limit of connection {self.connection_id}"


class BudgetUsage(models.Model):
    """One connection's usage in one UTC day; a new day is a new row (the period reset)."""

    connection_id = models.BigIntegerField(db_index=True)
    day = models.DateField()
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    fetch_bytes = models.BigIntegerField(default=0)
    fetches = models.IntegerField(default=0)
    # When the flag first went up this day (audited once per period, then only shown).
    fetch_degraded_at = models.DateTimeField(null=True, blank=True)
    tokens_exceeded_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day", "connection_id"]
        constraints = [
            models.UniqueConstraint(fields=["connection_id", "day"], name="webfetch_usage_day")
        ]

    def __str__(self) -> str:
        return f"usage of connection {self.connection_id} on {self.day}"

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens
