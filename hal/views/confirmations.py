"""The three-step confirmation API for human high-risk clicks.

POST /api/confirmations {action, params}        → step 1, the impact
POST /api/confirmations/<token>/target {target} → step 2, retype the identifier
POST /api/confirmations/<token>/execute         → step 3, run it (needs recent re-auth)
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.views.decorators.http import require_POST

from hal.actions import confirm
from hal.actions.base import Actor
from hal.web.api import api, json_body


def _result(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    return value


@require_POST
@api()
def start(request: HttpRequest) -> tuple[dict, int]:
    body = json_body(request)
    conf = confirm.check_start_confirmation(
        actor=Actor.from_request(request, via="api"),
        action_code=str(body.get("action", "")),
        params=body.get("params") or {},
    )
    return {"confirmation": conf.as_dict()}, 201


@require_POST
@api()
def target(request: HttpRequest, token: str) -> dict:
    body = json_body(request)
    conf = confirm.check_confirm_target(
        actor=Actor.from_request(request, via="api"), token=token, typed=body.get("target")
    )
    return {"confirmation": conf.as_dict()}


@require_POST
@api()
def execute(request: HttpRequest, token: str) -> dict:
    result = confirm.check_execute_confirmation(
        actor=Actor.from_request(request, via="api"), token=token
    )
    return {"result": _result(result)}
