"""Curated sources and the fetch allowlist in the admin site, through webfetch.sources.

Both widen what a model may fetch without a proposal, so each change needs a recent
re-auth and is audited (via=admin); nothing here saves a row itself.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models

from hal.actions.base import Actor
from hal.views.adminsite import ActionModelAdmin
from webfetch import sources
from webfetch.models import CuratedSource, FetchAllowDomain


@admin.register(FetchAllowDomain)
class FetchAllowDomainAdmin(ActionModelAdmin):
    """Allowlisted fetch domains."""

    list_display = ("domain", "note", "created_at")
    search_fields = ("domain", "note")
    action_codes = {
        "add": "webfetch.allow_domain_save",
        "change": "webfetch.allow_domain_save",
        "delete": "webfetch.allow_domain_delete",
    }
    error_fields = {"invalid_domain": "domain", "duplicate_domain": "domain"}

    def run_save(self, actor: Actor, form: Any, pk: Any) -> Any:
        data = {"domain": form.cleaned_data["domain"], "note": form.cleaned_data.get("note", "")}
        return sources.check_save_allow_domain(actor=actor, row=pk, data=data)

    def run_delete(self, actor: Actor, obj: Any) -> None:
        sources.check_delete_allow_domain(actor=actor, row=obj.pk)


@admin.register(CuratedSource)
class CuratedSourceAdmin(ActionModelAdmin):
    """Curated search sources (their domains are trusted like the allowlist)."""

    list_display = ("title", "domain", "tags", "enabled")
    list_filter = ("enabled",)
    search_fields = ("title", "domain", "tags", "description")
    action_codes = {
        "add": "webfetch.curated_source_save",
        "change": "webfetch.curated_source_save",
        "delete": "webfetch.curated_source_delete",
    }
    error_fields = {"invalid_domain": "domain", "invalid_url": "url"}
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def run_save(self, actor: Actor, form: Any, pk: Any) -> Any:
        fields = ("domain", "url", "title", "tags", "description", "enabled")
        data = {k: form.cleaned_data.get(k) for k in fields}
        data["enabled"] = bool(data["enabled"])
        return sources.check_save_curated_source(actor=actor, row=pk, data=data)

    def run_delete(self, actor: Actor, obj: Any) -> None:
        sources.check_delete_curated_source(actor=actor, row=obj.pk)
