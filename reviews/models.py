"""The stored second opinion on a proposal."""

from __future__ import annotations

from typing import Any

from django.db import models

# The reviewer's answer is kept (stored, served, shown, published) up to this many
# characters; the rest is dropped and the review marked `truncated`. A verdict with its
# lists fits in far less (reviews/parse.py: at most 10 items of 1,000 characters each).
MAX_REVIEW_CHARS = 8000


def cap_text(text: str, truncated: bool = False) -> tuple[str, bool]:
    """(text cut to MAX_REVIEW_CHARS, whether anything was cut)."""
    return text[:MAX_REVIEW_CHARS], truncated or len(text) > MAX_REVIEW_CHARS


class ProposalReview(models.Model):
    """One reviewer model's advice on one proposal; it never decides anything."""

    STREAMING = "streaming"
    DONE = "done"
    FAILED = "failed"
    UNPARSEABLE = "unparseable"
    STATUS_CHOICES = [
        (STREAMING, "streaming"),
        (DONE, "done"),
        (FAILED, "failed"),
        (UNPARSEABLE, "unparseable"),
    ]
    VERDICTS = ("agree", "concerns", "disagree")

    proposal = models.OneToOneField(
        "hal.Proposal", on_delete=models.CASCADE, related_name="second_opinion"
    )
    # Plain ids and a name kept as text: a deleted connection must not delete the record.
    reviewer_connection_id = models.BigIntegerField(null=True, blank=True)
    reviewer_name = models.CharField(max_length=100, blank=True)
    reviewer_model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=STREAMING)
    verdict = models.CharField(max_length=16, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    check_first = models.JSONField(default=list, blank=True)
    # What the model said, verbatim up to MAX_REVIEW_CHARS (shown as plain text when it
    # could not be parsed); `truncated` when the answer went on past that.
    text = models.TextField(blank=True)
    truncated = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # What the reviewer was given besides the proposal (e.g. how many read results).
    context = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"review of proposal {self.proposal_id} by {self.reviewer_name or '?'}"

    def as_dict(self, *, details: bool = True) -> dict[str, Any]:
        """The API/WS shape; the summary view keeps status and verdict, not the model's
        words (they can quote the proposal's arguments, which are room content)."""
        # Rows stored before the cap was kept are cut here too: never more than the cap.
        text, truncated = cap_text(self.text or "", self.truncated)
        data: dict[str, Any] = {
            "status": self.status,
            "verdict": self.verdict or None,
            "reasons": list(self.reasons or []),
            "check_first": list(self.check_first or []),
            "text": text,
            "truncated": truncated,
            "error": self.error or None,
            "reviewer": self.reviewer_name or None,
            "reviewer_connection_id": self.reviewer_connection_id,
            "reviewer_model": self.reviewer_model or None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
            "context": dict(self.context or {}),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "details_visible": details,
        }
        if not details:
            data.update(reasons=[], check_first=[], text="", context={})
        return data
