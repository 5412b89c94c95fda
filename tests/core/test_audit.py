"""The audit log: rows written by actions, the page and API filters."""

import pytest

from hal.actions.base import Actor, record_audit
from hal.actions.operators import check_set_language
from hal.errors import InvalidInput
from hal.models import AuditEntry, OperatorProfile

pytestmark = pytest.mark.django_db


def test_an_action_writes_one_row_with_before_and_after(operator):
    actor = Actor(user=operator, via="web", request_id="r1")
    check_set_language(actor=actor, language="ko")
    entry = AuditEntry.objects.get(action="operator.language")
    assert entry.actor == operator
    assert entry.via == "web"
    assert entry.request_id == "r1"
    assert entry.before == {"language": ""}
    assert entry.after == {"language": "ko"}


def test_a_refused_action_is_audited_and_changes_nothing(operator):
    actor = Actor(user=operator, via="ai")
    with pytest.raises(InvalidInput):
        check_set_language(actor=actor, language="xx")
    entry = AuditEntry.objects.get(action="operator.language")
    assert (entry.result, entry.error_code, entry.via) == ("refused", "invalid_language", "ai")
    assert not OperatorProfile.objects.filter(user=operator, language="xx").exists()


def test_same_action_through_web_and_ai_writes_the_same_row(client_op, operator):
    client_op.post("/language/", {"language": "ko", "next": "/audit/"})
    check_set_language(actor=Actor(user=operator, via="ai"), language="en")
    web, ai = AuditEntry.objects.filter(action="operator.language").order_by("id")
    assert (web.via, ai.via) == ("web", "ai")
    assert web.actor == ai.actor == operator
    assert (web.target_type, web.target_id) == (ai.target_type, ai.target_id)


def _seed(operator):
    actor = Actor(user=operator, via="web")
    record_audit(actor, "servers.isolate", target_type="server", target_id="1", target_label="a")
    record_audit(actor, "servers.approve", target_type="server", target_id="2", target_label="b")
    record_audit(
        Actor.for_system("agent", "agent:b"), "agent.heartbeat", target_type="server", target_id="2"
    )


def test_audit_api_filters(client_op, operator):
    _seed(operator)
    by_action = client_op.get("/api/audit?action=servers").json()["entries"]
    assert {e["action"] for e in by_action} == {"servers.isolate", "servers.approve"}
    by_target = client_op.get("/api/audit?target_type=server&target_id=2").json()["entries"]
    assert {e["action"] for e in by_target} == {"servers.approve", "agent.heartbeat"}
    by_actor = client_op.get("/api/audit?actor=agent:b").json()["entries"]
    assert [e["action"] for e in by_actor] == ["agent.heartbeat"]
    bad = client_op.get("/api/audit?since=yesterday")
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_filter"


def test_audit_page_shows_filtered_rows(client_op, operator):
    _seed(operator)
    page = client_op.get("/audit/?action=servers.isolate").content.decode()
    assert "servers.isolate" in page
    assert "servers.approve" not in page


def test_language_switch_translates_the_console(client_op):
    client_op.post("/language/", {"language": "ko", "next": "/audit/"})
    page = client_op.get("/audit/").content.decode()
    assert 'lang="ko"' in page
    assert "감사 로그" in page
