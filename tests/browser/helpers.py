"""Browser-test helpers: JSON API calls through the page's session, models on fakes, boxes."""

from __future__ import annotations

import json
from typing import Any

from tests.bounds import WAIT
from tests.fakes.anthropic_api import FakeAnthropic


class ApiFailed(AssertionError):
    """An API call made by a test's setup answered with an unexpected status."""


def csrf(page) -> str:
    for cookie in page.context.cookies():
        if cookie["name"] == "csrftoken":
            return cookie["value"]
    raise AssertionError("no csrftoken cookie: log in first")


def call(page, base_url: str, method: str, path: str, body: Any = None, ok=(200, 201, 202)):
    """A JSON API call with the browser context's session and CSRF token; returns the JSON."""
    headers = {"Accept": "application/json", "X-CSRFToken": csrf(page)}
    kwargs: dict[str, Any] = {"method": method, "headers": headers}
    if body is not None:
        headers["Content-Type"] = "application/json"
        kwargs["data"] = json.dumps(body)
    response = page.request.fetch(base_url + path, **kwargs)
    data = response.json() if "json" in response.headers.get("content-type", "") else {}
    if ok and response.status not in ok:
        raise ApiFailed(f"{method} {path} → {response.status}: {data}")
    return data if ok else (response.status, data)


def reauth(page, base_url: str, user) -> None:
    call(page, base_url, "POST", "/api/auth/reauth", {"password": user.raw_password})


def connect_model(page, base_url: str, user, name: str, fake, api_key: str) -> dict:
    """Create a connection on the live server, store its key, verify it, pick a model."""
    provider = "anthropic" if isinstance(fake, FakeAnthropic) else "openai_compat"
    reauth(page, base_url, user)
    conn = call(
        page,
        base_url,
        "POST",
        "/api/ai/connections",
        {"name": name, "provider": provider, "auth_method": "api_key", "base_url": fake.base_url},
    )
    call(page, base_url, "PUT", f"/api/ai/connections/{conn['id']}/secret", {"api_key": api_key})
    call(page, base_url, "POST", f"/api/ai/connections/{conn['id']}/verify")
    return call(
        page, base_url, "PATCH", f"/api/ai/connections/{conn['id']}", {"model": fake.models[0]}
    )


def box(page, selector: str) -> dict:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, f"{selector} is not visible"
    return found


def settled_box(page, selector: str, frames: int = 60) -> dict:
    """The box once layout has settled: the same in two reads a couple of frames apart (a
    loaded machine may still be laying out a panel that just opened)."""
    last = None
    for _ in range(frames):
        page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
        now = box(page, selector)
        if now == last:
            return now
        last = now
    return last


def overlaps(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def watch_console(page) -> list[str]:
    """Collect console errors and uncaught exceptions of a page (CSP violations among them)."""
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type in ("error",) else None)
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    return problems


def wait_until(check, timeout: float = WAIT, interval: float = 0.1):
    """Poll a Python check until it returns a truthy value (or fail after `timeout`)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        time.sleep(interval)


def saved_panel(page, base_url: str) -> dict:
    return call(page, base_url, "GET", "/api/ai/panel")["panel"]


def expire_reauth(page) -> None:
    """Age this browser session's last password entry past the re-auth window.

    A fresh login counts as a re-authentication; approving right after it would never
    show the inline re-auth dialog. The session lives in the shared test database.
    """
    import time

    from django.contrib.sessions.backends.db import SessionStore

    from hal.actions.base import SESSION_REAUTH_KEY

    key = next(c["value"] for c in page.context.cookies() if c["name"] == "sessionid")
    session = SessionStore(session_key=key)
    session[SESSION_REAUTH_KEY] = time.time() - 3600
    session.save()
