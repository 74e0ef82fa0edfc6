"""The ``StreamLog`` contract suite: every backend runs it, and so can yours.

Subclass ``StreamLogContract`` in a test module and provide a ``make_log`` fixture: an async
factory that takes the limit keywords a test needs (``max_chunks_per_stream``,
``max_bytes_per_stream``, ``max_chunk_size``, ``finished_ttl``; only those a test sets are passed)
and returns a fresh, empty log; the fixture closes every log it made::

    class TestMyLog(StreamLogContract):
        @pytest.fixture
        async def make_log(self, anyio_backend: str) -> AsyncIterator[LogFactory]:
            logs: list[StreamLog] = []

            async def make(**limits: Any) -> StreamLog:
                logs.append(MyLog(**limits))
                return logs[-1]

            yield make
            for log in logs:
                await log.aclose()

The tests need pytest and the anyio pytest plugin (installed with anyio). Each one runs under an
``anyio.fail_after`` guard, so a backend that loses a wake-up fails instead of hanging.

Rules checked (wire v2 seed, ``../shared/seeds/000_*``; the G4 cases of the StreamManager
contract): sequences from 1, gap-free also under concurrent appends and across reset; replay ->
``caught-up{head}`` -> live -> exactly one terminal with the persisted payload; cleanup, the
marker and ``rewound`` to attached readers only; the retention floor (decision 1) and retention
trimming (never a silent gap); reset and reactivate; finished-stream TTL; bad input -> typed errors.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, Final, Protocol

import anyio
import anyio.lowlevel
import msgspec

try:
    import pytest
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('streamwire.testing needs pytest: pip install "streamwire[test]"') from exc

from .errors import (
    LogError,
    LogLimitError,
    PayloadError,
    StreamNotFoundError,
    StreamStateError,
    StreamTruncatedError,
    UsageError,
)
from .frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    EndStatus,
    FailFrame,
    ResumeState,
    RewoundFrame,
    StreamFrame,
    TruncatedFrame,
)
from .log import StreamInfo, StreamLog

__all__ = ["GUARD", "LogFactory", "StreamLogContract", "chunk_of", "read_all", "read_n"]

#: Seconds any one step of a contract test may take before it fails as a hang.
GUARD: Final = 10.0


class LogFactory(Protocol):
    """Makes a fresh, empty log with the given limits (only the keywords a test sets)."""

    def __call__(self, **limits: Any) -> Awaitable[StreamLog]: ...


def chunk_of(n: int) -> bytes:
    """The JSON text of test chunk ``n``."""
    return b'{"n":%d}' % n


async def _aclose(frames: AsyncIterator[StreamFrame]) -> None:
    close = getattr(frames, "aclose", None)
    if close is not None:
        await close()


async def read_all(log: StreamLog, stream_id: str, cursor: int = 0) -> list[StreamFrame]:
    """Every frame one reader gets from ``cursor`` until the iterator stops."""
    frames = log.read(stream_id, cursor)
    out: list[StreamFrame] = []
    try:
        with anyio.fail_after(GUARD):
            out.extend([frame async for frame in frames])
    finally:
        await _aclose(frames)
    return out


async def read_n(frames: AsyncIterator[StreamFrame], n: int) -> list[StreamFrame]:
    """The next ``n`` frames of an open reader."""
    with anyio.fail_after(GUARD):
        return [await anext(frames) for _ in range(n)]


def _seqs(frames: Sequence[StreamFrame]) -> list[int]:
    return [f.sequence for f in frames if isinstance(f, ChunkFrame)]


def _terminals(frames: Sequence[StreamFrame]) -> list[StreamFrame]:
    return [f for f in frames if isinstance(f, EndFrame | FailFrame | TruncatedFrame)]


def _assert_one_terminal_last(frames: Sequence[StreamFrame]) -> None:
    terminals = _terminals(frames)
    assert len(terminals) == 1, frames
    assert frames[-1] is terminals[0], frames


async def _fill(log: StreamLog, stream_id: str, steps: Sequence[int]) -> list[int]:
    return [await log.append(stream_id, step, chunk_of(i)) for i, step in enumerate(steps, 1)]


class StreamLogContract:
    """The contract tests. A subclass provides the ``make_log`` fixture (see the module doc)."""

    pytestmark: Final = [pytest.mark.anyio]

    @pytest.fixture
    async def log(self, make_log: LogFactory) -> StreamLog:
        """A fresh log with default limits."""
        return await make_log()

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
        assert await _fill(log, "s", [0, 0, 1]) == [1, 2, 3]
        assert await log.append_many("s", [(1, b"1"), (2, b"[2]")]) == [4, 5]
        assert await log.append_many("s", []) == []
        assert await log.append("s", 2, b'"x"') == 6
        info = await log.info("s")
        assert (info.head, info.floor, info.oldest_retained_sequence) == (6, 0, 1)

    async def test_streams_are_independent(self, log: StreamLog) -> None:
        await log.create_stream("a")
        await log.create_stream("b")
        await _fill(log, "a", [0, 0])
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
        await _fill(log, "s", [0, 1])
        usage = {"inputTokens": 3, "outputTokens": 5}
        await log.end_stream("s", status, output={"text": "hi"}, state=[1, 2], usage=usage)
        info = await log.info("s")
        assert (info.status, info.output, info.state, info.usage) == (
            status, {"text": "hi"}, [1, 2], usage)
        frames = await read_all(log, "s")
        assert _seqs(frames) == [1, 2]
        assert frames[-2:] == [
            CaughtUpFrame(2), EndFrame(status, output={"text": "hi"}, state=[1, 2], usage=usage)]

    async def test_end_without_payload(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await log.end_stream("s")
        assert await read_all(log, "s") == [CaughtUpFrame(0), EndFrame("completed")]

    async def test_fail_persists_error_and_detail(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0])
        await log.fail_stream("s", "boom", error_detail={"code": "X", "n": 1}, recoverable=True)
        info = await log.info("s")
        assert (info.status, info.error, info.error_detail, info.recoverable) == (
            "failed", "boom", {"code": "X", "n": 1}, True)
        frames = await read_all(log, "s")
        assert frames[-1] == FailFrame("boom", True, {"code": "X", "n": 1})
        _assert_one_terminal_last(frames)

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
        await _fill(log, "s", [0, 0, 0])
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
            await _aclose(frames)

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
                await _fill(log, "s", [0, 0])
                await log.end_stream("s")
        assert got[0] == CaughtUpFrame(0)
        assert _seqs(got) == [1, 2]
        assert got[-1] == EndFrame("completed")

    async def test_cursor_at_head_gets_caught_up_first(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0, 0])
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
        await _fill(log, "s", [0] * 20)
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
            assert _seqs(frames) == list(range(cursor + 1, head + 1)), cursor
            assert sum(isinstance(f, CaughtUpFrame) for f in frames) == 1
            assert frames[-1] == EndFrame("completed")

    async def test_closing_a_reader_early_releases_it(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0] * 5)
        for _ in range(20):
            frames = log.read("s")
            assert len(await read_n(frames, 2)) == 2
            with anyio.fail_after(GUARD):
                await _aclose(frames)
        waiting = log.read("s", 5)
        assert await read_n(waiting, 1) == [CaughtUpFrame(5)]
        with anyio.fail_after(GUARD):
            await _aclose(waiting)  # parked reader: closing it must not hang or leak a wake-up
        assert await log.append("s", 0, b"6") == 6
        await log.end_stream("s")
        assert _seqs(await read_all(log, "s", 4)) == [5, 6]

    async def test_a_cancelled_reader_leaves_the_log_working(self, log: StreamLog) -> None:
        await log.create_stream("s")
        with anyio.move_on_after(0.05):
            await read_all(log, "s")
        assert await log.append("s", 0, b"1") == 1
        await log.end_stream("s")
        assert _seqs(await read_all(log, "s")) == [1]

    # -- cleanup, rewound and the retention floor (decision 1) -------------------------------

    async def test_cleanup_removes_later_steps_and_sets_the_marker(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0, 1, 1, 2, 3])
        rewound = await log.cleanup_to_step("s", 1)
        assert rewound == RewoundFrame(at_step=1, at_sequence=5, min_sequence=3)
        info = await log.info("s")
        assert (info.head, info.truncated_at_step, info.floor,
                info.oldest_retained_sequence) == (5, 1, 0, 1)
        # the counter goes on; the survivors are replayed (floor 0: nothing below the cursor lost)
        assert await log.append("s", 2, b"6") == 6
        await log.end_stream("s")
        assert _seqs(await read_all(log, "s")) == [1, 2, 3, 6]

    async def test_noop_cleanup_still_returns_rewound(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0, 1])
        rewound = await log.cleanup_to_step("s", 5)
        assert (rewound.at_step, rewound.at_sequence) == (5, 2)
        info = await log.info("s")
        assert (info.truncated_at_step, info.head, info.oldest_retained_sequence) == (5, 2, 1)

    async def test_rewound_goes_to_attached_readers_in_place(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0, 1, 2])
        live = log.read("s", 3)
        try:
            assert await read_n(live, 1) == [CaughtUpFrame(3)]
            noop = await log.cleanup_to_step("s", 9)  # nothing removed: still broadcast
            assert await read_n(live, 1) == [noop]
            await log.append("s", 2, b"4")
            rewound = await log.cleanup_to_step("s", 1)  # removes 3 and 4
            assert rewound == RewoundFrame(at_step=1, at_sequence=4, min_sequence=2)
            got = await read_n(live, 1)
            if isinstance(got[0], ChunkFrame):  # a backend may have pushed 4 before the cleanup
                assert got[0].sequence == 4
                got = await read_n(live, 1)
            assert got == [rewound]
            await log.append("s", 1, b"5")
            await log.end_stream("s")
            with anyio.fail_after(GUARD):
                rest = [f async for f in live]
            assert _seqs(rest) == [5]
            assert rest[-1] == EndFrame("completed")
            assert not any(isinstance(f, RewoundFrame) for f in rest)
        finally:
            await _aclose(live)
        # a reader attaching after the cleanup is not told about it
        frames = await read_all(log, "s", 0)
        assert not any(isinstance(f, RewoundFrame) for f in frames)
        assert _seqs(frames) == [1, 2, 5]

    async def test_truncated_while_the_marker_is_set_and_cursor_below_floor(
            self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [2, 1, 1])  # sequence 1 is a later step than 2 and 3
        await log.cleanup_to_step("s", 1)
        info = await log.info("s")
        assert (info.floor, info.oldest_retained_sequence, info.truncated_at_step) == (1, 2, 1)
        assert await read_all(log, "s", 0) == [TruncatedFrame(floor=1)]
        await log.end_stream("s")
        frames = await read_all(log, "s", 1)
        assert _seqs(frames) == [2, 3]
        _assert_one_terminal_last(frames)

    async def test_cleanup_of_everything_puts_the_floor_at_the_head(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [1, 1, 2])
        await log.cleanup_to_step("s", 0)
        info = await log.info("s")
        assert (info.floor, info.oldest_retained_sequence) == (3, None)
        for cursor in (0, 2):
            assert await read_all(log, "s", cursor) == [TruncatedFrame(floor=3)]
        await log.end_stream("s")
        assert await read_all(log, "s", 3) == [CaughtUpFrame(3), EndFrame("completed")]

    async def test_reset_serves_the_next_run_and_clears_the_marker(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [1, 1, 2])
        await log.cleanup_to_step("s", 0)
        await log.end_stream("s", "paused")
        await log.reset_stream("s")
        info = await log.info("s")
        assert (info.status, info.head, info.truncated_at_step, info.floor) == (
            "active", 3, None, 3)
        assert info.oldest_retained_sequence is None
        assert (info.output, info.error) == (None, None)
        assert await log.append("s", 0, b"4") == 4  # the counter goes on: no cursor aliases
        await log.cleanup_to_step("s", 0)  # a marker inside the new run
        await log.append("s", 0, b"5")
        await log.end_stream("s")
        for cursor in (0, 2, 3):  # a reader from the old run is served the new run
            frames = await read_all(log, "s", cursor)
            assert _seqs(frames) == [4, 5], cursor
            assert frames[-2:] == [CaughtUpFrame(5), EndFrame("completed")]

    async def test_reset_of_a_failed_stream(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0])
        await log.fail_stream("s", "x")
        await log.reset_stream("s")
        info = await log.info("s")
        assert (info.status, info.error, info.error_detail, info.recoverable) == (
            "active", None, None, None)

    async def test_reactivate_keeps_chunks_and_clears_the_marker(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [2, 1])
        await log.cleanup_to_step("s", 1)  # removes sequence 1: floor 1
        await log.end_stream("s", "paused", state={"k": 1})
        await log.reactivate_stream("s")
        info = await log.info("s")
        assert (info.status, info.head, info.truncated_at_step, info.state) == (
            "active", 2, None, None)
        assert await log.append("s", 2, b"3") == 3
        await log.end_stream("s")
        frames = await read_all(log, "s", 0)  # marker cleared: no truncated (decision 1)
        assert _seqs(frames) == [2, 3]
        await log.reactivate_stream("s")  # completed -> active
        with pytest.raises(StreamStateError):
            await log.reactivate_stream("s")  # already active

    async def test_random_operations_match_a_model(self, log: StreamLog) -> None:
        """Seeded random appends, batches, cleanups, ends, reactivations and resets; after each,
        a reader from a random cursor gets exactly what a tiny model of decision 1 predicts."""
        await self._random_operations(log, None)

    async def test_random_operations_with_retention_match_a_model(
            self, make_log: LogFactory) -> None:
        """The same with ``max_chunks_per_stream=6``: trimming moves the floor too."""
        await self._random_operations(await make_log(max_chunks_per_stream=6), 6)

    async def _random_operations(self, log: StreamLog, limit: int | None) -> None:
        rng = random.Random(1 if limit is None else 2)
        await log.create_stream("s")
        retained: list[tuple[int, int]] = []  # (sequence, step)
        head = run_start = 0
        marker: int | None = None
        active = True
        trimmed = False
        truncated = 0
        for _ in range(150):
            op = rng.random()
            if active and op < 0.35:
                step = rng.randint(0, 3)
                head = await log.append("s", step, chunk_of(head + 1))
                retained.append((head, step))
            elif active and op < 0.5:
                steps = [rng.randint(0, 3) for _ in range(rng.randint(1, 3))]
                seqs = await log.append_many("s", [(st, chunk_of(head + i + 1))
                                                   for i, st in enumerate(steps)])
                assert seqs == list(range(head + 1, head + len(steps) + 1))
                retained.extend(zip(seqs, steps, strict=True))
                head = seqs[-1]
            elif op < 0.62:
                step = rng.randint(0, 3)
                rewound = await log.cleanup_to_step("s", step)
                assert (rewound.at_step, rewound.at_sequence) == (step, head)
                retained = [(seq, st) for seq, st in retained if st <= step]
                marker = step
            elif op < 0.72 and active:
                await log.end_stream("s", "paused")
                active = False
            elif op < 0.8 and not active:
                await log.reactivate_stream("s")
                active, marker = True, None
            elif op < 0.85:
                await log.reset_stream("s")
                retained, run_start, marker, active, trimmed = [], head, None, True, False
            if limit is not None and len(retained) > limit:
                del retained[:-limit]
                trimmed = True
            floor = retained[0][0] - 1 if retained else head
            info = await log.info("s")
            assert (info.head, info.floor, info.truncated_at_step, info.status) == (
                head, floor, marker, "active" if active else "paused")
            cursor = rng.choice([0, run_start, rng.randint(0, head)])
            frames = log.read("s", cursor)
            try:
                got: list[StreamFrame] = []
                with anyio.fail_after(GUARD):
                    async for frame in frames:
                        got.append(frame)
                        if isinstance(frame, CaughtUpFrame) and active:
                            break
            finally:
                await _aclose(frames)
            if (marker is not None or trimmed) and max(cursor, run_start) < floor:
                assert got == [TruncatedFrame(floor=floor)], (cursor, got)
                truncated += 1
                continue
            want: list[StreamFrame] = [ChunkFrame(seq, msgspec.Raw(chunk_of(seq)))
                                       for seq, _ in retained if seq > cursor]
            want.append(CaughtUpFrame(head))
            if not active:
                want.append(EndFrame("paused"))
            assert got == want, (cursor, got, want)
        assert truncated >= 5  # the seed exercises decision 1, not only the happy path

    # -- G4: rewound while attached, read through the reader machine ------------------------

    async def _resume_frames(
            self, log: StreamLog, *, then_end: bool) -> tuple[ResumeState, list[StreamFrame]]:
        """A live reader at 5 misses 6 and 7, which a cleanup removes before it takes them."""
        await log.create_stream("s")
        await _fill(log, "s", [0, 0, 1, 1, 2])
        state = ResumeState(0)  # the reader machine (wire v2 "rewound while attached")
        delivered: list[StreamFrame] = []
        frames = log.read("s", 0)
        try:
            for frame in await read_n(frames, 6):  # 1..5 and caught-up: live at 5
                delivered.extend(state.receive(frame))
            await _fill(log, "s", [1, 2])  # 6 and 7, not taken yet
            rewound = await log.cleanup_to_step("s", 0)  # removes 3..7
            assert rewound == RewoundFrame(at_step=0, at_sequence=7, min_sequence=2)
            if then_end:
                await log.end_stream("s", "interrupted")
            else:
                await log.append("s", 1, b"8")
            with anyio.fail_after(GUARD):
                async for frame in frames:
                    delivered.extend(state.receive(frame))
        finally:
            await _aclose(frames)
        return state, delivered

    async def test_g4_reader_behind_at_sequence_on_a_live_stream_is_truncated(
            self, log: StreamLog) -> None:
        with pytest.raises(StreamTruncatedError) as caught:
            await self._resume_frames(log, then_end=False)
        assert caught.value.floor == 7

    async def test_g4_a_terminal_pre_empts_the_truncation(self, log: StreamLog) -> None:
        state, delivered = await self._resume_frames(log, then_end=True)
        assert state.terminal == EndFrame("interrupted")
        assert [f.sequence for f in delivered if isinstance(f, ChunkFrame)] == [1, 2, 3, 4, 5]
        assert delivered[-1] == RewoundFrame(at_step=0, at_sequence=7, min_sequence=2)

    async def test_g4_a_closed_connection_gets_no_rewound(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await _fill(log, "s", [0, 1])
        frames = log.read("s", 0)
        try:
            await log.end_stream("s")
            got = await read_n(frames, 4)
            assert got[-1] == EndFrame("completed")
            await log.cleanup_to_step("s", 0)
            with anyio.fail_after(GUARD), pytest.raises(StopAsyncIteration):
                await anext(frames)
        finally:
            await _aclose(frames)
        assert await read_all(log, "s", 2) == [CaughtUpFrame(2), EndFrame("completed")]

    # -- retention ----------------------------------------------------------------------------

    async def test_chunk_limit_trims_the_oldest_and_moves_the_floor(
            self, make_log: LogFactory) -> None:
        log = await make_log(max_chunks_per_stream=4)
        await log.create_stream("s")
        await _fill(log, "s", [0] * 6)
        await log.append_many("s", [(0, b"7"), (0, b"8")])
        info = await log.info("s")
        assert (info.head, info.floor, info.oldest_retained_sequence) == (8, 4, 5)
        assert await read_all(log, "s", 3) == [TruncatedFrame(floor=4)]
        await log.end_stream("s")
        assert _seqs(await read_all(log, "s", 4)) == [5, 6, 7, 8]

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
        await _fill(log, "s", [0, 0, 0])
        frames = log.read("s", 0)
        try:
            assert _seqs(await read_n(frames, 1)) == [1]
            await _fill(log, "s", [0] * 6)  # the oldest retained is now 7
            with anyio.fail_after(GUARD):
                rest = [frame async for frame in frames]
        finally:
            await _aclose(frames)
        got = [1, *_seqs(rest)]
        assert got == list(range(1, len(got) + 1))  # whatever came, came without a gap
        assert isinstance(rest[-1], TruncatedFrame)
        assert rest[-1].floor >= got[-1]

    async def test_finished_streams_expire_after_the_ttl(self, make_log: LogFactory) -> None:
        log = await make_log(finished_ttl=0.3)
        await log.create_stream("done")
        await log.create_stream("live")
        await _fill(log, "done", [0])
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
        await _fill(log, "s", [0])
        frames = log.read("s", 0)
        try:
            assert await read_n(frames, 2) == [ChunkFrame(1, msgspec.Raw(chunk_of(1))),
                                               CaughtUpFrame(1)]
            await log.delete_stream("s")
            last = await read_n(frames, 1)
            assert isinstance(last[0], FailFrame)
            assert last[0].recoverable
        finally:
            await _aclose(frames)
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
            await _aclose(frames)
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
        await _fill(log, "s", [0, 0])
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
