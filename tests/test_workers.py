"""Several processes serving one log: ``streamwire serve --workers N`` (one port, N processes, each
with its own hubs) on SQLite and Redis, and the cross-process wake-up it relies on: a SQLite reader
parked in one process gets the ``end`` another process writes, also when a call of its own process
saw that commit first (issue 25: a run stopped through the process that is not running it)."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame
from streamwire.log.sqlite import SQLiteLog
from streamwire.testing import read_n

pytestmark = pytest.mark.anyio


async def test_a_call_that_sees_another_connections_commit_wakes_the_parked_readers(
        tmp_path: Path) -> None:
    """The worker's watch is off (an hour); the only thing that can notice the other log's commit
    is this log's next transaction (here ``info``, in serve the stop polling the run's record).
    It used to take the change for itself and leave the reader asleep."""
    path = tmp_path / "log.db"
    async with (SQLiteLog(path) as other,
                SQLiteLog(path, poll_interval=3600, watch_interval=3600,
                          writer_timeout=3600) as here):
        await other.create_stream("s")
        await other.append("s", 0, b"1")
        frames = here.read("s", 0)
        try:
            assert await read_n(frames, 2) == [ChunkFrame(1, msgspec.Raw(b"1")), CaughtUpFrame(1)]

            async def end_then_look() -> None:
                await anyio.sleep(0.1)  # the reader is parked
                await other.end_stream("s", "interrupted")
                assert (await here.info("s")).status == "interrupted"

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(end_then_look)
                    assert await read_n(frames, 1) == [EndFrame("interrupted")]
        finally:
            await frames.aclose()  # type: ignore[attr-defined]
