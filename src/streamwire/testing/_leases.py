"""The contract's cases for writer leases: a writer that neither appends nor keeps alive for
``writer_timeout`` seconds is gone, and its stream ends with a recoverable ``fail`` (code
``WRITER_GONE``) that every reader gets after every stored chunk."""

from __future__ import annotations

import anyio
import pytest

from ..errors import StreamNotFoundError, StreamStateError
from ..frames import CaughtUpFrame, FailFrame, StreamFrame
from ._helpers import GUARD, LogFactory, aclose_reader, chunk_seqs, fill, read_all, read_n

__all__ = ["LeaseContract"]

#: The short ``writer_timeout`` these cases run with (seconds).
_TIMEOUT = 0.5


def _is_writer_gone(frame: StreamFrame) -> bool:
    return (isinstance(frame, FailFrame) and frame.recoverable
            and frame.error_detail == {"code": "WRITER_GONE"})


class LeaseContract:
    """``make_log(writer_timeout=...)`` must be accepted by the factory."""

    async def test_a_silent_writer_is_gone_and_readers_get_every_chunk_then_the_fail(
            self, make_log: LogFactory) -> None:
        log = await make_log(writer_timeout=_TIMEOUT)
        await log.create_stream("s")
        await fill(log, "s", [0, 0, 1])
        frames = log.read("s", 0)
        try:
            got = await read_n(frames, 4)  # 1..3, caught-up: parked, nobody writes
            with anyio.fail_after(GUARD):
                got.extend([frame async for frame in frames])
        finally:
            await aclose_reader(frames)
        assert chunk_seqs(got) == [1, 2, 3]
        assert got[3] == CaughtUpFrame(3)
        assert len(got) == 5, got
        assert _is_writer_gone(got[-1]), got
        info = await log.info("s")
        assert (info.status, info.recoverable, info.error_detail) == (
            "failed", True, {"code": "WRITER_GONE"})
        with pytest.raises(StreamStateError):  # the writer came back too late
            await log.append("s", 0, b"4")
        with pytest.raises(StreamStateError):
            await log.keepalive("s")
        again = await read_all(log, "s", 1)
        assert chunk_seqs(again) == [2, 3]
        assert _is_writer_gone(again[-1])

    async def test_appends_and_keepalive_hold_the_lease(self, make_log: LogFactory) -> None:
        log = await make_log(writer_timeout=_TIMEOUT)
        await log.create_stream("s")
        frames = log.read("s", 0)
        try:
            assert await read_n(frames, 1) == [CaughtUpFrame(0)]
            for i in range(8):  # 1.6 s, three times the timeout, with a call every 0.2 s
                await anyio.sleep(_TIMEOUT * 0.4)
                if i % 2:
                    await log.keepalive("s")
                else:
                    await log.append("s", 0, b"1")
            assert (await log.info("s")).status == "active"
            await log.end_stream("s")
            with anyio.fail_after(GUARD):
                rest = [frame async for frame in frames]
        finally:
            await aclose_reader(frames)
        assert chunk_seqs(rest) == [1, 2, 3, 4]
        assert rest[-1] == (await read_all(log, "s", 4))[-1]
        assert (await log.info("s")).status == "completed"

    async def test_a_lapse_is_noticed_without_a_reader_and_restarts_take_a_new_lease(
            self, make_log: LogFactory) -> None:
        log = await make_log(writer_timeout=_TIMEOUT)
        await log.create_stream("s")
        await log.append("s", 0, b"1")
        await anyio.sleep(_TIMEOUT * 1.5)
        with pytest.raises(StreamStateError):
            await log.append("s", 0, b"2")
        info = await log.info("s")
        assert (info.status, info.head, info.error_detail) == (
            "failed", 1, {"code": "WRITER_GONE"})
        await log.reactivate_stream("s")  # a new writer takes the stream over
        assert await log.append("s", 0, b"2") == 2
        await anyio.sleep(_TIMEOUT * 1.5)
        assert (await log.info("s")).status == "failed"
        await log.reset_stream("s")
        assert (await log.info("s")).status == "active"
        with pytest.raises(StreamNotFoundError):
            await log.keepalive("nope")

    async def test_a_finished_stream_has_no_lease(self, make_log: LogFactory) -> None:
        log = await make_log(writer_timeout=_TIMEOUT)
        await log.create_stream("s")
        await log.end_stream("s", "paused")
        await anyio.sleep(_TIMEOUT * 1.5)
        info = await log.info("s")
        assert (info.status, info.error) == ("paused", None)
        with pytest.raises(StreamStateError):
            await log.keepalive("s")
