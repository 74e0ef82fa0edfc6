"""The contract's cases for cleanup, ``rewound`` markers, the retention floor, reset and reactivate."""

from __future__ import annotations

import random

import anyio
import msgspec
import pytest

from ..errors import (
    StreamStateError,
    StreamTruncatedError,
)
from ..frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    ResumeState,
    RewoundFrame,
    StreamFrame,
    TruncatedFrame,
)
from ..log import StreamLog
from ._helpers import (
    GUARD,
    LogFactory,
    aclose_reader,
    assert_one_terminal_last,
    chunk_of,
    chunk_seqs,
    fill,
    read_all,
    read_n,
)

__all__ = ["RewindContract"]


class RewindContract:
    """Cleanup and its marker, ``rewound`` in place to attached readers only, ``truncated`` below the floor."""

    # -- cleanup, rewound and the retention floor ---------------------------------------------

    async def test_cleanup_removes_later_steps_and_sets_the_marker(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0, 1, 1, 2, 3])
        rewound = await log.cleanup_to_step("s", 1)
        assert rewound == RewoundFrame(at_step=1, at_sequence=5, min_sequence=3)
        info = await log.info("s")
        assert (info.head, info.truncated_at_step, info.floor,
                info.oldest_retained_sequence) == (5, 1, 0, 1)
        # the counter goes on; the survivors are replayed (floor 0: nothing below the cursor lost)
        assert await log.append("s", 2, b"6") == 6
        await log.end_stream("s")
        assert chunk_seqs(await read_all(log, "s")) == [1, 2, 3, 6]

    async def test_noop_cleanup_still_returns_rewound(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0, 1])
        rewound = await log.cleanup_to_step("s", 5)
        assert (rewound.at_step, rewound.at_sequence) == (5, 2)
        info = await log.info("s")
        assert (info.truncated_at_step, info.head, info.oldest_retained_sequence) == (5, 2, 1)

    async def test_rewound_goes_to_attached_readers_in_place(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0, 1, 2])
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
            assert chunk_seqs(rest) == [5]
            assert rest[-1] == EndFrame("completed")
            assert not any(isinstance(f, RewoundFrame) for f in rest)
        finally:
            await aclose_reader(live)
        # a reader attaching after the cleanup is not told about it
        frames = await read_all(log, "s", 0)
        assert not any(isinstance(f, RewoundFrame) for f in frames)
        assert chunk_seqs(frames) == [1, 2, 5]

    async def test_truncated_while_the_marker_is_set_and_cursor_below_floor(
            self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [2, 1, 1])  # sequence 1 is a later step than 2 and 3
        await log.cleanup_to_step("s", 1)
        info = await log.info("s")
        assert (info.floor, info.oldest_retained_sequence, info.truncated_at_step) == (1, 2, 1)
        assert await read_all(log, "s", 0) == [TruncatedFrame(floor=1)]
        await log.end_stream("s")
        frames = await read_all(log, "s", 1)
        assert chunk_seqs(frames) == [2, 3]
        assert_one_terminal_last(frames)

    async def test_cleanup_of_everything_puts_the_floor_at_the_head(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [1, 1, 2])
        await log.cleanup_to_step("s", 0)
        info = await log.info("s")
        assert (info.floor, info.oldest_retained_sequence) == (3, None)
        for cursor in (0, 2):
            assert await read_all(log, "s", cursor) == [TruncatedFrame(floor=3)]
        await log.end_stream("s")
        assert await read_all(log, "s", 3) == [CaughtUpFrame(3), EndFrame("completed")]

    async def test_reset_serves_the_next_run_and_clears_the_marker(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [1, 1, 2])
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
            assert chunk_seqs(frames) == [4, 5], cursor
            assert frames[-2:] == [CaughtUpFrame(5), EndFrame("completed")]

    async def test_reset_of_a_failed_stream(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [0])
        await log.fail_stream("s", "x")
        await log.reset_stream("s")
        info = await log.info("s")
        assert (info.status, info.error, info.error_detail, info.recoverable) == (
            "active", None, None, None)

    async def test_reactivate_keeps_chunks_and_clears_the_marker(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await fill(log, "s", [2, 1])
        await log.cleanup_to_step("s", 1)  # removes sequence 1: floor 1
        await log.end_stream("s", "paused", state={"k": 1})
        await log.reactivate_stream("s")
        info = await log.info("s")
        assert (info.status, info.head, info.truncated_at_step, info.state) == (
            "active", 2, None, None)
        assert await log.append("s", 2, b"3") == 3
        await log.end_stream("s")
        frames = await read_all(log, "s", 0)  # marker cleared: no truncated
        assert chunk_seqs(frames) == [2, 3]
        await log.reactivate_stream("s")  # completed -> active
        with pytest.raises(StreamStateError):
            await log.reactivate_stream("s")  # already active

    async def test_random_operations_match_a_model(self, log: StreamLog) -> None:
        """Seeded random appends, batches, cleanups, ends, reactivations and resets; after each,
        a reader from a random cursor gets exactly what a tiny model of the
        retention-floor rule predicts."""
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
                await aclose_reader(frames)
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
        assert truncated >= 5  # the seed exercises the floor rule, not only the happy path

    # -- rewound while attached, read through the reader machine ------------------------------

    async def _resume_frames(
            self, log: StreamLog, *, then_end: bool) -> tuple[ResumeState, list[StreamFrame]]:
        """A live reader at 5 misses 6 and 7, which a cleanup removes before it takes them."""
        await log.create_stream("s")
        await fill(log, "s", [0, 0, 1, 1, 2])
        state = ResumeState(0)  # the reader machine (wire v2 "rewound while attached")
        delivered: list[StreamFrame] = []
        frames = log.read("s", 0)
        try:
            for frame in await read_n(frames, 6):  # 1..5 and caught-up: live at 5
                delivered.extend(state.receive(frame))
            await fill(log, "s", [1, 2])  # 6 and 7, not taken yet
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
            await aclose_reader(frames)
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
        await fill(log, "s", [0, 1])
        frames = log.read("s", 0)
        try:
            await log.end_stream("s")
            got = await read_n(frames, 4)
            assert got[-1] == EndFrame("completed")
            await log.cleanup_to_step("s", 0)
            with anyio.fail_after(GUARD), pytest.raises(StopAsyncIteration):
                await anext(frames)
        finally:
            await aclose_reader(frames)
        assert await read_all(log, "s", 2) == [CaughtUpFrame(2), EndFrame("completed")]

