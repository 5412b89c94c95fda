"""Every audit action the code writes has a human label (shown with the raw code on hover),
and the audit pages show labels, not codes, in both languages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.utils import translation

from hal.i18n import labels

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "hal",
    "chatrooms",
    "providers",
    "reviews",
    "runbooks",
    "vault",
    "webfetch",
    "notifications",
    "investigations",
)
PATTERNS = (
    re.compile(r'@action\(\s*"([^"]+)"'),
    re.compile(r'record_audit\(\s*[^,()]+(?:\([^)]*\))?,\s*"([^"]+)"'),
    re.compile(r'action_code\s*=\s*"([^"]+)"'),
    re.compile(r'^[A-Z_]*CODE\s*=\s*"([a-z_]+\.[a-z_.]+)"', re.M),
)


def written_actions() -> set[str]:
    codes: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            for pattern in PATTERNS:
                codes.update(pattern.findall(text))
    return codes


def test_the_scan_finds_the_actions():
    found = written_actions()
    assert {"chat.message.send", "settings.change", "chat.archive.continue"} <= found
    assert len(found) > 80


def test_every_written_action_has_a_label():
    missing = sorted(written_actions() - set(labels.AUDIT_ACTION_LABELS))
    assert missing == [], f"add these to hal.i18n.labels.AUDIT_ACTION_LABELS: {missing}"


def test_labels_are_translated_to_korean():
    english = {code: str(label) for code, label in labels.AUDIT_ACTION_LABELS.items()}
    with translation.override("ko"):
        untranslated = [
            code
            for code, label in labels.AUDIT_ACTION_LABELS.items()
            if str(label) == english[code]
        ]
        assert labels.audit_action_label("chat.message.send") == "메시지 보냄"
        assert labels.audit_target_label("room", "room #1 Unified") == "대화방 #1 통합"
        share = labels.audit_target_label("share", "share #2 to user #3")
        assert share == "공유 #2 (받는 사람: 사용자 #3)"
        # Only that shape: another target named like it is a name, shown as it is.
        assert labels.audit_target_label("module", "share #2 to user #3") == "share #2 to user #3"
    assert untranslated == []


@pytest.mark.django_db
def test_dashboard_and_audit_show_the_label_with_the_code_on_hover(client, operator):
    from hal.actions.base import Actor, record_audit

    record_audit(
        Actor(user=operator, via="web"),
        "chat.message.send",
        target_type="room",
        target_id=1,
        target_label="room #1 Unified",
    )
    client.force_login(operator)
    session = client.session
    session["hal_language"] = "ko"
    session.save()
    for url in ("/", "/audit/"):
        page = client.get(url).content.decode()
        assert (
            'title="chat.message.send" data-action="chat.message.send">메시지 보냄</span>' in page
        )
        assert "대화방 #1 통합" in page and "room #1 Unified" not in page
