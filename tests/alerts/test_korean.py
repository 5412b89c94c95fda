"""The alert panel, the alert timeline entries, the postmortem panel and the catch-up page
read in Korean; what sources and models wrote stays as written."""

from __future__ import annotations

import pytest

from alerts.postmortem import draft_pending_once
from hal.models import Incident
from tests.alerts.conftest import admin, alert, notification, post
from tests.core.test_korean_pages import leftovers
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = {"ops", "alpha"}


def _korean(client, operator):
    from hal.actions.base import Actor
    from hal.actions.operators import check_set_language

    check_set_language(actor=Actor(user=operator, via="web"), language="ko")
    client.force_login(operator)
    session = client.session
    session["hal_language"] = "ko"
    session.save()
    return client


def _english_left(html: str) -> list[str]:
    return sorted({w for w in leftovers(html) if w not in NAMES})


def test_alert_incident_pages_are_korean(investigator, operator, am_source, client):
    from hal.actions.incidents import check_close_incident

    _source, token = am_source
    a = alert("DiskFull", fingerprint="ffff000000000001")
    b = alert("DiskFull", fingerprint="ffff000000000002")
    post(client, token, notification("g-ko", [a]))
    post(client, token, notification("g-ko", [a, b]))
    post(client, token, notification("g-ko", [{**a, "status": "resolved"}, b]))
    post(
        client,
        token,
        notification("g-ko", [{**a, "status": "resolved"}, {**b, "status": "resolved"}]),
    )
    incident = Incident.objects.get()
    ko = _korean(client, operator)

    investigator.fake.replies.push(Reply(text="All quiet now."))
    caught = ko.post(f"/incidents/{incident.pk}/postmortem/", {"op": "catch_up"})
    assert caught.status_code == 200
    html = caught.content.decode()
    assert "All quiet now." in html and _english_left(html) == []

    page = ko.get(f"/incidents/{incident.pk}/").content.decode()
    assert "발생처에서 해결됨" in page and "지금까지 요약" in page
    assert "새 경보 1개 발생 중." in page and "경보 1개 해결됨." in page
    assert _english_left(page) == []

    check_close_incident(actor=admin(operator), incident_id=incident.pk, resolution="ok")
    investigator.fake.replies.push(Reply(text="# Postmortem\n\nDisk filled up."))
    draft_pending_once()
    page = ko.get(f"/incidents/{incident.pk}/").content.decode()
    assert "사후 검토" in page and "Markdown으로 내보내기" in page
    assert _english_left(page) == []
    sources = ko.get("/alerts/").content.decode()
    assert "경보 소스" in sources and _english_left(sources) == []
