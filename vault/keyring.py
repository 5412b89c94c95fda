"""The vault keyring: ordered keys from HAL_VAULT_KEYS or the key file; first encrypts."""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import re
import secrets
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from hal.paths import vault_key_file
from vault.crypto import KEY_BYTES

log = logging.getLogger("vault")

KEY_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENV_SOURCE = "HAL_VAULT_KEYS"


class KeyringError(Exception):
    """The keyring is missing, unreadable or malformed (messages never contain key material)."""


class KeyringMissing(KeyringError):
    """No keyring is configured: the key file does not exist yet."""


@dataclass(frozen=True)
class Keyring:
    """Ordered (key id, key) pairs, like Django's PASSWORD_HASHERS: first preferred."""

    keys: tuple[tuple[str, bytes], ...] = field(repr=False)
    source: str

    def __post_init__(self) -> None:
        if not self.keys:
            raise KeyringError("the keyring holds no key")

    def __repr__(self) -> str:
        return f"<Keyring {', '.join(self.key_ids)} from {self.source}>"

    __str__ = __repr__

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(kid for kid, _ in self.keys)

    @property
    def primary_id(self) -> str:
        return self.keys[0][0]

    @property
    def primary_key(self) -> bytes:
        return self.keys[0][1]

    def get(self, key_id: str) -> bytes:
        """Return the key `key_id`, or raise KeyringError if the keyring lacks it."""
        for kid, key in self.keys:
            if kid == key_id:
                return key
        raise KeyringError(f"key id {key_id!r} is not in the keyring")


def _decode_key(text: str) -> bytes:
    # Accept both alphabets and missing padding: operators paste keys from many tools.
    text = text.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise KeyringError("a key is not valid base64") from None


def parse_entries(entries: list[str], *, source: str) -> Keyring:
    """Parse `kid:base64key` entries (in preference order) into a Keyring."""
    keys: list[tuple[str, bytes]] = []
    for position, raw in enumerate(entries, start=1):
        kid, sep, encoded = raw.strip().partition(":")
        kid = kid.strip()
        # Errors name the entry's position and source, never its content.
        if not sep or not encoded.strip():
            raise KeyringError(f"entry {position} of {source} is not 'kid:base64key'")
        if not KEY_ID_RE.fullmatch(kid):
            raise KeyringError(f"entry {position} of {source} has an invalid key id")
        try:
            key = _decode_key(encoded)
        except KeyringError:
            raise KeyringError(f"entry {position} of {source} is not valid base64") from None
        if len(key) != KEY_BYTES:
            raise KeyringError(f"entry {position} of {source} is not a 256-bit key")
        if any(kid == seen for seen, _ in keys):
            raise KeyringError(f"key id {kid!r} appears twice in {source}")
        keys.append((kid, key))
    if not keys:
        raise KeyringError(f"{source} holds no key")
    return Keyring(keys=tuple(keys), source=source)


def format_entry(key_id: str, key: bytes) -> str:
    """Return the `kid:base64key` text of one key."""
    if not KEY_ID_RE.fullmatch(key_id):
        raise KeyringError("invalid key id")
    if len(key) != KEY_BYTES:
        raise KeyringError("vault keys are 256-bit")
    return f"{key_id}:{base64.b64encode(key).decode()}"


def generate_key(key_id: str | None = None) -> tuple[str, bytes]:
    """Return a new random (key id, key); the id is time-ordered for readability only."""
    kid = key_id or f"k{datetime.now(UTC):%Y%m%d%H%M%S}-{secrets.token_hex(2)}"
    if not KEY_ID_RE.fullmatch(kid):
        raise KeyringError("invalid key id")
    return kid, secrets.token_bytes(KEY_BYTES)


def configured_keys() -> str:
    """The raw HAL_VAULT_KEYS setting ('' when the key file is used)."""
    return (getattr(settings, "HAL_VAULT_KEYS", "") or "").strip()


def key_file_path() -> Path:
    """Where the key file lives (HAL_VAULT_KEY_FILE, default DATA_DIR/vault.keys)."""
    return vault_key_file()


def uses_key_file() -> bool:
    """True when the keyring comes from the key file (HAL_VAULT_KEYS unset)."""
    return not configured_keys()


_lock = threading.Lock()
_cache: dict[str, tuple[tuple[Any, ...], Keyring]] = {}


def reset_cache() -> None:
    """Forget the cached keyring (tests; the file-change check makes it rarely needed)."""
    with _lock:
        _cache.clear()


def _file_signature(path: Path) -> tuple[Any, ...]:
    st = path.stat()
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_key_file(path: Path) -> Keyring:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyringMissing(f"the vault key file {path} does not exist") from None
    except (OSError, UnicodeDecodeError):
        raise KeyringError(f"the vault key file {path} is not readable") from None
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    return parse_entries(lines, source=str(path))


def _write_new_file(path: Path, text: str, *, replace: bool) -> None:
    """Write `text` to `path` with mode 0600, atomically (never a half-written key file)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".vault-keys-", dir=path.parent)  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        if replace:
            os.replace(tmp, path)
        else:
            # link() fails if the file exists: two processes racing on first use end up
            # sharing whichever key file won, never overwriting each other's key.
            os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _create_key_file(path: Path) -> None:
    kid, key = generate_key()
    header = (
        "# HAL vault keyring: one kid:base64key per line, first encrypts, all decrypt.\n"
        "# Back this file up separately from the database. Never commit it.\n"
    )
    try:
        _write_new_file(path, header + format_entry(kid, key) + "\n", replace=False)
    except FileExistsError:
        return
    log.warning("vault: generated a new key file at %s (key id %s)", path, kid)


def get_keyring(*, create: bool = False) -> Keyring:
    """Return the current keyring; with create=True, generate the default key file if absent."""
    if getattr(settings, "HAL_VAULT_DISABLED", False):
        # A secretless process (HAL's MCP server): it must not be able to decrypt anything.
        raise KeyringError("the vault is not available in this process")
    raw = configured_keys()
    if raw:
        signature: tuple[Any, ...] = (ENV_SOURCE, raw)
        with _lock:
            cached = _cache.get(ENV_SOURCE)
            if cached and cached[0] == signature:
                return cached[1]
        # Commas per the documented format; newlines too, as secret managers emit them.
        entries = [part for part in re.split(r"[,\n]", raw) if part.strip()]
        ring = parse_entries(entries, source=ENV_SOURCE)
        with _lock:
            _cache[ENV_SOURCE] = (signature, ring)
        return ring

    path = key_file_path()
    try:
        signature = _file_signature(path)
    except FileNotFoundError:
        if not create:
            raise KeyringMissing(f"the vault key file {path} does not exist") from None
        _create_key_file(path)
        signature = _file_signature(path)
    except OSError:
        raise KeyringError(f"the vault key file {path} is not readable") from None
    with _lock:
        cached = _cache.get("file")
        if cached and cached[0] == signature:
            return cached[1]
    ring = _read_key_file(path)
    with _lock:
        _cache["file"] = (signature, ring)
    return ring


def prepend_key_to_file(key_id: str, key: bytes) -> Keyring:
    """Make (key_id, key) the key file's first (encrypting) key; older keys still decrypt."""
    if not uses_key_file():
        raise KeyringError("HAL_VAULT_KEYS is set; add the key there instead of the key file")
    path = key_file_path()
    try:
        current: tuple[tuple[str, bytes], ...] = _read_key_file(path).keys
        text = path.read_text(encoding="utf-8")
    except KeyringMissing:
        current, text = (), ""
    if any(kid == key_id for kid, _ in current):
        raise KeyringError(f"key id {key_id!r} is already in the keyring")
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    entries = [format_entry(key_id, key)] + [format_entry(k, v) for k, v in current]
    _write_new_file(path, "\n".join([*comments, *entries]) + "\n", replace=True)
    return get_keyring()


def key_file_mode() -> int | None:
    """Permission bits of the key file, or None if it does not exist."""
    try:
        return path_mode(key_file_path())
    except FileNotFoundError:
        return None


def path_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777
