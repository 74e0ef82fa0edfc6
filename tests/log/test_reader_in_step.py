"""``in_step`` (``streamwire.log._reader``), the rule the stream server's fan-out rests on: two
readers it calls in step are interchangeable -- pulled at the same moments from then on, they get
exactly the same frames -- so one reader can serve the connections of both. Sans-I/O on
``MemoryLog``: random interleavings of appends, cleanups, resets, terminals, readers attaching at
random cursors and readers pulled one frame at a time, all on one asyncio loop. Then the cases
where it must answer False, and SQLite readers staying comparable while parked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from streamwire.frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    RewoundFrame,
    StreamFrame,
    TruncatedFrame,
)
from streamwire.log._reader import ReaderState, ReadPosition, in_step, join_frames
from streamwire.log.memory import MemoryLog
from streamwire.log.sqlite import SQLiteLog

Action = tuple[Any, ...]
TERMINALS = (EndFrame, FailFrame, TruncatedFrame)

#: Appends stop here, so every reader can be pulled to its end (one frame per pull).
MAX_HEAD = 1000
#: Loop turns that let every woken reader take its next frame (a memory reader needs two: the
#: wake-up, then its task's step).
SETTLE_TURNS = 6


def count(what: str) -> None:
    """A statistic (``--hypothesis-show-statistics``): how often the property had teeth."""
    if currently_in_test_context():
        event(what)


async def settle() -> None:
    for _ in range(SETTLE_TURNS):
        await asyncio.sleep(0)


@dataclass(eq=False)
class Reader:
    """One ``log.read`` under test, pulled one frame at a time."""

    cursor: int
    frames: AsyncIterator[StreamFrame]
    position: ReadPosition = field(default_factory=ReadPosition)
    got: list[StreamFrame] = field(default_factory=list)
    pending: asyncio.Task[StreamFrame] | None = None
    finished: bool = False

    @property
    def last(self) -> StreamFrame | None:
        return self.got[-1] if self.got else None

    def pull(self) -> None:
        """Ask for the next frame (one request at a time)."""
        if self.pending is None and not self.finished:
            self.pending = asyncio.ensure_future(anext(self.frames))

    def taken(self) -> tuple[str, StreamFrame | None] | None:
        """What the pending request brought: ("frame", f), ("end", None); None: still waiting."""
        task = self.pending
        if task is None or not task.done():
            return None
        self.pending = None
        if isinstance(task.exception(), StopAsyncIteration):
            self.finished = True
            return "end", None
        frame = task.result()
        self.got.append(frame)
        return "frame", frame


def vars_of(state: ReaderState) -> tuple[object, ...]:
    return state.pos, state.mark, state.epoch, state.caught_up


def joinable(reader: Reader) -> bool:
    """Could the server ask ``in_step`` about this reader? Once it delivered something, and not
    after its terminal (a connection that delivered one never joins, a hub that took one takes
    no follower: ``in_step`` would call a finished reader in step with one about to get that
    terminal)."""
    last = reader.last
    return last is not None and not isinstance(last, TERMINALS)


class Run:
    """The readers of one stream, and the groups of them found in step (merged for good)."""

    def __init__(self, log: MemoryLog) -> None:
        self.log = log
        self.readers: list[Reader] = []
        self.group: dict[Reader, set[Reader]] = {}

    def attach(self, cursor: int) -> Reader:
        position = ReadPosition()
        reader = Reader(cursor, self.log.read("s", cursor, position=position), position)
        self.readers.append(reader)
        self.group[reader] = {reader}
        reader.pull()  # it attaches (takes its state) on its first step
        return reader

    def pull(self, reader: Reader) -> None:
        """Pull ``reader`` -- and with it every reader in step with it: the same moments."""
        for member in self.group[reader]:
            member.pull()

    def harvest(self) -> None:
        """Take what the pulls brought; readers in step must have been brought the same."""
        for group in {id(g): g for g in self.group.values()}.values():
            results = {reader: reader.taken() for reader in group}
            first = next(iter(results.values()))
            if len(group) > 1 and first is not None:
                count("readers in step compared on a frame")
            assert all(result == first for result in results.values()), (
                "readers found in step diverged: " + "; ".join(
                    f"attached at {r.cursor}: {result!r}, after {r.got[-4:-1]}"
                    for r, result in results.items()))

    def lock_in_step(self) -> None:
        """Merge the groups of any two readers ``in_step`` says are interchangeable now."""
        for a in self.readers:
            for b in self.readers:
                if self.group[a] is self.group[b] or not joinable(a) or not joinable(b):
                    continue
                if in_step(a.position, a.last, b.position, b.last):
                    assert in_step(b.position, b.last, a.position, a.last), "not symmetric"
                    count("readers found in step")
                    merged = self.group[a] | self.group[b]
                    for reader in merged:
                        self.group[reader] = merged
                    # line them up: a reader with no request out takes one now, as its partner
                    # has (both must then be waiting, or both get the same frame)
                    for reader in merged:
                        reader.pull()

    async def step(self) -> None:
        await settle()
        self.harvest()
        self.lock_in_step()
        await settle()
        self.harvest()
        await self.check_joins()

    async def check_joins(self) -> None:
        """What ``ReadPosition.join`` gives (remembered per cursor while the stream's view is
        unchanged: ``JoinMemo``) is what ``join_frames`` computes on the stream as it is now."""
        view = self.log._get("s")
        for reader in self.readers:
            position, like = reader.position, reader.position.state
            if position.join is None or like is None:
                continue
            for cursor in {0, view.head // 2, max(0, view.head - 3), view.head}:
                fresh = join_frames(view, cursor, like, closed=self.log._closed)
                for _ in range(2):  # computed, then remembered
                    joined = await position.join(cursor)
                    assert (joined is None) == (fresh is None)
                    if joined is not None and fresh is not None:
                        count("a join compared")
                        assert joined[0] == fresh[0]
                        assert joined[1] is not like
                        assert vars_of(joined[1]) == vars_of(fresh[1])


async def apply(run: Run, action: Action) -> None:
    log, kind = run.log, action[0]
    info = await log.info("s")
    active = info.status == "active"
    if kind == "append" and active and info.head < MAX_HEAD:
        _, chunks, step = action
        await log.append_many("s", [(step, b'"%d"' % i) for i in range(chunks)])
    elif kind == "cleanup":
        await log.cleanup_to_step("s", action[1])
    elif kind == "reset":
        await log.reset_stream("s")
    elif kind == "end" and active:
        await log.end_stream("s")
    elif kind == "fail" and active:
        await log.fail_stream("s", "broke", recoverable=True)
    elif kind == "attach" and len(run.readers) < 6:
        run.attach(round(action[1] * info.head))
    elif kind == "pull" and run.readers:
        reader = run.readers[action[1] % len(run.readers)]
        for _ in range(action[2]):
            run.pull(reader)
            await run.step()
            if reader.pending is not None or reader.finished:
                break  # it waits for the log (or is done)
    elif kind == "pull all":
        for reader in run.readers:
            run.pull(reader)
    elif kind == "catch up":  # everyone until it waits for the log (or is done)
        for _ in range(1000):
            idle = [r for r in run.readers if r.pending is None and not r.finished]
            if not idle:
                break
            for reader in idle:
                run.pull(reader)
            await run.step()


#: Each action's weight: mostly pulls, appends and readers attaching; a terminal rarely (the
#: scenario ends the stream itself once the script is done).
WEIGHTS = {"append": 8, "cleanup": 4, "attach": 8, "pull": 16, "pull all": 2, "catch up": 3,
           "reset": 1, "end": 1, "fail": 1}


def action(kind: str) -> st.SearchStrategy[Action]:
    if kind == "append":
        # a batch is a page or two (a memory reader takes 256 chunks per step)
        return st.tuples(st.just(kind), st.sampled_from([1, 2, 3, 5, 300]), st.integers(0, 3))
    if kind == "cleanup":
        return st.tuples(st.just(kind), st.integers(0, 3))
    if kind == "attach":
        return st.tuples(st.just(kind), st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 1))
    if kind == "pull":  # one frame, a few, or until it waits
        return st.tuples(st.just(kind), st.integers(0, 5), st.sampled_from([1, 3, 1000, 1000]))
    return st.just((kind,))


actions = st.lists(
    st.sampled_from([kind for kind, weight in WEIGHTS.items() for _ in range(weight)])
    .flatmap(action), min_size=4, max_size=60)


async def scenario(script: list[Action], readers: int = 0) -> Run:
    """Run ``script`` on a new stream that ``readers`` readers attached to first (as a quiet
    stream's readers do: the server's usual case), then end it and pull everyone to the end."""
    log = MemoryLog()
    await log.create_stream("s")
    run = Run(log)
    try:
        for _ in range(readers):
            run.attach(0)
        await run.step()
        for act in script:
            await apply(run, act)
            await run.step()
        if (await log.info("s")).status == "active":
            await log.end_stream("s")
        for _ in range(MAX_HEAD * 3):  # everyone to its end, in-step groups together
            if all(r.finished for r in run.readers):
                break
            for reader in run.readers:
                run.pull(reader)
            await run.step()
        assert all(r.finished for r in run.readers), "a reader never finished"
        return run
    finally:
        for reader in run.readers:
            if reader.pending is not None:
                reader.pending.cancel()
        await settle()
        await log.aclose()


@settings(max_examples=200, deadline=None)
@given(script=actions, readers=st.integers(0, 3))
def test_readers_found_in_step_get_the_same_frames_from_then_on(
        script: list[Action], readers: int) -> None:
    asyncio.run(scenario(script, readers))  # each pull of an in-step group is compared as it comes


def test_the_property_runs_where_readers_do_lock() -> None:
    """The scenario is not vacuous: readers attaching at the head of a quiet stream lock, and a
    busy one with cleanups keeps them locked to the end."""
    script: list[Action] = [
        ("append", 5, 1), ("attach", 1.0), ("attach", 1.0),  # two at the head: in step
        ("attach", 0.0), *[("pull", 2, 1)] * 5,  # one replays, catches up, and joins them
        ("append", 300, 2), ("pull all",), ("pull all",),  # all three mid-batch
        ("cleanup", 1), ("pull", 0, 1), ("append", 3, 1), ("pull all",)]
    run = asyncio.run(scenario(script))
    first, second, replayed = run.readers
    assert run.group[first] == {first, second, replayed}
    assert first.got == second.got
    assert first.got[1:] == replayed.got[6:]  # from the caught-up frame on
    assert len([f for f in first.got if isinstance(f, RewoundFrame)]) == 1


# ---- where in_step must answer False --------------------------------------------------------------


async def take(frames: AsyncIterator[StreamFrame], count: int = 1) -> StreamFrame:
    frame: StreamFrame | None = None
    for _ in range(count):
        frame = await asyncio.wait_for(anext(frames), 5)
    assert frame is not None
    return frame


@pytest.fixture
async def log() -> AsyncIterator[MemoryLog]:
    made = MemoryLog()
    await made.create_stream("s")
    yield made
    await made.aclose()


@pytest.mark.anyio
async def test_a_replaying_reader_is_not_in_step_until_caught_up(log: MemoryLog) -> None:
    await log.append_many("s", [(1, b"%d" % i) for i in range(10)])
    live, replay = ReadPosition(), ReadPosition()
    live_frames = log.read("s", 10, position=live)
    live_last = await take(live_frames)
    assert isinstance(live_last, CaughtUpFrame)
    replay_frames = log.read("s", 0, position=replay)
    assert not in_step(live, live_last, replay, live_last)  # not attached yet
    for seq in range(1, 11):
        frame = await take(replay_frames)
        assert isinstance(frame, ChunkFrame)
        assert frame.sequence == seq
        # at seq 10 it is at the head and holds nothing, but has not caught up
        assert not in_step(live, live_last, replay, frame)
        assert not in_step(replay, frame, live, live_last)
    frame = await take(replay_frames)
    assert isinstance(frame, CaughtUpFrame)
    assert in_step(live, live_last, replay, frame)
    await replay_frames.aclose()  # type: ignore[attr-defined]
    await live_frames.aclose()  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_reader_owed_a_rewound_marker_is_not_in_step_with_one_that_is_not(
        log: MemoryLog) -> None:
    await log.append_many("s", [(1, b"1"), (2, b"2"), (2, b"3")])
    before, after = ReadPosition(), ReadPosition()
    before_frames = log.read("s", 0, position=before)
    before_last = await take(before_frames, 4)  # three chunks, caught-up
    assert isinstance(before_last, CaughtUpFrame)
    marker = await log.cleanup_to_step("s", 1)  # `before` is owed it; it has not taken it yet
    after_frames = log.read("s", 3, position=after)
    after_last = await take(after_frames)
    assert isinstance(after_last, CaughtUpFrame)
    assert before.state is not None
    assert after.state is not None
    assert before.state.pos == after.state.pos  # same place: only the marker differs
    assert not in_step(before, before_last, after, after_last)
    assert not in_step(after, after_last, before, before_last)
    before_last = await take(before_frames)
    assert before_last == marker
    assert in_step(before, before_last, after, after_last)  # it took it: interchangeable now
    await after_frames.aclose()  # type: ignore[attr-defined]
    await before_frames.aclose()  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_reader_holding_part_of_a_batch_is_not_in_step(log: MemoryLog) -> None:
    a, b = ReadPosition(), ReadPosition()
    a_frames, b_frames = log.read("s", 0, position=a), log.read("s", 0, position=b)
    a_last, b_last = await take(a_frames), await take(b_frames)
    assert in_step(a, a_last, b, b_last)
    await log.append_many("s", [(1, b"%d" % i) for i in range(5)])
    a_last = await take(a_frames)  # one of the five: it holds the other four
    b_last = await take(b_frames, 5)
    assert a.state is not None
    assert b.state is not None
    assert a.state.pos == b.state.pos == 5  # the reader's state moved past the whole batch
    assert not in_step(a, a_last, b, b_last)
    assert not in_step(b, b_last, a, a_last)
    a_last = await take(a_frames, 4)
    assert in_step(a, a_last, b, b_last)
    assert not in_step(a, b_last, b, b_last), "what a reader delivered is its own frame"
    await a_frames.aclose()  # type: ignore[attr-defined]
    await b_frames.aclose()  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_sqlite_readers_are_comparable_while_one_polls(tmp_path: Path) -> None:
    log = SQLiteLog(tmp_path / "s.db")
    try:
        await log.create_stream("s")
        hub, joiner = ReadPosition(), ReadPosition()
        hub_frames = log.read("s", 0, position=hub)
        joiner_frames = log.read("s", 0, position=joiner)
        hub_last, joiner_last = await take(hub_frames), await take(joiner_frames)
        assert in_step(joiner, joiner_last, hub, hub_last)
        # the hub's reader asks for its next frame: its last poll left it settled, so it parks
        # without polling again (a poll would hide its state from the worker thread's writes)
        # and stays comparable: the joiner can follow it
        polling = asyncio.ensure_future(anext(hub_frames))
        await asyncio.sleep(0)
        try:
            assert in_step(joiner, joiner_last, hub, hub_last)
        finally:
            polling.cancel()
            await asyncio.gather(polling, return_exceptions=True)
            await joiner_frames.aclose()  # type: ignore[attr-defined]
    finally:
        await log.aclose()
