"""The attachment limits (settings, each with its default) and the file types accepted."""

from __future__ import annotations

from django.conf import settings

TEXT_EXTENSIONS = frozenset(
    "log txt text out err conf cfg cnf ini env properties json jsonl ndjson yaml yml toml "
    "csv tsv md rst xml py js mjs ts go rs java kt c h cc cpp hpp cs rb php pl sh bash zsh "
    "ps1 sql diff patch service timer socket tf hcl dockerfile nginx lua r swift scala".split()
)
# Claimed types a text file may arrive with (browsers send octet-stream for unknown ones).
TEXT_TYPES = frozenset(
    {
        "",
        "application/octet-stream",
        "application/json",
        "application/x-ndjson",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/xml",
        "application/x-sh",
        "application/sql",
        "application/javascript",
        "application/x-python",
    }
)


def _int(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def text_bytes() -> int:
    """Largest text file (bytes)."""
    return _int("HAL_CHAT_ATTACH_TEXT_BYTES", 512 * 1024)


def image_bytes() -> int:
    """Largest image (bytes; Anthropic's own limit is 5 MB per image)."""
    return _int("HAL_CHAT_ATTACH_IMAGE_BYTES", 5 * 1024 * 1024)


def message_bytes() -> int:
    """All the files of one message together (bytes)."""
    return _int("HAL_CHAT_ATTACH_MESSAGE_BYTES", 10 * 1024 * 1024)


def message_files() -> int:
    """Files per message."""
    return _int("HAL_CHAT_ATTACH_MESSAGE_FILES", 10)


def image_side() -> int:
    """Longest side of an image (pixels)."""
    return _int("HAL_CHAT_ATTACH_IMAGE_SIDE", 8000)


def image_pixels() -> int:
    """Pixels of an image (width × height)."""
    return _int("HAL_CHAT_ATTACH_IMAGE_PIXELS", 40_000_000)


def largest_file() -> int:
    return max(text_bytes(), image_bytes())
