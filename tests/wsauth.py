"""Give a test WebsocketCommunicator a real logged-in session, as a browser's cookie would."""

from __future__ import annotations

from typing import Any

from django.test import Client


def logged_in_session(user: Any) -> Any:
    """A saved session store logged in as `user` (sync; wrap in sync_to_async in tests)."""
    from django.contrib.sessions.backends.db import SessionStore

    client = Client()
    client.force_login(user)
    return SessionStore(session_key=client.cookies["sessionid"].value)
