"""Connection services for the chat orchestrator: the provider of a connection and its
model list; the credentials (with OAuth refresh) live in `providers.credentials` and are
re-exported here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.conf import settings

from providers.credentials import (
    ConnectionCredential,
    CredentialCache,
    CredentialUnavailable,
    get_credential,
    get_credential_sync,
    hand_over_credential,
    oauth_client_config,
    precheck_credentials,
)
from providers.models import (
    AIConnection,
    secret_hints,  # re-exported: it lives with the model so as_dict needs no import back
)
from vault import api as vault

log = logging.getLogger("hal.connections")

__all__ = [
    "CredentialCache",
    "CredentialUnavailable",
    "get_credential",
    "get_credential_sync",
    "get_provider",
    "hand_over_credential",
    "list_models_for",
    "oauth_client_config",
    "precheck_credentials",
    "secret_hints",
]


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def provider_config(conn: AIConnection, *, for_verify: bool = False, credential: Any = None) -> Any:
    """The registry config of a connection (no secret, no DB access)."""
    from providers.registry import ProviderConfig

    scheme = {
        AIConnection.API_KEY: "api_key",
        AIConnection.OAUTH: "bearer",
        AIConnection.LOGIN: "none",
    }[conn.auth_method]
    extra: dict[str, Any] = {}
    models = _setting("HAL_LOCAL_CLI_MODELS", None)
    if models:
        extra["cli_models"] = tuple(models)
    if conn.provider == AIConnection.LOCAL_CLI:
        extra["cli_options"] = local_cli_options(for_verify=for_verify)
    if conn.provider != AIConnection.LOCAL_CLI and getattr(conn, "budgeted", False):
        # The reservation estimates at most this much output (providers/reservations.py):
        # the call is capped at it (an OpenAI-compatible request has no cap of its own).
        extra["max_tokens"] = int(_setting("HAL_BUDGET_OUTPUT_TOKENS", 4096))
    return ProviderConfig(
        connection_id=conn.pk,
        kind=conn.provider,
        base_url=conn.base_url,
        credential=None if scheme == "none" else (credential or ConnectionCredential(conn.pk)),
        auth_scheme=scheme,
        timeout=float(
            _setting("HAL_VERIFY_TIMEOUT_SECONDS", 20)
            if for_verify
            else _setting("HAL_PROVIDER_TIMEOUT_SECONDS", 60)
        ),
        idle_timeout=float(_setting("HAL_PROVIDER_IDLE_TIMEOUT_SECONDS", 60)),
        total_timeout=float(_setting("HAL_PROVIDER_TOTAL_TIMEOUT_SECONDS", 600)),
        max_retries=0 if for_verify else int(_setting("HAL_PROVIDER_MAX_RETRIES", 1)),
        label=conn.name,
        cli_binary=_setting("HAL_LOCAL_CLI_BINARY", "claude"),
        cli_home=_setting("HAL_LOCAL_CLI_HOME", None),
        redact_patterns=bool(getattr(conn, "redact_patterns", True)),
        **extra,
    )


def local_cli_options(*, for_verify: bool = False) -> tuple[tuple[str, Any], ...]:
    """The settings-driven LocalCLIProvider options (see docs/providers.md)."""
    options: list[tuple[str, Any]] = [
        ("config_dir", _setting("HAL_LOCAL_CLI_CONFIG_DIR", None)),
        ("base_url", _setting("HAL_LOCAL_CLI_BASE_URL", "") or ""),
        ("min_version", _setting("HAL_LOCAL_CLI_MIN_VERSION", None)),
    ]
    if for_verify:
        options.append(("probe", bool(_setting("HAL_LOCAL_CLI_VERIFY_PROBE", False))))
    return tuple(options)


def get_provider(connection: AIConnection) -> Any:
    """The cached provider (one SDK client per connection) from providers.registry."""
    from providers.registry import get_provider as registry_get

    return registry_get(provider_config(connection))


def forget_provider(connection_id: int) -> None:
    """Drop the cached provider after a change (config, key, deletion)."""
    from providers.registry import invalidate_provider

    invalidate_provider(connection_id)


async def list_models_for(
    conn: AIConnection, credential: vault.Revealed | None = None
) -> tuple[list[str] | None, str | None, str]:
    """Ask the provider for its models: (models, None, "") or (None, error kind, message).

    `credential` is the already revealed key or token (None for a CLI login). A fresh
    provider is built for each verify so that a changed base URL or key is what gets
    checked, and closed afterwards.
    """
    from providers.base import ProviderError
    from providers.registry import build_provider

    async def current() -> str:
        return credential.reveal() if credential is not None else ""

    provider = build_provider(provider_config(conn, for_verify=True, credential=current))
    limit = float(_setting("HAL_VERIFY_TIMEOUT_SECONDS", 20))
    try:
        async with asyncio.timeout(limit + 1):
            models = await provider.list_models()
    except ProviderError as exc:
        return None, exc.kind, exc.message
    except TimeoutError:
        return None, "timeout", "the provider did not answer in time"
    finally:
        aclose = getattr(provider, "aclose", None)
        if aclose is not None:
            await aclose()
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        return None, "bad_response", "the provider returned a malformed model list"
    # The local CLI reports the version its verify found ("Claude Code 2.1.332").
    found = getattr(provider, "version", "")
    return list(dict.fromkeys(models)), None, (f"Claude Code {found}" if found else "")
