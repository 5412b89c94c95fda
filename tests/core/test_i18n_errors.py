"""HalError messages: translated for operators (ko), English for audit rows and models."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import translation
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.errors import HalError, InvalidInput
from tests.core.test_i18n import PO_PATH, parse_po

BASE = Path(settings.BASE_DIR)
SOURCES = ["hal", "chatrooms", "providers", "vault", "webfetch"]
FAMILY_ROOT = {"HalError"}
# Helpers that build a HalError from a message their callers mark (each checked below).
HELPERS = {"bad", "_state_refused", "_artifact_refused"}
# Calls that pass a message through: (file, enclosing function, argument) → why.
PASSTHROUGH = {
    ("providers/actions/oauth.py", "_state_refused", "message"): "marked at each caller",
    ("hal/actions/releases/artifacts.py", "_artifact_refused", "message"): "marked at each caller",
    ("hal/actions/settings.py", "coerce", "str(exc)"): "a setting validator's own text",
    ("providers/credentials.py", "_refresh_locked", "failed"): "format_lazy(_()) built just above",
    ("hal/web/ids.py", "parse_id", "message"): "marked at each caller (the default is marked here)",
}
MARKERS = {"_", "gettext_lazy"}


def _files() -> list[Path]:
    return [
        p
        for root in SOURCES
        for p in sorted((BASE / root).rglob("*.py"))
        if "migrations" not in p.parts and "tests" not in p.parts
    ]


def _family() -> set[str]:
    """HalError and every class deriving from it anywhere in the sources."""
    names = set(FAMILY_ROOT)
    classes = []
    for path in _files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                }
                classes.append((node.name, bases))
    grew = True
    while grew:
        grew = False
        for name, bases in classes:
            if name not in names and bases & names:
                names.add(name)
                grew = True
    return names


def _callee(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else None)


def _marked_msgids(arg: ast.AST) -> list[str] | None:
    """The msgids of a marked message argument, or None if it is not marked."""
    if isinstance(arg, ast.IfExp):
        a, b = _marked_msgids(arg.body), _marked_msgids(arg.orelse)
        return None if a is None or b is None else a + b
    if isinstance(arg, ast.Call) and _callee(arg) == "format_lazy" and arg.args:
        return _marked_msgids(arg.args[0])
    if (
        isinstance(arg, ast.Call)
        and _callee(arg) in MARKERS
        and len(arg.args) == 1
        and isinstance(arg.args[0], ast.Constant)
        and isinstance(arg.args[0].value, str)
    ):
        return [arg.args[0].value]
    return None


def _scan() -> tuple[dict[str, list[str]], list[str]]:
    """({msgid: [where, ...]}, [unmarked call sites])."""
    family = _family() | HELPERS
    msgids: dict[str, list[str]] = {}
    unmarked: list[str] = []
    for path in _files():
        rel = str(path.relative_to(BASE))
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or _callee(node) not in family:
                continue
            if _callee(node) == "_artifact_refused":
                args = node.args[4:5]
            else:
                args = node.args[:1]
            if not args:
                continue  # e.g. VaultError(): its class message is checked separately
            found = _marked_msgids(args[0])
            if found is not None:
                for msgid in found:
                    msgids.setdefault(msgid, []).append(f"{rel}:{node.lineno}")
                continue
            scope = node
            while scope in parents and not isinstance(
                scope, ast.FunctionDef | ast.AsyncFunctionDef
            ):
                scope = parents[scope]
            name = getattr(scope, "name", "")
            if (rel, name, ast.unparse(args[0])) not in PASSTHROUGH:
                unmarked.append(f"{rel}:{node.lineno} {ast.unparse(args[0])[:80]}")
    return msgids, unmarked


MSGIDS, UNMARKED = _scan()
CATALOG = {
    e["msgid"]: e["msgstr"]
    for e in parse_po(PO_PATH.read_text(encoding="utf-8"))
    if e["msgid"] and not e["msgctxt"]
}


def test_the_scan_finds_the_raise_sites():
    # A scanner that finds nothing passes every check below: make sure it sees them.
    assert len(MSGIDS) > 200
    assert "Log in first." in MSGIDS
    assert "Job #{pk} is {status}." in MSGIDS
    assert {"InvalidInput", "VaultError", "SnapshotError", "CredentialUnavailable"} <= _family()


def test_every_halerror_message_is_marked_for_translation():
    assert not UNMARKED, "mark these with _() / format_lazy(_()):\n" + "\n".join(UNMARKED)


@pytest.mark.parametrize("msgid", sorted(MSGIDS), ids=lambda m: m[:60])
def test_every_halerror_msgid_has_a_korean_translation(msgid):
    assert CATALOG.get(msgid, "").strip(), f"{msgid!r} ({MSGIDS[msgid][0]}) is not translated"
    with translation.override("ko"):
        assert translation.gettext(msgid) == CATALOG[msgid], "the .mo is stale"


def test_vault_error_generic_message_is_translated():
    from vault.api import VaultError

    with translation.override("ko"):
        assert VaultError().as_dict()["error"]["message"] == CATALOG[VaultError().message]


# --- HalError itself ----------------------------------------------------------------------


def test_message_is_english_and_as_dict_follows_the_active_language():
    exc = InvalidInput(format_lazy(_("{name} must be text."), name="title"), code="invalid_title")
    with translation.override("ko"):
        assert exc.message == str(exc) == "title must be text."
        assert exc.as_dict() == {
            "error": {"code": "invalid_title", "message": "title은(는) 텍스트여야 합니다."}
        }
    with translation.override("en"):
        assert exc.as_dict()["error"]["message"] == "title must be text."


def test_an_error_raised_while_korean_is_active_still_has_an_english_message():
    with translation.override("ko"):
        exc = HalError(_("Log in first."), code="not_authenticated")
        assert exc.message == "Log in first."
        assert exc.localized_message == "먼저 로그인하세요."
    assert isinstance(exc.message, str) and type(exc.message) is str


def test_plain_string_messages_still_work():
    exc = HalError("provider said no", code="x")
    with translation.override("ko"):
        assert exc.as_dict()["error"]["message"] == "provider said no"


# --- through the API ----------------------------------------------------------------------


@pytest.fixture
def client_ko(client_op):
    assert client_op.post("/language/", {"language": "ko", "next": "/"}).status_code == 302
    return client_op


@pytest.mark.django_db
def test_korean_operator_gets_a_korean_error_and_the_audit_row_stays_english(client_ko):
    from hal.models import AuditEntry

    response = client_ko.post(
        "/api/confirmations",
        {"action": "servers.nonexistent", "params": {}},
        content_type="application/json",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error == {
        "code": "unknown_action",
        "message": "'servers.nonexistent'은(는) 고위험 작업이 아닙니다.",
    }
    row = AuditEntry.objects.get(action="confirmation.start", result="refused")
    assert row.error_code == "unknown_action"
    assert row.message == "'servers.nonexistent' is not a high-risk action."


@pytest.mark.django_db
def test_english_operator_gets_the_same_error_in_english(client_op):
    response = client_op.post(
        "/api/confirmations",
        {"action": "servers.nonexistent", "params": {}},
        content_type="application/json",
    )
    assert response.json()["error"] == {
        "code": "unknown_action",
        "message": "'servers.nonexistent' is not a high-risk action.",
    }


@pytest.mark.django_db
def test_korean_error_from_the_middleware_path(client_ko):
    # Bad JSON is refused before any view code: json_body → @api error rendering.
    response = client_ko.post("/api/confirmations", "{", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_json",
        "message": "요청 본문이 올바른 JSON이 아닙니다.",
    }


@pytest.mark.django_db
def test_korean_error_on_a_server_rendered_page(client_ko):
    response = client_ko.get("/audit/?since=yesterday")
    html = response.content.decode()
    assert "since은(는) ISO 8601 날짜·시간이어야 합니다." in html
    assert "must be an ISO 8601" not in html
