"""Admin models, their registration, and the package's public API."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError

import webfetch
from webfetch.models import CuratedSource, FetchAllowDomain, normalize_domain


def test_normalize_domain():
    assert normalize_domain("HTTPS://Docs.Example.com:443/x") == "docs.example.com"
    assert normalize_domain("example.org.") == "example.org"


@pytest.mark.django_db
def test_domain_validation_and_admin_registration():
    good = FetchAllowDomain(domain="Docs.Example.com")
    good.full_clean()
    assert good.domain == "docs.example.com"
    with pytest.raises(ValidationError):
        FetchAllowDomain(domain="not a domain!").full_clean()
    src = CuratedSource(domain="example.org", title="Ex", tags="a, B ,, c")
    assert src.tag_list == ["a", "b", "c"] and src.entry_url == "https://example.org/"
    assert admin.site.is_registered(FetchAllowDomain)
    assert admin.site.is_registered(CuratedSource)


def test_public_api_is_exported():
    for name in (
        "fetch_many",
        "extract_urls",
        "format_context_block",
        "metrics_snapshot",
        "FetchResult",
    ):
        assert callable(getattr(webfetch, name))
    import webfetch.search as search_module

    assert callable(search_module.search)
    with pytest.raises(AttributeError):
        _ = webfetch.nope
