"""Operators from an identity provider: who they are there (iss, sub) and their SSO sessions."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OidcIdentity(models.Model):
    """One operator's identity at one provider; the account is found by (issuer, subject)
    only — the e-mail is shown, never used to find anyone."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identities"
    )
    provider = models.CharField(max_length=40)
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    email = models.CharField(max_length=254, blank=True)
    groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_iss_sub")
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.subject}"


class OidcSession(models.Model):
    """A console session opened through SSO: re-checked at the provider with its refresh
    token (kept in the vault, owner `oidc_session:<id>`) every HAL_OIDC_RECHECK_SECONDS."""

    identity = models.ForeignKey(OidcIdentity, on_delete=models.CASCADE, related_name="sessions")
    session_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    checked_at = models.DateTimeField()
    has_refresh_token = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"SSO session {self.pk} of {self.identity}"
