"""Refs that may be an id or a name (server, module, release, connection, job): a string
of digits that is not an id — "²" (str.isdigit() says yes, int() refuses it) or past the
database's range — is no id and never a 500 (hal/web/ids.py)."""

from __future__ import annotations

import pytest

from hal.errors import NotFound

HUGE = str(2**70)


@pytest.mark.parametrize("ref", ["²", "١٢", HUGE, 2**70, True])
def test_resolvers_answer_not_found(db, ref):
    from hal.actions.jobs.records import resolve_job
    from hal.actions.modules import resolve_module
    from hal.actions.releases.artifacts import resolve_release
    from hal.actions.servers.records import resolve_server
    from providers.actions.fields import resolve_connection

    for resolve, code in (
        (resolve_server, "server_not_found"),
        (resolve_module, "module_not_found"),
        (resolve_release, "release_not_found"),
        (resolve_connection, "connection_not_found"),
        (resolve_job, "job_not_found"),
    ):
        with pytest.raises(NotFound) as refused:
            resolve(ref)
        assert refused.value.code == code, resolve.__name__


def test_a_numeric_hostname_is_still_found_by_name(db):
    from hal.actions.servers.records import resolve_server
    from hal.models import Server

    server = Server.objects.create(hostname="²")  # not an id: looked up as a name
    assert resolve_server("²") == server
    assert resolve_server(str(server.pk)) == server


@pytest.mark.parametrize(
    "path",
    [
        "/api/servers/²",
        f"/api/jobs?before_id={HUGE}",
        f"/api/incidents/{HUGE}",
        "/api/metrics?server=²",
        f"/api/metrics?server={HUGE}",
    ],
)
def test_requests_answer_without_a_500(client_op, path):
    response = client_op.get(path)
    assert response.status_code in (200, 400, 404), response.content
