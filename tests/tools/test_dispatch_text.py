"""A model's tool arguments get the same strict text rules as API input (issue 11 #6)."""

from __future__ import annotations

import pytest

from hal.models import Proposal
from hal.tools import run_tool_call

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "args",
    [
        {"server": "web-01", "reason": "disk\x00full"},  # NUL: PostgreSQL cannot store it
        {"server": "web-01", "reason": "disk \ud800"},  # a lone surrogate: no UTF-8 form
        '{"server": "web-01", "reason": "a\\u0000b"}',
        '{"server": "web-01", "reason": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
)
def test_bad_text_or_nesting_in_tool_arguments_is_refused(world, ai_actor, args):
    outcome = run_tool_call("isolate_server", args, actor=ai_actor)
    assert outcome.error["code"] == "invalid_arguments"
    assert Proposal.objects.count() == 0
