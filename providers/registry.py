"""Providers built from plain connection config, one per connection id, reused across calls."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .anthropic_provider import AnthropicProvider
from .base import DEFAULT_IDLE_TIMEOUT, DEFAULT_TOTAL_TIMEOUT, CredentialGetter, Provider
from .local_cli import DEFAULT_CLI_MODELS, LocalCLIProvider
from .openai_compat import OpenAICompatProvider

PROVIDER_KINDS = ("anthropic", "openai_compat", "local_cli")
AUTH_SCHEMES = ("api_key", "bearer", "none")


@dataclass(frozen=True)
class ProviderConfig:
    """What the registry needs to build a provider; holds no secret, only a getter and a hint.

    `version` must change whenever the connection's config or credential changes (e.g. the
    row's updated_at plus the vault secret's version); a new version rebuilds the client.
    """

    connection_id: int | str
    kind: str
    base_url: str = ""
    credential: CredentialGetter | None = field(default=None, compare=False, repr=False)
    auth_scheme: str = "api_key"
    timeout: float = 60.0
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT
    max_retries: int = 1
    version: str = ""
    label: str = ""
    credential_hint: str = ""
    cli_binary: str = "claude"
    cli_home: str | None = None
    cli_models: tuple[str, ...] = DEFAULT_CLI_MODELS
    # More LocalCLIProvider options as (name, value) pairs: config_dir, base_url,
    # min_version, probe.
    cli_options: tuple[tuple[str, Any], ...] = ()
    # A call's output cap (None: the provider's default). Set for budgeted connections:
    # a reservation counts at most this many output tokens for a call.
    max_tokens: int | None = None
    # Redaction's pattern part on this connection's calls (known values always).
    redact_patterns: bool = True

    def __post_init__(self) -> None:
        if self.kind not in PROVIDER_KINDS:
            raise ValueError(f"unknown provider kind {self.kind!r}")
        if self.auth_scheme not in AUTH_SCHEMES:
            raise ValueError(f"unknown auth scheme {self.auth_scheme!r}")

    def fingerprint(self) -> tuple[Any, ...]:
        """Everything that, when changed, requires a new SDK client."""
        return (
            self.kind,
            self.base_url,
            self.auth_scheme,
            self.timeout,
            self.idle_timeout,
            self.total_timeout,
            self.max_retries,
            self.version,
            self.cli_binary,
            self.cli_home,
            self.cli_models,
            self.max_tokens,
            self.redact_patterns,
        )


async def _no_credential() -> str:
    return ""


def build_provider(config: ProviderConfig) -> Provider:
    """A new provider for `config` (the registry caches these; call it directly in tests)."""
    provider = _build(config)
    if not config.redact_patterns:
        provider.redact_patterns = False  # type: ignore[attr-defined]
    return provider


def _build(config: ProviderConfig) -> Provider:
    if config.kind == "local_cli":
        return LocalCLIProvider(
            binary=config.cli_binary,
            timeout=config.timeout,
            idle_timeout=config.idle_timeout,
            total_timeout=config.total_timeout,
            max_retries=config.max_retries,
            home=config.cli_home,
            models=config.cli_models,
            label=config.label,
            **dict(config.cli_options),
        )
    common: dict[str, Any] = {
        "base_url": config.base_url,
        "credential": config.credential or _no_credential,
        "auth_scheme": "bearer" if config.auth_scheme == "bearer" else "api_key",
        "timeout": config.timeout,
        "idle_timeout": config.idle_timeout,
        "total_timeout": config.total_timeout,
        "max_retries": config.max_retries,
        "label": config.label,
        "credential_hint": config.credential_hint,
    }
    if config.max_tokens:
        common["max_tokens"] = config.max_tokens
    if config.kind == "anthropic":
        return AnthropicProvider(**common)
    return OpenAICompatProvider(**common)


class ProviderRegistry:
    """One provider (hence one SDK client and connection pool) per connection id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int | str, tuple[tuple[Any, ...], Any]] = {}

    def get(self, config: ProviderConfig) -> Any:
        """The cached provider for this connection, rebuilt when its fingerprint changed.

        The credential getter is refreshed on every get: it is looked up at call time."""
        fingerprint = config.fingerprint()
        with self._lock:
            entry = self._entries.get(config.connection_id)
            if entry is not None and entry[0] == fingerprint:
                provider = entry[1]
            else:
                # A replaced provider is not closed: a call may still be streaming on it.
                # Its SDK client releases the pool when garbage collected after that call.
                provider = build_provider(config)
                self._entries[config.connection_id] = (fingerprint, provider)
        if config.credential is not None and hasattr(provider, "credential"):
            provider.credential = config.credential
        return provider

    def invalidate(self, connection_id: int | str) -> None:
        """Forget a connection's provider (deleted, disabled, or credential replaced)."""
        with self._lock:
            self._entries.pop(connection_id, None)

    async def aclose(self) -> None:
        with self._lock:
            providers = [entry[1] for entry in self._entries.values()]
            self._entries.clear()
        for provider in providers:
            await provider.aclose()


_default = ProviderRegistry()


def get_provider(config: ProviderConfig) -> Any:
    """The process-wide registry's provider for `config`."""
    return _default.get(config)


def invalidate_provider(connection_id: int | str) -> None:
    """Drop the process-wide registry's provider for a connection."""
    _default.invalidate(connection_id)


def default_registry() -> ProviderRegistry:
    return _default
