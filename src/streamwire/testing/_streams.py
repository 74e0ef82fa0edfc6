"""The contract's cases for sequences, status and reading: replay, caught-up, live, one terminal."""

from __future__ import annotations

import random

import anyio
import anyio.lowlevel
import msgspec
import pytest

from ..errors import (
    StreamStateError,
)
from ..frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    EndStatus,
    FailFrame,
    StreamFrame,
)
from ..log import StreamInfo, StreamLog
from ._helpers import (
    GUARD,
    aclose_reader,
    assert_one_terminal_last,
    chunk_of,
    chunk_seqs,
    fill,
    read_all,
    read_n,
)

__all__ = ["StreamsContract"]


class StreamsContract:
    """Sequences from 1, gap-free; the persisted end and fail; replay -> caught-up -> live -> one terminal."""

    # -- sequences and status ---------------------------------------------------------------

    async def test_create_is_idempotent_and_info_starts_empty(self, log: StreamLog) -> None:
        first = await log.create_stream("s")
        again = await log.create_stream("s")
        assert isinstance(first, StreamInfo)
        assert (first.status, first.head, first.floor) == ("active", 0, 0)
        assert first.oldest_retained_sequence is None
        assert first.truncated_at_step is None
        assert again == first == await log.info("s")

    async def test_sequences_start_at_one_and_are_gap_free(self, log: StreamLog) -> None:
        await log.create_stream("s")
        assert await fill(log, "s", [0, 0, 1]) == [1, 2, 3]
        assert await log.append_many("s", [(1, b"1"), (2, b"[2]")]) == [4, 5]
        assert await log.append_many("s", []) == []
        assert await log.append("s", 2, b'"x"') == 6
        info = await log.info("s")
        assert (info.head, info.floor, info.oldest_retained_sequence) == (6, 0, 1)

    async def test_streams_are_independent(self, log: StreamLog) -> None:
        await log.create_stream("a")
        await log.create_stream("b")
        await fill(log, "a", [0, 0])
        assert await log.append("b", 0, b"1") == 1
        assert (await log.info("a")).head == 2

    async def test_concurrent_appends_are_gap_free(self, log: StreamLog) -> None:
        await log.create_stream("s")
        got: list[list[int]] = [[] for _ in range(8)]

        async def writer(k: int) -> None:
            for i in range(40):
                if i % 10 == 9:
                    got[k].extend(await log.append_many("s", [(0, b"1"), (0, b"2")]))
                else:
                    got[k].append(await log.append("s", 0, chunk_of(i)))

        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                for k in range(8):
                    tg.start_soon(writer, k)
        flat = sorted(seq for seqs in got for seq in seqs)
        assert flat == list(range(1, 8 * 44 + 1))
        for seqs in got:
            assert seqs == sorted(seqs)
            for i in range(9, len(seqs), 11):  # every batch got consecutive sequences
                assert seqs[i] + 1 == seqs[i + 1]
        assert (await log.info("s")).head == 8 * 44

    @pytest.mark.parametrize("status", ["completed", "paused", "interrupted"])
    async def test_end_persists_status_and_payload(self, log: StreamLog,
                                                   status: EndStatus) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0, 1])
        usage = {"inputTokens": 3, "outputTokens": 5}
        await log.end_stream("s", status, output={"text": "hi"}, state=[1, 2], usage=usage)
        info = await log.info("s")
        assert (info.status, info.output, info.state, info.usage) == (
            status, {"text": "hi"}, [1, 2], usage)
        frames = await read_all(log, "s")
        assert chunk_seqs(frames) == [1, 2]
        assert frames[-2:] == [
            CaughtUpFrame(2), EndFrame(status, output={"text": "hi"}, state=[1, 2], usage=usage)]

    async def test_end_without_payload(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await log.end_stream("s")
        assert await read_all(log, "s") == [CaughtUpFrame(0), EndFrame("completed")]

    async def test_fail_persists_error_and_detail(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0])
        await log.fail_stream("s", "boom", error_detail={"code": "X", "n": 1}, recoverable=True)
        info = await log.info("s")
        assert (info.status, info.error, info.error_detail, info.recoverable) == (
            "failed", "boom", {"code": "X", "n": 1}, True)
        frames = await read_all(log, "s")
        assert frames[-1] == FailFrame("boom", True, {"code": "X", "n": 1})
        assert_one_terminal_last(frames)

    async def test_finished_stream_refuses_writes(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await log.end_stream("s", "paused")
        with pytest.raises(StreamStateError):
            await log.append("s", 0, b"1")
        with pytest.raises(StreamStateError):
            await log.append_many("s", [(0, b"1")])
        with pytest.raises(StreamStateError):
            await log.end_stream("s")
        with pytest.raises(StreamStateError):
            await log.fail_stream("s", "late")
        assert (await log.info("s")).status == "paused"

    # -- reading ----------------------------------------------------------------------------

    async def test_replay_then_caught_up_then_live_then_one_terminal(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0, 0, 0])
        frames = log.read("s", 1)
        try:
            first = await read_n(frames, 3)
            assert first == [ChunkFrame(2, msgspec.Raw(chunk_of(2))),
                             ChunkFrame(3, msgspec.Raw(chunk_of(3))), CaughtUpFrame(3)]
            assert await log.append("s", 1, b'"live"') == 4
            assert await read_n(frames, 1) == [ChunkFrame(4, msgspec.Raw(b'"live"'))]
            await log.end_stream("s", "completed", output=1)
            assert await read_n(frames, 1) == [EndFrame("completed", output=1)]
            with anyio.fail_after(GUARD), pytest.raises(StopAsyncIteration):
                await anext(frames)
        finally:
            await aclose_reader(frames)

    async def test_reader_attached_before_the_first_chunk(self, log: StreamLog) -> None:
        await log.create_stream("s")
        got: list[StreamFrame] = []
        attached = anyio.Event()

        async def reader() -> None:
            async for frame in log.read("s"):
                got.append(frame)
                if isinstance(frame, CaughtUpFrame):
                    attached.set()

        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                await attached.wait()
                await fill(log, "s", [0, 0])
                await log.end_stream("s")
        assert got[0] == CaughtUpFrame(0)
        assert chunk_seqs(got) == [1, 2]
        assert got[-1] == EndFrame("completed")

    async def test_cursor_at_head_gets_caught_up_first(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0, 0])
        await log.end_stream("s", "interrupted")
        assert await read_all(log, "s", 2) == [CaughtUpFrame(2), EndFrame("interrupted")]

    async def test_chunk_bytes_pass_through(self, log: StreamLog) -> None:
        await log.create_stream("s")
        payloads = [b'{"a":"\\u00e9\xc3\xa9","b":[1,2.5,null,true]}', b'"\\n\\r"', b"0",
                    b"[]", b'{"big":"' + b"x" * 70_000 + b'"}']
        for payload in payloads:
            await log.append("s", 0, payload)
        await log.end_stream("s")
        frames = await read_all(log, "s")
        assert [bytes(f.chunk) for f in frames if isinstance(f, ChunkFrame)] == payloads

    async def test_readers_racing_appends_lose_and_repeat_nothing(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0] * 20)
        results: dict[int, list[StreamFrame]] = {}
        rng = random.Random(5)

        async def reader(cursor: int) -> None:
            results[cursor] = await read_all(log, "s", cursor)

        async def writer(k: int) -> None:
            for i in range(60):
                if rng.random() < 0.2:
                    await log.append_many("s", [(k, chunk_of(i)), (k, chunk_of(-i))])
                else:
                    await log.append("s", k, chunk_of(i))
                if i % 7 == 0:
                    await anyio.lowlevel.checkpoint()

        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                for cursor in (0, 7, 20):
                    tg.start_soon(reader, cursor)
                async with anyio.create_task_group() as writers:
                    for k in range(3):
                        writers.start_soon(writer, k)
                await log.end_stream("s")
        head = (await log.info("s")).head
        for cursor, frames in results.items():
            assert chunk_seqs(frames) == list(range(cursor + 1, head + 1)), cursor
            assert sum(isinstance(f, CaughtUpFrame) for f in frames) == 1
            assert frames[-1] == EndFrame("completed")

    async def test_closing_a_reader_early_releases_it(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0] * 5)
        for _ in range(20):
            frames = log.read("s")
            assert len(await read_n(frames, 2)) == 2
            with anyio.fail_after(GUARD):
                await aclose_reader(frames)
        waiting = log.read("s", 5)
        assert await read_n(waiting, 1) == [CaughtUpFrame(5)]
        with anyio.fail_after(GUARD):
            await aclose_reader(waiting)  # parked reader: closing it must not hang or leak a wake-up
        assert await log.append("s", 0, b"6") == 6
        await log.end_stream("s")
        assert chunk_seqs(await read_all(log, "s", 4)) == [5, 6]

    async def test_a_cancelled_reader_leaves_the_log_working(self, log: StreamLog) -> None:
        await log.create_stream("s")
        with anyio.move_on_after(0.05):
            await read_all(log, "s")
        assert await log.append("s", 0, b"1") == 1
        await log.end_stream("s")
        assert chunk_seqs(await read_all(log, "s")) == [1]

