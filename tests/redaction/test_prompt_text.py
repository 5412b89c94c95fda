"""HAL's own prompt text is never taken for a secret: a redaction hit in the skill document
would send the models a placeholder instead of HAL's words (a sentence ending in
"token: `metrics_forbidden`" was taken for an assignment, and every turn's prompt changed)."""

from __future__ import annotations

from hal.tools import skill_text
from providers.redaction.scrub import _detect


def test_the_skill_document_has_nothing_redaction_would_hold_back():
    text = skill_text()
    hits = _detect(text, True)
    assert not hits, [(h.kind, text[max(0, h.start - 40) : h.end + 10]) for h in hits]
