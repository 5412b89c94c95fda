"""API of connection budgets and model prices; the usage itself is in each connection's JSON."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from hal.actions.base import Actor
from hal.web.api import dispatch, json_body
from providers import budgets


def _actor(request: HttpRequest) -> Actor:
    return Actor.from_request(request, via="api")


def _put_budget(request: HttpRequest, pk: int) -> dict[str, Any]:
    conn = budgets.check_set_budget(actor=_actor(request), connection=pk, data=json_body(request))
    return conn.as_dict()


def _put_price(request: HttpRequest, pk: int) -> dict[str, Any]:
    conn = budgets.check_set_price(actor=_actor(request), connection=pk, data=json_body(request))
    return conn.as_dict()


connection_budget = dispatch(PUT=_put_budget)
connection_price = dispatch(PUT=_put_price)
