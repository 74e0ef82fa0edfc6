"""The contract's cases for retention limits, expiry, delete, close and bad input."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import anyio
import msgspec
import pytest

from ..errors import (
    LogError,
    LogLimitError,
    PayloadError,
    StreamNotFoundError,
    StreamStateError,
    UsageError,
)
from ..frames import (
    CaughtUpFrame,
    ChunkFrame,
    FailFrame,
    TruncatedFrame,
)
from ..log import StreamLog
from ._helpers import (
    GUARD,
    LogFactory,
    aclose_reader,
    chunk_of,
    chunk_seqs,
    fill,
    read_all,
    read_n,
)

__all__ = ["LimitsContract"]


class LimitsContract:
    """Retention trimming never leaves a silent gap; delete and close end readers; bad input -> typed errors."""

    # -- retention ----------------------------------------------------------------------------

    async def test_chunk_limit_trims_the_oldest_and_moves_the_floor(
            self, make_log: LogFactory) -> None:
        log = await make_log(max_chunks_per_stream=4)
        await log.create_stream("s")
        await fill(log, "s", [0] * 6)
        await log.append_many("s", [(0, b"7"), (0, b"8")])
        info = await log.info("s")
        assert (info.head, info.floor, info.oldest_retained_sequence) == (8, 4, 5)
        assert await read_all(log, "s", 3) == [TruncatedFrame(floor=4)]
        await log.end_stream("s")
        assert chunk_seqs(await read_all(log, "s", 4)) == [5, 6, 7, 8]

    async def test_byte_limit_trims_the_oldest(self, make_log: LogFactory) -> None:
        log = await make_log(max_bytes_per_stream=100, max_chunk_size=40)
        await log.create_stream("s")
        for _ in range(5):
            await log.append("s", 0, b'"' + b"x" * 28 + b'"')  # 30 bytes each
        info = await log.info("s")
        assert (info.floor, info.oldest_retained_sequence) == (2, 3)
        assert await read_all(log, "s", 0) == [TruncatedFrame(floor=2)]

    async def test_a_slow_reader_overtaken_by_trimming_gets_truncated_not_a_gap(
            self, make_log: LogFactory) -> None:
        log = await make_log(max_chunks_per_stream=3)
        await log.create_stream("s")
        await fill(log, "s", [0, 0, 0])
        frames = log.read("s", 0)
        try:
            assert chunk_seqs(await read_n(frames, 1)) == [1]
            await fill(log, "s", [0] * 6)  # the oldest retained is now 7
            with anyio.fail_after(GUARD):
                rest = [frame async for frame in frames]
        finally:
            await aclose_reader(frames)
        got = [1, *chunk_seqs(rest)]
        assert got == list(range(1, len(got) + 1))  # whatever came, came without a gap
        assert isinstance(rest[-1], TruncatedFrame)
        assert rest[-1].floor >= got[-1]

    async def test_finished_streams_expire_after_the_ttl(self, make_log: LogFactory) -> None:
        log = await make_log(finished_ttl=0.3)
        await log.create_stream("done")
        await log.create_stream("live")
        await fill(log, "done", [0])
        await log.end_stream("done")
        assert (await log.info("done")).status == "completed"
        await anyio.sleep(1.2)
        with pytest.raises(StreamNotFoundError):
            await log.info("done")
        assert (await log.info("live")).status == "active"  # an active stream never expires
        info = await log.create_stream("done")  # a new incarnation
        assert (info.head, info.status) == (0, "active")

    async def test_recreated_stream_has_a_new_epoch(self, log: StreamLog) -> None:
        first = await log.create_stream("s")
        await log.delete_stream("s")
        second = await log.create_stream("s")
        assert isinstance(first.epoch, str)
        assert first.epoch != second.epoch or first.epoch == ""

    # -- delete and close -----------------------------------------------------------------------

    async def test_delete_ends_attached_readers_recoverably(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0])
        frames = log.read("s", 0)
        try:
            assert await read_n(frames, 2) == [ChunkFrame(1, msgspec.Raw(chunk_of(1))),
                                               CaughtUpFrame(1)]
            await log.delete_stream("s")
            last = await read_n(frames, 1)
            assert isinstance(last[0], FailFrame)
            assert last[0].recoverable
        finally:
            await aclose_reader(frames)
        with pytest.raises(StreamNotFoundError):
            await log.info("s")

    async def test_aclose_ends_attached_readers_recoverably(self, make_log: LogFactory) -> None:
        log = await make_log()
        await log.create_stream("s")
        frames = log.read("s", 0)
        try:
            assert await read_n(frames, 1) == [CaughtUpFrame(0)]
            with anyio.fail_after(GUARD):
                await log.aclose()
            last = await read_n(frames, 1)
            assert isinstance(last[0], FailFrame)
            assert last[0].recoverable
        finally:
            await aclose_reader(frames)
        with pytest.raises(LogError):
            await log.append("s", 0, b"1")

    # -- bad input --------------------------------------------------------------------------------

    async def test_unknown_stream(self, log: StreamLog) -> None:
        calls: list[Awaitable[object]] = [
            log.info("nope"), log.append("nope", 0, b"1"), log.append_many("nope", [(0, b"1")]),
            log.end_stream("nope"), log.fail_stream("nope", "x"), log.cleanup_to_step("nope", 0),
            log.reset_stream("nope"), log.reactivate_stream("nope"), log.delete_stream("nope"),
            anext(log.read("nope"))]
        for call in calls:
            with pytest.raises(StreamNotFoundError) as caught:
                await call
            assert caught.value.status_hint == 404

    async def test_cursor_above_head_or_negative(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0, 0])
        with pytest.raises(StreamStateError, match="above"):
            await read_all(log, "s", 3)
        with pytest.raises(UsageError):
            await read_all(log, "s", -1)

    async def test_negative_step(self, log: StreamLog) -> None:
        await log.create_stream("s")
        with pytest.raises(UsageError):
            await log.append("s", -1, b"1")
        with pytest.raises(UsageError):
            await log.append_many("s", [(0, b"1"), (-1, b"2")])
        with pytest.raises(UsageError):
            await log.cleanup_to_step("s", -1)
        assert (await log.info("s")).head == 0

    async def test_oversized_chunk_and_batch_is_all_or_nothing(self, make_log: LogFactory) -> None:
        log = await make_log(max_chunk_size=64)
        await log.create_stream("s")
        big = b'"' + b"x" * 70 + b'"'
        with pytest.raises(LogLimitError) as caught:
            await log.append("s", 0, big)
        assert caught.value.limit == "max_chunk_size"
        assert "max_chunk_size" in str(caught.value)
        with pytest.raises(LogLimitError):
            await log.append_many("s", [(0, b"1"), (0, big)])
        assert await log.append("s", 0, b'"' + b"x" * 62 + b'"') == 1

    async def test_a_chunk_must_be_json(self, log: StreamLog) -> None:
        await log.create_stream("s")
        for bad in (b"", b"{", b"1 2", b"\xff"):
            with pytest.raises(PayloadError):
                await log.append("s", 0, bad)
        with pytest.raises(PayloadError):
            await log.append_many("s", [(0, b"1"), (0, b"nope")])
        assert (await log.info("s")).head == 0

    async def test_bad_end_status(self, log: StreamLog) -> None:
        await log.create_stream("s")
        with pytest.raises(UsageError):
            await log.end_stream("s", "failed")  # type: ignore[arg-type]
        assert (await log.info("s")).status == "active"

    async def test_payloads_must_be_json_and_are_kept_as_json(self, log: StreamLog) -> None:
        await log.create_stream("s")
        with pytest.raises(UsageError):
            await log.end_stream("s", output=object())
        with pytest.raises(UsageError):
            await log.fail_stream("s", "x", error_detail={"when": object()})
        assert (await log.info("s")).status == "active"
        # fields of the wrong type are refused before anything is stored: a stored one would make
        # info() and every reader's terminal frame fail to decode, for good
        with pytest.raises(UsageError):
            await log.fail_stream("s", 123)  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            await log.fail_stream("s", "x", error_detail=["not", "an", "object"])  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            await log.end_stream("s", usage=[1, 2])  # type: ignore[arg-type]
        assert (await log.info("s")).status == "active"
        output: dict[str, Any] = {"items": (1, 2)}
        await log.end_stream("s", output=output)
        output["items"] = "changed"  # the log kept its own copy, as JSON gives it back
        assert (await log.info("s")).output == {"items": [1, 2]}

