"""Operator preference actions: language, AI panel state, URL pre-fetch switch."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import InvalidInput
from hal.models import OperatorProfile


def get_profile(user: Any) -> OperatorProfile:
    """Return the operator's profile, creating the default one on first use."""
    profile, _ = OperatorProfile.objects.get_or_create(user=user)
    return profile


@action("operator.language")
def check_set_language(*, actor: Actor, language: Any) -> OperatorProfile:
    """Choose the console language for this operator (every browser follows)."""
    require_perm(actor, "view")
    if language not in dict(settings.LANGUAGES):
        raise InvalidInput(f"Unsupported language {language!r}.", code="invalid_language")
    with transaction.atomic():
        profile = OperatorProfile.objects.select_for_update().get(pk=get_profile(actor.user).pk)
        before = profile.language
        profile.language = language
        profile.save(update_fields=["language"])
        record_audit(
            actor,
            "operator.language",
            target=actor.user,
            before={"language": before},
            after={"language": language},
        )
    return profile


@action("operator.auto_fetch_urls")
def check_set_auto_fetch(*, actor: Actor, enabled: Any) -> OperatorProfile:
    """Turn URL pre-fetch of this operator's messages on or off (setting autoFetchUrls)."""
    require_perm(actor, "view")
    if not isinstance(enabled, bool):
        raise InvalidInput("enabled must be true or false.")
    with transaction.atomic():
        profile = OperatorProfile.objects.select_for_update().get(pk=get_profile(actor.user).pk)
        before = profile.auto_fetch_urls
        profile.auto_fetch_urls = enabled
        profile.save(update_fields=["auto_fetch_urls"])
        record_audit(
            actor,
            "operator.auto_fetch_urls",
            target=actor.user,
            before={"auto_fetch_urls": before},
            after={"auto_fetch_urls": enabled},
        )
    return profile
