"""The read rules of every ``StreamLog`` backend, written once and free of I/O.

A backend keeps its storage and its wake-ups. When a reader attaches, the backend hands
``attach`` a ``ReadView`` of the stream; each time the reader wakes, it hands ``next_frames`` a
fresh view, and delivers the frames it gets back. A view is what the storage knows about one
stream at one instant, read consistently (one lock-free turn of an event loop, one SQL
transaction, one Redis script, or one live message).

The rules, in the order they apply (the wire v2 seed, ``../shared/seeds/000_e7e163321047a0a9.txt``):

1. the log was closed -> a recoverable ``fail`` (code ``LOG_CLOSED``), the end;
2. the stream was deleted -> a recoverable ``fail`` (code ``STREAM_DELETED``), the end;
3. chunks this reader still lacked are gone (retention trimmed them, or the stream's data was lost
   and it was created again under a new epoch) -> ``truncated{floor}``, the end: never a silent gap;
4. a ``rewound`` marker the reader is owed was pruned (it sat still through more cleanups than the
   log keeps) -> a recoverable ``fail`` (code ``READER_BEHIND``), the end;
5. the next page of retained chunks above the reader's position, up to the next owed marker (so a
   marker is delivered exactly where its cleanup happened) or else up to the head;
6. the owed marker itself;
7. once, ``caught-up{head}``;
8. when the stream is finished, its terminal (``end`` or ``fail`` with the persisted payload), the
   end. Otherwise nothing: the reader waits for the next wake-up.

At attach: a cursor is an int in ``0..head``; a cursor below the floor gets ``truncated{floor}``
only while chunks of the current run were lost (a cleanup marker is set, or retention trimmed the
oldest) -- a cursor from an earlier run (at or below the head when the stream was reset) is served
the new run; and a re-attach that names an older epoch of the stream gets ``truncated``. A reader
is owed only the markers of cleanups that ran after it attached.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol, TypeAlias, final

from ..frames import (
    CaughtUpFrame,
    ChunkFrame,
    RewoundFrame,
    StreamFrame,
    TerminalFrame,
    TruncatedFrame,
)
from . import StreamStatus
from ._common import (
    FINISHED,
    behind_frame,
    check_cursor,
    closed_frame,
    deleted_frame,
    truncated_frame,
)

__all__ = ["JOIN_MAX_FRAMES", "JOIN_MEMO", "Join", "JoinMemo", "Joined", "Push", "ReadPosition",
           "ReadView", "ReaderState", "Step", "attach", "in_step", "is_truncated", "join_frames",
           "next_frames", "pushable", "settled"]

#: What ``next_frames`` returns: the frames to deliver and whether they end the reader (an empty
#: list that does not end it means: wait for a wake-up), or None: the view does not hold what the
#: reader needs next (a partial view such as one page or one live message): read a fresh one.
Step = tuple[Sequence[StreamFrame], bool] | None


class ReadView(Protocol):
    """What storage knows about one stream at one instant, read consistently."""

    @property
    def deleted(self) -> bool:
        """The stream is gone (deleted, expired, or never existed)."""
        ...

    @property
    def epoch(self) -> str:
        """This incarnation of the stream's data."""
        ...

    @property
    def status(self) -> StreamStatus: ...

    @property
    def head(self) -> int:
        """The highest sequence ever allocated (the counter)."""
        ...

    @property
    def run_start(self) -> int:
        """The head when the current run started (``reset_stream``)."""
        ...

    @property
    def truncated_at_step(self) -> int | None:
        """The cleanup marker of the current run, or None."""
        ...

    @property
    def trimmed(self) -> bool:
        """Retention removed chunks of the current run."""
        ...

    @property
    def lost_above(self) -> int:
        """The highest sequence retention removed in the current run (0: none)."""
        ...

    @property
    def marks(self) -> int:
        """The number of the latest ``rewound`` marker (0 before the first cleanup)."""
        ...

    def floor(self) -> int:
        """The highest sequence that is not replayable: MIN(sequence) - 1, or the head."""
        ...

    def next_marker(self, mark: int) -> tuple[int, RewoundFrame] | None:
        """The oldest kept marker numbered above ``mark``, with its number, or None."""
        ...

    def chunks(self, after: int, upto: int) -> Sequence[ChunkFrame] | None:
        """Retained chunks with ``after < sequence <= upto``, in order: a bounded page, all of the
        range when it is small. None when this view does not hold that range."""
        ...

    def terminal(self) -> TerminalFrame:
        """The persisted terminal of a finished stream."""
        ...


@final
class ReaderState:
    """Where one reader is: everything up to ``pos`` was delivered or is known absent; the
    markers up to ``mark`` were delivered (or predate it)."""

    __slots__ = ("caught_up", "epoch", "mark", "pos")

    def __init__(self, pos: int, mark: int, epoch: str) -> None:
        self.pos = pos
        self.mark = mark
        self.epoch = epoch
        self.caught_up = False


#: What ``join_frames`` gives a reader that joins another: its frames up to and including its
#: ``caught-up``, and its state then (equal to the other's).
Joined: TypeAlias = tuple[list[StreamFrame], ReaderState]
#: ``ReadPosition.join``: ``join(cursor)`` -> ``Joined`` or None (see ``join_frames``).
Join: TypeAlias = Callable[[int], Awaitable[Joined | None]]

#: ``ReadPosition.push``: takes a page of chunks the log read for the reader in the writer's task.
Push: TypeAlias = Callable[[Sequence[StreamFrame]], Awaitable[None]]

#: The most frames ``join_frames`` gives a joining reader at once: one further behind replays on
#: its own reader (a storm of re-attaches is readers a few pages behind, not a full replay).
JOIN_MAX_FRAMES: Final = 512


@final
class ReadPosition:
    """Where one reader is, for sharing it: a backend whose ``read`` takes ``position=`` fills it in.

    ``state`` is the reader's ``ReaderState`` once it attached; ``last`` is the last frame of the
    batch the reader is delivering, so a consumer that has just delivered ``last`` knows the
    reader holds nothing fetched and not delivered. ``in_step`` compares two of them. A consumer
    that takes whole batches at once (the stream server's hub) sets ``paged``: the reader then
    yields each batch in one step, as its last frame, with the batch in ``page`` (a log that
    ignores ``paged`` leaves ``page`` alone: each frame is a batch of its own). ``join``
    (None where the backend offers none) gives what a new reader of the same stream attaching
    at a cursor would get up to its ``caught-up`` when it would then be in step with this one
    (``join_frames`` on a view the backend reads once for many joiners), so that reader never
    needs one of its own.

    A paged consumer may also set ``push``: a log whose writers live in the same event loop
    (``MemoryLog``) then hands a parked reader's next page of chunks to ``await push(page)`` from
    the appending task itself, with ``last`` and ``page`` set as for a yielded batch, instead of
    waking the reader's task: the consumer's writes happen in the writer's turn of the loop, as a
    hand-written broadcast's do. Only pages of chunks are pushed (``pushable``); anything else
    (a marker, a terminal, ``truncated``) and a consumer that set ``push`` back to None wake the
    reader as before. ``push`` must not raise, and must not wait on a slow client: a consumer
    that has to pace sets ``push`` to None and paces in its own task.
    """

    __slots__ = ("join", "last", "page", "paged", "push", "state")

    def __init__(self) -> None:
        self.state: ReaderState | None = None
        self.last: StreamFrame | None = None
        self.join: Join | None = None
        self.paged = False
        self.page: Sequence[StreamFrame] = ()
        self.push: Push | None = None


def in_step(a: ReadPosition, a_delivered: StreamFrame, b: ReadPosition,
            b_delivered: StreamFrame) -> bool:
    """Will two caught-up readers of one stream get exactly the same frames from now on?

    ``next_frames`` is a function of the reader's state and the stream's: two readers whose
    states are equal (position, owed markers, epoch, caught up) and who each delivered all they
    fetched (``*_delivered`` is the frame each delivered last) are interchangeable, so one of them
    can serve both. Anything less (a replaying reader, one still holding part of a batch, one owed
    a ``rewound`` marker the other is not) answers False."""
    sa, sb = a.state, b.state
    return (sa is not None and sb is not None and a_delivered is a.last
            and b_delivered is b.last and sa.caught_up and sb.caught_up and sa.pos == sb.pos
            and sa.mark == sb.mark and sa.epoch == sb.epoch)


def join_frames(view: ReadView, cursor: int, like: ReaderState, *, epoch: str | None = None,
                closed: bool = False, limit: int = JOIN_MAX_FRAMES) -> Joined | None:
    """The frames a new reader attaching at ``cursor`` gets from ``view`` up to and including its
    ``caught-up`` (by ``attach`` and ``next_frames``, nothing else), with its state then, when
    that state equals ``like``'s (a caught-up reader of the same stream): from then on ``like``'s
    reader can serve both (``in_step``). None when it would not be in step, or ``view`` does not
    hold the range, or a marker, a terminal or ``truncated`` comes first, or more than ``limit``
    frames do: the new reader then reads on its own. Raises what ``attach`` raises."""
    if closed or not like.caught_up or like.pos != view.head or like.epoch != view.epoch:
        return None
    reader = attach(view, cursor, epoch=epoch)
    if not isinstance(reader, ReaderState):
        return None
    out: list[StreamFrame] = []
    while not reader.caught_up:
        step = next_frames(reader, view, closed)
        if step is None or step[1]:
            return None
        out += step[0]
        if len(out) > limit:
            return None
    if reader.pos != like.pos or reader.mark != like.mark or reader.epoch != like.epoch:
        return None
    return out, reader


#: Joins a ``JoinMemo`` keeps for one view (then it starts again: a bound, not an LRU).
JOIN_MEMO: Final = 1024
_UNSET: Final = object()


@final
class JoinMemo:
    """``join_frames`` on one view, computed once per joining cursor: a storm's readers come
    back at a few cursors, each many times, and every one at a cursor gets the same frames.

    ``stamp`` names the view: a different stamp forgets every join (the view changed). Each
    joiner gets the shared frames (read-only) and a ``ReaderState`` of its own."""

    __slots__ = ("joins", "stamp")

    def __init__(self) -> None:
        self.stamp: object = _UNSET
        self.joins: dict[tuple[object, ...], Joined | None] = {}

    def join(self, stamp: object, view: ReadView, cursor: int, like: ReaderState, *,
             epoch: str | None = None, closed: bool = False) -> Joined | None:
        """``join_frames(view, cursor, like, epoch=epoch, closed=closed)``, remembered while
        ``stamp`` is unchanged (raises, each time, what it raises)."""
        joins = self.joins
        if stamp != self.stamp:
            self.stamp, joins = stamp, {}
            self.joins = joins
        key = (cursor, epoch, closed, like.pos, like.mark, like.epoch, like.caught_up)
        if key in joins:
            joined = joins[key]
        else:
            joined = join_frames(view, cursor, like, epoch=epoch, closed=closed)
            if len(joins) >= JOIN_MEMO:
                joins.clear()
            joins[key] = joined
        if joined is None:
            return None
        frames, state = joined
        own = ReaderState(state.pos, state.mark, state.epoch)
        own.caught_up = state.caught_up
        return frames, own


def is_truncated(cursor: int, *, run_start: int, floor: int, marker: int | None,
                 trimmed: bool) -> bool:
    """Must a reader attaching at ``cursor`` get ``truncated``? Only while chunks of the current
    run were lost (a cleanup marker is set, or retention trimmed the oldest) and the cursor is
    below the floor; a cursor from an earlier run (<= ``run_start``) counts as the run's start."""
    if marker is None and not trimmed:
        return False
    return max(cursor, run_start) < floor


def attach(view: ReadView, cursor: int, *, epoch: str | None = None) -> ReaderState | TruncatedFrame:
    """A reader at ``cursor``, or the ``truncated`` frame it gets instead.

    ``epoch``: the incarnation the caller last read (None: unknown). Raises ``UsageError`` for a
    cursor that is not an int >= 0 and ``StreamStateError`` for one above the head."""
    if epoch is not None and cursor > 0 and epoch != view.epoch:
        return truncated_frame(view.floor())
    check_cursor(cursor, view.head)
    if view.truncated_at_step is not None or view.trimmed:
        floor = view.floor()
        if is_truncated(cursor, run_start=view.run_start, floor=floor,
                        marker=view.truncated_at_step, trimmed=view.trimmed):
            return truncated_frame(floor)
    return ReaderState(cursor, view.marks, view.epoch)


_NO_FRAMES: Final[tuple[StreamFrame, ...]] = ()


def next_frames(reader: ReaderState, view: ReadView, closed: bool = False) -> Step:
    """The reader's next frames from ``view`` (``closed``: the log was closed), by the rules in
    the module docstring; advances ``reader`` past what it returns."""
    if closed:
        return [closed_frame()], True
    if view.deleted:
        return [deleted_frame()], True
    pos = reader.pos
    if view.epoch != reader.epoch or view.lost_above > pos:
        return [truncated_frame(view.floor())], True
    marker = view.next_marker(reader.mark)
    if marker is None:
        page = view.chunks(pos, view.head)
    else:
        if marker[0] != reader.mark + 1:
            return [behind_frame()], True
        page = view.chunks(pos, marker[1].at_sequence or 0)  # every log sets atSequence
    if page is None:
        return None
    if page:
        reader.pos = page[-1].sequence
        return page, False
    if marker is not None:
        reader.mark, frame = marker
        reader.pos = max(pos, frame.at_sequence or 0)
        return [frame], False
    finished = view.status in FINISHED
    if reader.caught_up:
        return ([view.terminal()], True) if finished else (_NO_FRAMES, False)
    reader.caught_up = True
    if finished:
        return [CaughtUpFrame(view.head), view.terminal()], True
    return [CaughtUpFrame(view.head)], False


def settled(reader: ReaderState, view: ReadView, closed: bool = False) -> bool:
    """Would ``next_frames(reader, view, closed)`` give nothing now (wait for a wake-up)? True
    only when it would: the reader is caught up at the head, owes no marker, and the stream is
    active, not deleted, of the reader's epoch and lost nothing above it. A cheap look for a
    backend whose view is whole (it never returns None), to park without another read."""
    return (reader.caught_up and not closed and reader.pos == view.head
            and reader.mark == view.marks and view.status == "active" and not view.deleted
            and view.epoch == reader.epoch and view.lost_above <= reader.pos)


def pushable(reader: ReaderState, view: ReadView, closed: bool = False) -> bool:
    """Would ``next_frames(reader, view, closed)`` give a page of chunks, and nothing else? True
    only for a caught-up reader of the stream's epoch that owes no marker, lost nothing above
    its position, and has chunks above it; the stream is not deleted and the log not closed (a
    whole view: the chunks above the position are retained). What a log may hand to
    ``ReadPosition.push``."""
    pos = reader.pos
    return (reader.caught_up and not closed and pos < view.head and reader.mark == view.marks
            and not view.deleted and view.epoch == reader.epoch and view.lost_above <= pos)
