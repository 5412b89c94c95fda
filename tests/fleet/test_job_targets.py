"""A job's server, module and release as its kind is created with them; a missing one is named."""

from __future__ import annotations

import pytest

from hal.actions import jobs, releases
from hal.models import Job
from tests.fleet.conftest import configure_module

pytestmark = pytest.mark.django_db


def test_a_health_job_has_its_server_and_module(op, active_server):
    configure_module(op, "portal", health_check_url="http://127.0.0.1:9/health")
    job = releases.check_module_health(actor=op, module="portal", server=active_server.pk)
    assert jobs.job_server(job) == active_server
    assert jobs.job_module(job).name == "portal"
    with pytest.raises(RuntimeError, match=rf"job #{job.pk} \(health_check\) has no release"):
        jobs.job_release(job)


def test_a_job_row_without_its_targets_is_said_plainly():
    job = Job(kind=Job.DEPLOY)
    with pytest.raises(RuntimeError, match="has no server"):
        jobs.job_server(job)
    with pytest.raises(RuntimeError, match="has no module"):
        jobs.job_module(job)
    with pytest.raises(RuntimeError, match="has no release"):
        jobs.job_release(job)
