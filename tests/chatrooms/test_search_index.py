"""SQLite's full-text index of messages (migration 0005) is kept by three triggers on
chatrooms_message; a later migration that makes SQLite rebuild the table (Django's
`_remake_table`, e.g. adding a NOT NULL field) drops them, and search then finds nothing
new (found when issue 49's `branch_path` landed). Whatever migrations come later, the
triggers must be there (tests/chatrooms/test_archive_search.py: what they keep)."""

from __future__ import annotations

import pytest
from django.db import connection

FTS = "chatrooms_message_fts"


@pytest.mark.django_db
def test_the_search_triggers_survive_every_migration():
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL searches with its own full-text functions")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = "
            "'chatrooms_message' ORDER BY name"
        )
        names = [row[0] for row in cursor.fetchall()]
    assert names == [f"{FTS}_ad", f"{FTS}_ai", f"{FTS}_au"]
