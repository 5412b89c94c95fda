"""Attached files in each provider's request (issue 49): the conversion functions' exact
shapes, the local CLI's private folder, and the redaction of an attached text file."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

from providers.anthropic_provider import to_anthropic_messages
from providers.base import ChatMessage, FilePart
from providers.local_cli import LocalCLIProvider
from providers.openai_compat import to_openai_messages
from providers.vision import sees_images

from .helpers import collect

LOG = "line one\nline two\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def log_part() -> FilePart:
    return FilePart(
        name="app.log",
        media_type="text/plain",
        sha256=hashlib.sha256(LOG.encode()).hexdigest(),
        text=LOG,
        lines=2,
    )


def png_part() -> FilePart:
    return FilePart(
        name="g.png", media_type="image/png", sha256=hashlib.sha256(PNG).hexdigest(), data=PNG
    )


def test_anthropic_document_and_image_blocks_follow_the_words():
    message = ChatMessage.user("look", speaker="ops (operator)", files=[log_part(), png_part()])
    (turn,) = to_anthropic_messages([message])
    assert [b["type"] for b in turn["content"]] == ["text", "document", "image"]
    assert turn["content"][1]["source"] == {"type": "text", "media_type": "text/plain", "data": LOG}
    assert turn["content"][1]["title"] == "app.log"
    assert turn["content"][2]["source"]["data"] == base64.b64encode(PNG).decode()


def test_openai_inlines_text_and_sends_image_parts_only_to_a_vision_model():
    message = ChatMessage.user("look", speaker="ops", files=[log_part(), png_part()])
    (seeing,) = to_openai_messages("", [message], vision=True)
    assert seeing["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    (blind,) = to_openai_messages("", [message], vision=False)
    assert isinstance(blind["content"], str)
    assert "----- attached file: app.log (2 lines" in blind["content"]
    assert "[image g.png attached" in blind["content"]


def test_which_models_see_images(settings):
    assert sees_images("anthropic", "claude-fake-opus-1")
    assert not sees_images("local_cli", "sonnet")  # its file tools are off
    assert sees_images("openai_compat", "gpt-4o-mini")
    assert sees_images("openai_compat", "openrouter/llava-13b")
    assert not sees_images("openai_compat", "gpt-3.5-turbo")
    settings.HAL_CHAT_VISION_MODELS = "my-vision-*"
    assert sees_images("openai_compat", "my-vision-7b")
    assert not sees_images("openai_compat", "gpt-4o")


async def test_the_local_cli_gets_text_files_in_its_private_folder(fake_claude):
    message = ChatMessage.user("read it", speaker="ops", files=[log_part(), png_part()])
    await collect(
        LocalCLIProvider(timeout=10.0).stream(system="s", messages=[message], tools=[], model="")
    )
    call = fake_claude.calls[0]
    assert call["cwd_entries"] == ["attachments"]
    assert call["attachments"] == {"app.log": {"mode": "0o600", "text": LOG}}
    assert "----- attached file: attachments/app.log (2 lines" in call["stdin"]
    assert "[image g.png attached" in call["stdin"]
    assert not os.path.exists(call["cwd"])  # gone with the run


@pytest.mark.django_db(transaction=True)
async def test_an_attached_text_file_passes_the_same_redaction_as_the_words():
    from providers import redaction
    from tests.redaction.canaries import embed, shaped

    values = shaped()
    lines = embed(values)
    leaky = FilePart(
        name="env.log",
        media_type="text/plain",
        sha256="0" * 64,
        text=lines["github"] + "\n" + lines["aws"] + "\n",
        lines=2,
    )
    _system, out, held = await redaction.outbound("", [ChatMessage.user("see", files=[leaky])])
    (sent,) = out[0].files
    assert values["github"] not in sent.text and values["aws"] not in sent.text
    assert sent.name == "env.log"
    assert sum(held.values()) >= 2
