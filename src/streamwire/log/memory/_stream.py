"""One ``MemoryLog`` stream's state, its wake-ups, and the ``ReadView`` the shared read rules
(``streamwire.log._reader``) look at: on one event loop a synchronous look is consistent.

On asyncio each parked reader waits on a bare future of its own: two objects per wait (the future
and one coroutine) instead of the six of an ``anyio.Event`` wait, which keeps the wake-up short and
the garbage collector's young generation small; other event loops (trio) wait on an ``anyio.Event``.
A reader whose consumer takes pushed pages (``ReadPosition.push``, the stream server's hub) parks
as a tap instead: an append hands it the new chunks in the appender's task (``Stream.push``).
"""

from __future__ import annotations

import asyncio
import contextlib
from bisect import bisect_right
from operator import itemgetter
from typing import Any, Final

import anyio
import msgspec

from ...frames import ChunkFrame, RewoundFrame, TerminalFrame
from .. import StreamStatus
from .._common import terminal_frame
from .._producers import ProducerState
from .._reader import Joined, JoinMemo, ReaderState, ReadPosition, next_frames, pushable, settled

__all__ = ["READ_BATCH", "Stream", "asyncio_loop"]

#: Frames a reader takes per wake-up: bounds the list it builds, amortises the bisect.
READ_BATCH: Final = 256

_seq_of = itemgetter(0)
_EMPTY: Final[tuple[ChunkFrame, ...]] = ()


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None on another event loop (trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Stream:
    """One stream's mutable state (private; values handed out are frozen). It is its own
    ``ReadView`` (``streamwire.log._reader``): on one event loop, a synchronous look is consistent."""

    __slots__ = (
        "changes", "deleted", "entries", "epoch", "expires_at", "head", "joins", "lease_timer",
        "lease_until", "lost_above", "marker_base",
        "markers", "max_chunks", "nbytes", "payload", "producers", "readers", "run_start",
        "start", "status", "stream_id", "taps", "trim_at", "trimmed", "truncated_at_step",
        "version", "waiters", "wake")

    def __init__(self, stream_id: str, epoch: str, max_chunks: int) -> None:
        self.stream_id = stream_id
        self.max_chunks = max_chunks
        self.epoch = epoch
        self.status: StreamStatus = "active"
        self.head = 0
        self.run_start = 0  # the head when this run started (reset)
        self.entries: list[tuple[int, int, bytes]] = []
        self.start = 0  # entries[:start] are trimmed, compacted lazily
        self.trim_at = max_chunks  # len(entries) past which the oldest are trimmed
        self.nbytes = 0
        self.version = 0  # bumped whenever entries' indices or the stream's run change
        self.trimmed = False  # retention removed chunks of this run
        self.lost_above = 0  # highest sequence retention removed in this run
        self.truncated_at_step: int | None = None  # the cleanup marker
        self.markers: list[RewoundFrame] = []  # markers[i] is number marker_base + i + 1
        self.marker_base = 0
        self.payload: dict[str, Any] = {}
        self.producers: dict[str, ProducerState] = {}  # idempotent writers, by producer id
        self.readers = 0
        self.waiters: list[asyncio.Future[None]] = []  # asyncio readers parked on the stream
        #: parked readers whose consumer takes pushed pages, with their positions
        self.taps: list[tuple[asyncio.Future[None], ReadPosition]] = []
        self.wake: anyio.Event | None = None  # readers on other event loops
        self.expires_at: float | None = None
        self.lease_until = 0.0  # time.monotonic() when the writer's lease lapses
        self.lease_timer: asyncio.TimerHandle | None = None  # parked readers' look at it
        self.deleted = False
        self.changes = 0  # every change of the view but an append (``notify``)
        self.joins = JoinMemo()

    def floor(self) -> int:
        entries = self.entries
        return entries[self.start][0] - 1 if self.start < len(entries) else self.head

    # -- the ReadView the shared read rules look at -------------------------------------------

    @property
    def marks(self) -> int:
        return self.marker_base + len(self.markers)

    def next_marker(self, mark: int) -> tuple[int, RewoundFrame] | None:
        markers = self.markers
        if not markers:
            return None
        index = mark - self.marker_base
        if index < 0:  # the ones after ``mark`` were pruned: the oldest kept says so
            return self.marker_base + 1, markers[0]
        return (mark + 1, markers[index]) if index < len(markers) else None

    def chunks(self, after: int, upto: int) -> list[ChunkFrame] | tuple[ChunkFrame, ...]:
        entries = self.entries
        end = len(entries)
        i = bisect_right(entries, after, self.start, end, key=_seq_of)
        if i >= end:
            return _EMPTY
        j = min(end, i + READ_BATCH)
        if upto < entries[j - 1][0]:
            j = bisect_right(entries, upto, i, j, key=_seq_of)
        raw = msgspec.Raw
        return [ChunkFrame(seq, raw(chunk)) for seq, _, chunk in entries[i:j]]

    def terminal(self) -> TerminalFrame:
        return terminal_frame(self.status, **self.payload)

    def join(self, cursor: int, like: ReaderState, closed: bool) -> Joined | None:
        """``join_frames`` on this stream, once per cursor while the view is unchanged: every
        change a reader can see either appends (the head moves) or wakes the readers
        (``notify``), so the head and ``changes`` name the view."""
        return self.joins.join((self.head, self.changes), self, cursor, like, closed=closed)

    def notify(self) -> None:
        """Wake every parked reader, taps included (a change other than new chunks)."""
        self.changes += 1
        taps = self.taps
        if taps:
            self.taps = []
            for fut, _ in taps:
                if not fut.done():
                    fut.set_result(None)
        self.wake_readers()

    def wake_readers(self) -> None:
        """Wake the parked readers that are not taps (new chunks: taps get them by ``push``)."""
        waiters = self.waiters
        if waiters:
            for fut in waiters:  # set_result only schedules the wake-ups: nothing re-enters here
                if not fut.done():  # a cancelled reader's future is done
                    fut.set_result(None)
            waiters.clear()
        wake = self.wake
        if wake is not None:
            self.wake = None
            wake.set()

    def park(self, loop: asyncio.AbstractEventLoop,
             position: ReadPosition | None = None) -> asyncio.Future[None]:
        """A future the next ``notify`` resolves (asyncio); await it directly, and ``unpark`` it
        if the wait is cancelled. No coroutine of its own: one object per wait. With a
        ``position`` that takes pushed pages, the reader parks as a tap."""
        fut = loop.create_future()
        if position is not None and position.push is not None:
            self.taps.append((fut, position))
        else:
            self.waiters.append(fut)
        return fut

    def unpark(self, fut: asyncio.Future[None]) -> None:
        """Forget a cancelled wait's future (a stream nobody writes to would collect one per
        reader that gave up)."""
        with contextlib.suppress(ValueError):
            self.waiters.remove(fut)
        self.taps = [tap for tap in self.taps if tap[0] is not fut]

    async def appended(self, closed: bool) -> None:
        """Chunks were appended: wake the parked readers, and push them to the taps."""
        self.wake_readers()
        if self.taps:
            await self.push(closed)

    async def push(self, closed: bool) -> None:
        """Hand each tap the chunks appended since it parked, in the appender's task; wake the
        reader instead where the read rules give anything but chunks next, or its consumer took
        ``push`` back. A tap stays parked, on the same future, while it is ``settled``."""
        taps, self.taps = self.taps, []
        for tap in taps:
            fut, position = tap
            reader = position.state
            while not fut.done():
                push = position.push
                if push is None or reader is None or not pushable(reader, self, closed):
                    fut.set_result(None)  # the reader's own task applies the rules
                    break
                step = next_frames(reader, self, closed)
                assert step is not None  # a whole view; pushable: a page of chunks, not the end
                page = step[0]
                position.last, position.page = page[-1], page
                await push(page)
                if settled(reader, self, closed):
                    if not fut.done():
                        self.taps.append(tap)
                    break

    async def wait_elsewhere(self) -> None:
        """Park until the next ``notify`` on an event loop other than asyncio's (trio)."""
        wake = self.wake
        if wake is None:
            wake = self.wake = anyio.Event()
        await wake.wait()


