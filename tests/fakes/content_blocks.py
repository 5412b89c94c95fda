"""The content-block checks of the real APIs, for the fakes: a request whose image or
document blocks (Anthropic) or content parts (OpenAI Chat Completions) are not in the
shape the official SDKs send is refused with a 400 as the real service would."""

from __future__ import annotations

import base64
import binascii
from typing import Any

IMAGE_MEDIA_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def _b64(data: Any) -> bool:
    if not isinstance(data, str) or not data:
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def anthropic_problem(body: dict[str, Any]) -> str | None:
    """Why the Messages API would refuse these blocks (None: they are well formed)."""
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, str):
            continue
        for j, block in enumerate(content or []):
            where = f"messages.{i}.content.{j}"
            kind = block.get("type")
            if kind in ("image", "document") and message.get("role") != "user":
                return f"{where}: {kind} blocks are only allowed in user messages"
            if kind == "image":
                source = block.get("source") or {}
                if source.get("type") != "base64":
                    return f"{where}.image.source.type: Input should be 'base64' or 'url'"
                if source.get("media_type") not in IMAGE_MEDIA_TYPES:
                    return f"{where}.image.source.base64.media_type: Input should be one of ..."
                if not _b64(source.get("data")):
                    return f"{where}.image.source.base64.data: invalid base64 data"
                if set(block) - {"type", "source", "cache_control"}:
                    return f"{where}.image: Extra inputs are not permitted"
            elif kind == "document":
                source = block.get("source") or {}
                if source.get("type") != "text" or source.get("media_type") != "text/plain":
                    return f"{where}.document.source: Input tag does not match expected tags"
                if not isinstance(source.get("data"), str):
                    return f"{where}.document.source.text.data: Input should be a valid string"
                if set(block) - {
                    "type",
                    "source",
                    "title",
                    "context",
                    "citations",
                    "cache_control",
                }:
                    return f"{where}.document: Extra inputs are not permitted"
            elif kind not in ("text", "tool_use", "tool_result"):
                return f"{where}: Input tag '{kind}' found using 'type' does not match"
    return None


def openai_problem(body: dict[str, Any], blind_models: set[str]) -> str | None:
    """Why Chat Completions would refuse these content parts (None: well formed)."""
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        for j, part in enumerate(content):
            kind = part.get("type")
            if kind == "text":
                if not isinstance(part.get("text"), str) or set(part) != {"type", "text"}:
                    return f"Invalid value for 'messages[{i}].content[{j}]'"
            elif kind == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                if message.get("role") != "user":
                    return f"Image URLs are only allowed for messages with role 'user' ({i})"
                if not url.startswith("data:image/") or ";base64," not in url:
                    return f"Invalid image_url in messages[{i}].content[{j}]"
                if not _b64(url.partition(";base64,")[2]):
                    return f"Invalid base64 image in messages[{i}].content[{j}]"
                if body.get("model") in blind_models:
                    return "Invalid content type. image_url is only supported by certain models."
            else:
                return f"Invalid value: '{kind}'. Supported values are: 'text' and 'image_url'."
    return None
