"""Full-text search of messages on SQLite: an FTS5 index over finished messages' text,
kept by triggers that fire once per message (when it stops streaming), never per token.
PostgreSQL searches with its own full-text functions (chatrooms/search.py): nothing here."""

from django.db import migrations

FTS = "chatrooms_message_fts"
SQLITE_UP = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(text, content='chatrooms_message', "
    "content_rowid='id', tokenize='unicode61')",
    f"CREATE TRIGGER {FTS}_ai AFTER INSERT ON chatrooms_message "
    f"WHEN new.status != 'streaming' BEGIN "
    f"INSERT INTO {FTS}(rowid, text) VALUES (new.id, new.text); END",
    f"CREATE TRIGGER {FTS}_au AFTER UPDATE OF text, status ON chatrooms_message "
    f"WHEN new.status != 'streaming' OR old.status != 'streaming' BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) SELECT 'delete', old.id, old.text "
    f"WHERE old.status != 'streaming'; "
    f"INSERT INTO {FTS}(rowid, text) SELECT new.id, new.text "
    f"WHERE new.status != 'streaming'; END",
    f"CREATE TRIGGER {FTS}_ad AFTER DELETE ON chatrooms_message "
    f"WHEN old.status != 'streaming' BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', old.id, old.text); END",
    f"INSERT INTO {FTS}(rowid, text) SELECT id, text FROM chatrooms_message "
    "WHERE status != 'streaming'",
]
SQLITE_DOWN = [
    f"DROP TRIGGER IF EXISTS {FTS}_ai",
    f"DROP TRIGGER IF EXISTS {FTS}_au",
    f"DROP TRIGGER IF EXISTS {FTS}_ad",
    f"DROP TABLE IF EXISTS {FTS}",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "sqlite":
            return
        for sql in statements:
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("chatrooms", "0004_chat_archive"),
    ]

    operations = [migrations.RunPython(_run(SQLITE_UP), _run(SQLITE_DOWN))]
