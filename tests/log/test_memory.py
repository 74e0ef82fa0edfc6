"""MemoryLog beyond the contract suite: limits, fan-out, no buffer per reader, compaction under
trimming, the marker cap, TTL sweeping and argument coercion."""

from __future__ import annotations

import tracemalloc
from typing import Any

import anyio
import msgspec
import pytest

from streamwire.errors import LogError, PayloadError, UsageError
from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame, FailFrame, StreamFrame
from streamwire.log import StreamLog
from streamwire.log.memory import MAX_PENDING_MARKERS, MemoryLog
from streamwire.testing import GUARD, chunk_of, read_all, read_n

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("limits", "named"), [
    ({"max_chunks_per_stream": 0}, "max_chunks_per_stream"),
    ({"max_bytes_per_stream": -1}, "max_bytes_per_stream"),
    ({"max_chunk_size": 1.5}, "max_chunk_size"),
    ({"max_chunk_size": True}, "max_chunk_size"),
    ({"finished_ttl": -1}, "finished_ttl"),
    ({"finished_ttl": float("nan")}, "finished_ttl"),
    ({"finished_ttl": "1"}, "finished_ttl"),
    ({"max_chunk_size": 200, "max_bytes_per_stream": 100}, "max_bytes_per_stream"),
])
def test_bad_limits_name_the_keyword(limits: dict[str, Any], named: str) -> None:
    with pytest.raises(UsageError, match=named):
        MemoryLog(**limits)


def test_is_a_stream_log() -> None:
    assert isinstance(MemoryLog(), StreamLog)


async def test_many_readers_share_one_append() -> None:
    log = MemoryLog()
    await log.create_stream("s")
    got: list[list[StreamFrame]] = [[] for _ in range(300)]
    attached = 0
    all_attached = anyio.Event()

    async def reader(i: int) -> None:
        nonlocal attached
        async for frame in log.read("s"):
            got[i].append(frame)
            if isinstance(frame, CaughtUpFrame):
                attached += 1
                if attached == len(got):
                    all_attached.set()

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            for i in range(len(got)):
                tg.start_soon(reader, i)
            await all_attached.wait()
            await log.append("s", 0, b'"hi"')
            await log.end_stream("s")
    expected = [CaughtUpFrame(0), ChunkFrame(1, msgspec.Raw(b'"hi"')), EndFrame("completed")]
    assert all(frames == expected for frames in got)


async def test_a_reader_that_does_not_read_costs_the_log_nothing() -> None:
    """Pull-based readers: appends never buffer anything per reader."""

    async def fill(attached: int) -> int:
        log = MemoryLog()
        await log.create_stream("s")
        readers = [log.read("s") for _ in range(attached)]
        for frames in readers:
            await read_n(frames, 1)  # attached, parked at caught-up
        chunk = chunk_of(7)
        tracemalloc.start()
        try:
            for _ in range(20_000):
                await log.append("s", 0, chunk)
            used = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        for frames in readers:
            await frames.aclose()  # type: ignore[attr-defined]
        return used

    alone = await fill(0)
    with_readers = await fill(20)
    assert with_readers - alone < 20_000  # far below one byte per chunk per reader


async def test_readers_that_give_up_while_parked_leave_nothing_behind() -> None:
    """A parked reader waits on a future of its own; cancelling it takes the future away again,
    so a stream nobody writes to does not collect one per reader that left."""
    log = MemoryLog()
    await log.create_stream("s")
    for _ in range(100):
        with anyio.move_on_after(0.001):
            async for _frame in log.read("s"):  # caught-up, then parked until cancelled
                pass
    st = log._streams["s"]  # white-box: the parked futures
    assert st.waiters == []
    assert st.readers == 0
    with anyio.fail_after(GUARD):
        frames = log.read("s")
        assert await read_n(frames, 1) == [CaughtUpFrame(0)]
        await log.append("s", 0, b"1")
        assert await read_n(frames, 1) == [ChunkFrame(1, msgspec.Raw(b"1"))]
        await frames.aclose()  # type: ignore[attr-defined]


async def test_trimming_and_compaction_under_a_live_reader() -> None:
    log = MemoryLog(max_chunks_per_stream=50)
    await log.create_stream("s")
    frames = log.read("s")
    seen: list[int] = []
    try:
        assert await read_n(frames, 1) == [CaughtUpFrame(0)]
        for n in range(1, 5001):
            await log.append("s", 0, chunk_of(n))
            if n % 10 == 0:  # the reader keeps up, ten chunks at a time
                got = await read_n(frames, 10)
                seen.extend(f.sequence for f in got if isinstance(f, ChunkFrame))
    finally:
        await frames.aclose()  # type: ignore[attr-defined]
    assert seen == list(range(1, 5001))
    info = await log.info("s")
    assert (info.floor, info.oldest_retained_sequence, info.head) == (4950, 4951, 5000)
    await log.end_stream("s")
    replay = await read_all(log, "s", 4990)
    assert [f.sequence for f in replay if isinstance(f, ChunkFrame)] == list(range(4991, 5001))


async def test_a_reader_owed_too_many_markers_is_told_to_reattach() -> None:
    log = MemoryLog()
    await log.create_stream("s")
    await log.append("s", 0, b"1")
    frames = log.read("s", 1)
    try:
        assert await read_n(frames, 1) == [CaughtUpFrame(1)]
        for _ in range(MAX_PENDING_MARKERS + 5):
            await log.cleanup_to_step("s", 0)
        last = await read_n(frames, 1)
    finally:
        await frames.aclose()  # type: ignore[attr-defined]
    assert isinstance(last[0], FailFrame)
    assert (last[0].recoverable, last[0].error_detail) == (True, {"code": "READER_BEHIND"})


async def test_expired_streams_are_swept_and_ttl_zero_keeps_them() -> None:
    log = MemoryLog(finished_ttl=0.05)
    for i in range(50):
        await log.create_stream(f"s{i}")
        await log.end_stream(f"s{i}")
    await anyio.sleep(0.2)
    await log.create_stream("new")
    assert list(log._streams) == ["new"]  # swept, not only hidden

    forever = MemoryLog(finished_ttl=0)
    await forever.create_stream("s")
    await forever.end_stream("s")
    await anyio.sleep(0.05)
    assert (await forever.info("s")).status == "completed"


async def test_chunk_types() -> None:
    log = MemoryLog()
    await log.create_stream("s")
    assert await log.append("s", 0, '{"a":1}') == 1  # type: ignore[arg-type]
    assert await log.append("s", 0, bytearray(b"[1]")) == 2  # type: ignore[arg-type]
    assert await log.append("s", 0, memoryview(b'"m"')) == 3  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await log.append("s", 0, 5)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        await log.append("s", True, b"1")
    with pytest.raises(PayloadError) as caught:
        await log.append("s", 0, b"{oops")
    assert caught.value.status_hint == 422
    await log.end_stream("s")
    chunks = [bytes(f.chunk) for f in await read_all(log, "s") if isinstance(f, ChunkFrame)]
    assert chunks == [b'{"a":1}', b"[1]", b'"m"']


async def test_stream_ids_and_closing() -> None:
    async with MemoryLog() as log:
        with pytest.raises(UsageError):
            await log.create_stream("")
        await log.create_stream("s")
    await log.aclose()  # idempotent
    with pytest.raises(LogError, match="closed"):
        await log.create_stream("t")
    with pytest.raises(LogError, match="closed"):
        await log.info("s")
