"""``paused_ttl`` beside ``finished_ttl`` on every backend (memory, SQLite, Redis; asyncio and
trio): a paused stream is kept until it is reactivated by default, expires after ``paused_ttl``
when one is set, and a reactivated stream expires no more; both are checked at construction."""

from __future__ import annotations

import anyio
import pytest

from streamwire.errors import StreamNotFoundError, UsageError
from streamwire.log.memory import MemoryLog
from streamwire.testing import LogFactory

pytestmark = pytest.mark.anyio


async def test_a_paused_stream_is_kept_until_reactivated(make_log: LogFactory) -> None:
    log = await make_log(finished_ttl=0.3)
    assert getattr(log, "paused_ttl") == 0  # noqa: B009 - the default
    for stream_id, status in (("paused", "paused"), ("done", "completed")):
        await log.create_stream(stream_id)
        await log.append(stream_id, 0, b"1")
        await log.end_stream(stream_id, status, state={"k": 1} if status == "paused" else None)
    await anyio.sleep(1.2)
    with pytest.raises(StreamNotFoundError):
        await log.info("done")
    info = await log.info("paused")
    assert (info.status, info.head, info.state) == ("paused", 1, {"k": 1})
    await log.reactivate_stream("paused")
    await log.append("paused", 0, b"2")
    await log.end_stream("paused", "completed")  # now finished_ttl applies
    await anyio.sleep(1.2)
    with pytest.raises(StreamNotFoundError):
        await log.info("paused")


async def test_a_paused_stream_expires_after_paused_ttl(make_log: LogFactory) -> None:
    log = await make_log(finished_ttl=0, paused_ttl=0.3)
    for stream_id in ("a", "b", "done"):
        await log.create_stream(stream_id)
    await log.end_stream("done", "completed")  # finished_ttl=0: kept
    await log.end_stream("a", "paused")
    await log.end_stream("b", "paused")
    await log.reactivate_stream("b")  # active again: no expiry
    await anyio.sleep(1.2)
    with pytest.raises(StreamNotFoundError):
        await log.info("a")
    assert (await log.info("b")).status == "active"
    assert (await log.info("done")).status == "completed"
    assert [i.stream_id for i in await log.list_streams()] == ["b", "done"]


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "1", True])
def test_paused_ttl_is_checked(bad: object) -> None:
    with pytest.raises(UsageError, match="paused_ttl"):
        MemoryLog(paused_ttl=bad)  # type: ignore[arg-type]
