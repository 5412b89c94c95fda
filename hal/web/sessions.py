"""Django's database sessions and model backend, reading their row through hal.db.rows.

Every request of a logged-in operator reads its session row and then its user row. With
the queryset machinery each read cost about a millisecond on the way to a chat's first
token, most of it Python building the same SELECT again (docs/performance.md). The rows,
the expiry rule and the checks are Django's own: only how the SELECT is built differs.
SESSION_ENGINE = "hal.web.sessions"; AUTHENTICATION_BACKENDS = ["hal.web.sessions.ModelBackend"].
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import backends, get_user_model
from django.contrib.sessions.backends import db
from django.core.exceptions import SuspiciousOperation
from django.utils import timezone

from hal.db import rows


class SessionStore(db.SessionStore):
    """`django.contrib.sessions.backends.db` with the session's SELECT built once."""

    def _get_session_from_db(self) -> Any:
        if not self.session_key:
            return None
        try:
            found = rows.first(
                self.model, {"session_key": self.session_key, "expire_date__gt": timezone.now()}
            )
        except SuspiciousOperation as exc:  # as Django's own store reports it
            logging.getLogger(f"django.security.{type(exc).__name__}").warning(str(exc))
            found = None
        if found is None:
            self._session_key = None
        return found


class ModelBackend(backends.ModelBackend):
    """Django's ModelBackend with the request's user read through hal.db.rows."""

    def get_user(self, user_id: Any) -> Any:
        user = rows.first(get_user_model(), {"pk": user_id})
        return user if user is not None and self.user_can_authenticate(user) else None
