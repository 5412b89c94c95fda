"""Notifications of one new group posted at the same moment to two HAL daphne processes
make one incident (the source's row lock; SQLite's write lock), and each answers 200.
(One process runs its sync views one at a time: two processes are what races.)"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from alerts.models import Alert, AlertGroup
from hal.models import Incident
from tests.alerts.conftest import alert, make_source, notification
from tests.bounds import WAIT

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 15


def test_simultaneous_posts_of_new_groups_open_one_incident_each(web, operator):
    from tests.investigations.conftest import change_setting

    change_setting(operator, "alerts.storm_groups", ROUNDS + 1)  # not a storm here
    _row, token, _key = make_source(operator)
    urls = [web("a").url, web("b").url]
    statuses: list[int] = []
    lock = threading.Lock()

    def send(url: str, body: bytes, barrier: threading.Barrier) -> None:
        request = urllib.request.Request(
            url + "/api/alerts/alertmanager",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        barrier.wait(WAIT)
        try:
            with urllib.request.urlopen(request, timeout=WAIT) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        with lock:
            statuses.append(status)

    for n in range(ROUNDS):
        body = json.dumps(notification(f"g-race-{n}", [alert(f"Race{n}")])).encode()
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=send, args=(u, body, barrier)) for u in urls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
    assert statuses == [200] * (2 * ROUNDS)
    assert Incident.objects.count() == ROUNDS
    assert set(AlertGroup.objects.values_list("notifications", flat=True)) == {2}
    assert set(Alert.objects.values_list("seen", flat=True)) == {2}
