"""Django admin for curated sources and the fetch allowlist."""

from django.contrib import admin

from webfetch.models import CuratedSource, FetchAllowDomain


@admin.register(FetchAllowDomain)
class FetchAllowDomainAdmin(admin.ModelAdmin):
    list_display = ("domain", "note", "created_at")
    search_fields = ("domain", "note")


@admin.register(CuratedSource)
class CuratedSourceAdmin(admin.ModelAdmin):
    list_display = ("title", "domain", "tags", "enabled")
    list_filter = ("enabled",)
    search_fields = ("title", "domain", "tags", "description")
