"""hal/mcp/changes.py's watcher: a change made right after a client's list is never lost.

The watcher sleeps while nobody listens; a stdio client's first list (or an HTTP listen)
wakes it. Its first mark used to be read whenever the woken task got to it: on a busy
machine that read came after a change the client made meanwhile, the change was taken as
the starting point and never told (CI, 2026-12-06: the stdio test waited 120 s for a
list_changed that never came). The mark is now taken before the list is answered."""

from __future__ import annotations

import anyio
import pytest

from hal.mcp.changes import ResourceChanges
from tests.bounds import eventually


class Session:
    def __init__(self) -> None:
        self.told = 0

    async def send_resource_list_changed(self) -> None:
        self.told += 1


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_change_before_the_watchers_first_read_is_told(anyio_backend, settings):
    settings.HAL_MCP_CHANGES_POLL_SECONDS = 0.01
    marks = [1]

    async def read() -> int:
        return marks[0]

    changes = ResourceChanges()
    session = Session()
    async with anyio.create_task_group() as group:
        group.start_soon(changes.watch, read)
        await anyio.sleep(0.05)  # the watcher waits for a listener
        changes.attach(session, mark=1)  # the client's list was answered at mark 1
        marks[0] = 2  # ... and a change lands before the woken watcher reads
        await eventually(lambda: session.told, "resources/list_changed")
        group.cancel_scope.cancel()
