"""Which models can see images: an attached image goes only to those (issue 49).

Anthropic's Messages API takes image blocks on every current Claude model. The local Claude
Code CLI runs with every built-in tool off and Read denied (providers/cli_sandbox.py), so
it could not open an image file: it is sent none. An OpenAI-compatible
endpoint may serve anything: its model sees images when its name matches one of
HAL_CHAT_VISION_MODELS (shell patterns, comma-separated; the default names the families
documented as multimodal). A model that does not is never sent an image part — its API
would refuse the whole request — and the send tells the operator so (chatrooms/files)."""

from __future__ import annotations

from fnmatch import fnmatchcase

from django.conf import settings

DEFAULT_VISION_MODELS = (
    "gpt-4o*,gpt-4.1*,gpt-4-turbo*,gpt-5*,o1*,o3*,o4*,chatgpt-4o*,*vision*,*-vl*,*-vl-*,"
    "llava*,bakllava*,gemini*,gemma3*,pixtral*,claude*,llama-4*,llama3.2-vision*,qwen2.5vl*,"
    "minicpm-v*,moondream*"
)


def vision_patterns() -> list[str]:
    raw = getattr(settings, "HAL_CHAT_VISION_MODELS", "") or DEFAULT_VISION_MODELS
    return [p.strip().lower() for p in raw.split(",") if p.strip()]


def sees_images(provider: str, model: str) -> bool:
    """Whether a connection of `provider` kind, calling `model`, may be sent an image."""
    if provider == "anthropic":
        return True
    if provider == "local_cli":
        return False
    name = (model or "").lower()
    # The model name after a vendor prefix ("openai/gpt-4o", "library/llava") counts too.
    tail = name.rpartition("/")[2]
    return any(fnmatchcase(name, p) or fnmatchcase(tail, p) for p in vision_patterns())
