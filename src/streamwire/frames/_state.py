"""The terminal state machine (``classify_stream_terminal``) and the reader side of the protocol
(``ResumeState``), sans-I/O.

Everything that decides what a frame means to a reader lives in this file, as h11 keeps its whole
state machine in one module. A reader feeds ``ResumeState`` the frames of each connection in
order; it answers with what to hand the consumer, or raises the typed error that the wire v2 seed
(``seeds/000_e7e163321047a0a9.txt``, "The terminal state machine") prescribes. Every end of a
connection (a terminal frame, or EOF without one) goes through ``classify_stream_terminal`` first,
so the seed's table picks the move. Every legal move is a row of ``_TRANSITIONS``; a move missing
from it raises the error that stopped the machine (sticky), or a ``UsageError`` naming the state.
"""

from __future__ import annotations

import enum
from typing import Any, Final, Literal, NoReturn, assert_never, final

from ..errors import (
    StreamDropError,
    StreamFailedError,
    StreamGapError,
    StreamTruncatedError,
    StreamwireError,
    UsageError,
)
from ._types import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    RewoundFrame,
    StreamFrame,
    TerminalFrame,
    TruncatedFrame,
    UnknownFrame,
)

__all__ = [
    "TRANSPORT_DROP_ERROR",
    "RepeatedFail",
    "ResumeState",
    "ResumeStatus",
    "TerminalAction",
    "classify_stream_terminal",
    "transport_drop_frame",
]


class TerminalAction(enum.Enum):
    """What a reader does with the end of a connection (the table of "The terminal state machine" in the wire v2 seed)."""

    #: ``end``: the stream ended (a non-completed status is not success).
    DONE = "done"
    #: ``fail``: surface the failure with its errorDetail.
    FAIL = "fail"
    #: ``truncated``: raise ``StreamTruncatedError`` (refetch a snapshot).
    TRUNCATED = "truncated"
    #: EOF with no terminal frame: raise the retryable ``StreamDropError``, never a clean end (a
    #: server closes a body without a terminal only when it evicts a reader or crashes).
    DROP = "drop"


def classify_stream_terminal(last: TerminalFrame | Literal["eof"]) -> TerminalAction:
    """Map the last frame of a connection, or ``"eof"`` for a body that ended without one.

    A read aborted by its own caller is not passed here: an abort ends quietly, it is not a drop.
    """
    match last:
        case EndFrame():
            return TerminalAction.DONE
        case FailFrame():
            return TerminalAction.FAIL
        case TruncatedFrame():
            return TerminalAction.TRUNCATED
        case "eof":
            return TerminalAction.DROP
        case _:
            assert_never(last)


#: The ``error`` of the fail frame a writer owes when its source ended without a terminal.
TRANSPORT_DROP_ERROR: Final = "transport_stream_drop"


def transport_drop_frame(detail: str | None = None) -> FailFrame:
    """The recoverable ``fail`` a writer sends when its source ended with no terminal frame
    (the wire v2 seed: "agent-server writes a recoverable transport_stream_drop fail")."""
    error_detail: dict[str, Any] = {"code": "TRANSPORT_STREAM_DROP"}
    if detail is not None:
        error_detail["message"] = detail
    return FailFrame(TRANSPORT_DROP_ERROR, True, error_detail)


@final
class RepeatedFail:
    """Whether a re-attach made progress after a recoverable ``fail``: the one rule every reader
    (``ResumeState``, so the resumable streams, the chat reply and ``streamwire tail``; the
    dispatcher's follow) settles by.

    A first recoverable ``fail`` is worth one re-attach: its writer may have come back. When the
    re-attach answers with the same ``fail`` frame at the same cursor (no chunk in between), the
    failure is stored in the log and re-attaching again cannot change it: the reader settles on
    it (``seen`` returns True) instead of backing off for a minute.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[FailFrame, int] | None = None

    def seen(self, frame: FailFrame, cursor: int) -> bool:
        """``frame`` ended a connection at ``cursor``: True when the connection before ended
        with the same recoverable ``fail`` at the same cursor (it made no progress)."""
        key = (frame, cursor) if frame.recoverable else None
        repeated = key is not None and key == self._last
        self._last = key
        return repeated

    def forget(self) -> None:
        """The reader moved elsewhere (a snapshot): the next ``fail`` is a first one again."""
        self._last = None


class ResumeStatus(enum.Enum):
    """Where a ``ResumeState`` is."""

    #: A connection is open and has delivered no chunk yet: its first chunk may jump ahead.
    ATTACHED = "attached"
    #: A connection is delivering chunks: each must follow the last one.
    STREAMING = "streaming"
    #: The connection ended without a terminal (or broke): ``reattach()`` to continue.
    DETACHED = "detached"
    #: ``end`` seen: finished.
    DONE = "done"
    #: ``fail`` seen; a recoverable one allows ``reattach()``.
    FAILED = "failed"
    #: ``truncated`` (or a rewound the reader cannot follow): ``resume_from()`` a snapshot.
    TRUNCATED = "truncated"


class _Input(enum.Enum):
    DELIVER = "deliver"  # a chunk that follows the cursor (or the first after an attach)
    DUPLICATE = "duplicate"  # a chunk at or below the cursor: already delivered
    GAP = "gap"  # a chunk that skips sequences inside one connection
    BEHIND = "behind"  # behind a rewound's atSequence with nothing left to drain: truncated
    MARKER = "marker"  # rewound, caught-up or an unknown event
    END = "end"
    FAIL = "fail"
    TRUNCATED = "truncated"
    EOF = "eof"
    REATTACH = "reattach"
    RESUME = "resume"


_S = ResumeStatus
_I = _Input
#: How a connection's end enters the machine: the action ``classify_stream_terminal`` names.
_TERMINAL_INPUTS: Final = {
    TerminalAction.DONE: _I.END,
    TerminalAction.FAIL: _I.FAIL,
    TerminalAction.TRUNCATED: _I.TRUNCATED,
    TerminalAction.DROP: _I.EOF,
}
_OPEN: Final = {
    _I.DELIVER: _S.STREAMING,
    _I.DUPLICATE: None,  # None: the status does not change
    _I.GAP: _S.DETACHED,
    _I.BEHIND: _S.TRUNCATED,
    _I.MARKER: None,
    _I.END: _S.DONE,
    _I.FAIL: _S.FAILED,
    _I.TRUNCATED: _S.TRUNCATED,
    _I.EOF: _S.DETACHED,
    _I.REATTACH: _S.ATTACHED,
    _I.RESUME: _S.ATTACHED,
}
#: Every legal move: ``(status, input) -> next status`` (None: unchanged).
_TRANSITIONS: Final[dict[tuple[ResumeStatus, _Input], ResumeStatus | None]] = {
    **{(_S.ATTACHED, i): nxt for i, nxt in _OPEN.items()},
    **{(_S.STREAMING, i): nxt for i, nxt in _OPEN.items()},
    (_S.DETACHED, _I.REATTACH): _S.ATTACHED,
    (_S.DETACHED, _I.RESUME): _S.ATTACHED,
    (_S.FAILED, _I.REATTACH): _S.ATTACHED,  # only when the fail was recoverable (checked below)
    (_S.TRUNCATED, _I.RESUME): _S.ATTACHED,
    (_S.DONE, _I.EOF): None,  # the body closes after its terminal: nothing to say
}


@final
class ResumeState:
    """The reader side of wire v2 for one stream, across connections (sans-I/O).

    Feed it every frame of a connection in order with ``receive``; hand the consumer what it
    returns. It delivers each chunk once, in sequence order: duplicates (sequence <= ``cursor``)
    are dropped; inside one connection a chunk must follow the previous one (only the first chunk
    after an attach may jump ahead: a reset run or a cleanup's survivors, which the server vouches
    for with its retention floor), else ``StreamGapError``.

    ``rewound`` markers are passed through so the consumer can prune what it buffered (chunks
    above ``min_sequence``). A reader still behind the marker's ``at_sequence`` cannot make
    progress once the survivors are drained (wire v2 seed, "rewound while attached"): the next
    chunk that jumps past them, or ``caught-up``, raises ``StreamTruncatedError``; a terminal
    frame that comes first pre-empts it. The debt survives a re-attach.

    Terminals: ``end`` sets ``terminal`` and returns nothing; ``fail`` raises
    ``StreamFailedError`` (retryable when recoverable, ``error_detail`` kept; not retryable,
    ``recoverable`` kept, when a re-attach returned the same ``fail`` at the same cursor, see
    ``RepeatedFail``: the failure is stored, re-attaching again cannot help); ``truncated`` raises
    ``StreamTruncatedError`` with the floor. After a terminal or an error every further call raises
    the same error (``UsageError`` after ``end``) until a legal ``reattach()`` or ``resume_from()``.
    A read its own caller aborts is not this machine's business: simply stop feeding it.
    """

    __slots__ = ("_behind", "_error", "_repeats", "cursor", "head", "status", "terminal")

    def __init__(self, cursor: int = 0) -> None:
        if cursor < 0:
            raise ValueError(f"cursor must be >= 0, got {cursor}")
        #: The highest sequence delivered (what a re-attach sends as ``Last-Event-ID``).
        self.cursor = cursor
        #: The terminal frame of the stream, once seen.
        self.terminal: TerminalFrame | None = None
        #: The head announced by the last ``caught-up``, or None before one.
        self.head: int | None = None
        self.status = ResumeStatus.ATTACHED
        self._error: StreamwireError | None = None
        self._behind: RewoundFrame | None = None  # a rewound the reader has not caught up with
        self._repeats = RepeatedFail()

    def receive(self, frame: StreamFrame | UnknownFrame) -> list[ChunkFrame | RewoundFrame]:
        """Apply one frame; return what to hand the consumer (a chunk, a rewound, or nothing).

        Raises:
            StreamFailedError: a ``fail`` frame (``retryable`` = ``recoverable``).
            StreamTruncatedError: a ``truncated`` frame, or a reader still behind a ``rewound``
                marker's ``at_sequence`` with nothing left to drain.
            StreamGapError: a chunk skipped sequences inside one connection (retryable).
            UsageError: a frame after ``end``, or before ``reattach()`` after a drop.
        """
        match frame:
            case ChunkFrame(sequence=seq):
                if seq <= self.cursor:
                    self._move(_I.DUPLICATE)
                    return []
                behind = self._behind
                if seq == self.cursor + 1:
                    self._move(_I.DELIVER)
                    self.cursor = seq
                    if behind is not None and seq >= (behind.at_sequence or 0):
                        self._behind = None
                    return [frame]
                if behind is not None:
                    self._raise(_I.BEHIND, self._behind_error(behind))
                if self.status is not ResumeStatus.ATTACHED:
                    self._raise(_I.GAP, StreamGapError(cursor=self.cursor, sequence=seq))
                self._move(_I.DELIVER)
                self.cursor = seq
                return [frame]
            case RewoundFrame(at_sequence=at):
                self._move(_I.MARKER)
                if at is not None and self.cursor < at:
                    self._behind = frame
                return [frame]
            case CaughtUpFrame(head=head):
                behind = self._behind
                if behind is not None:
                    # The replay is over and the survivors are drained: still behind atSequence.
                    self._raise(_I.BEHIND, self._behind_error(behind))
                if head < self.cursor:
                    # The log is behind what this reader already has: its data was lost and the
                    # stream recreated. Never a silent mix of two runs.
                    self._raise(_I.BEHIND, StreamTruncatedError(
                        f"the stream's head {head} is below this reader's cursor {self.cursor}: "
                        "its data was lost; refetch a snapshot",
                        floor=head, error_detail={"code": "TRUNCATED", "head": head,
                                                  "cursor": self.cursor}))
                self._move(_I.MARKER)
                self.head = head
                return []
            case UnknownFrame():
                self._move(_I.MARKER)
                return []
            case EndFrame() | FailFrame() | TruncatedFrame():
                return self._terminal(frame)
            case _:
                assert_never(frame)

    def _terminal(self, frame: TerminalFrame) -> list[ChunkFrame | RewoundFrame]:
        """A terminal frame, acted on as ``classify_stream_terminal`` says."""
        event = _TERMINAL_INPUTS[classify_stream_terminal(frame)]
        self._check(event)
        self._behind = None  # a terminal pre-empts the rewound debt
        self.terminal = frame
        match frame:
            case EndFrame(status=status):
                self._move(event)
                self._error = UsageError(
                    f"the stream already ended ({status}); a frame after its terminal "
                    "is a protocol error")
                return []
            case FailFrame(error=error, recoverable=recoverable, error_detail=detail):
                failed = StreamFailedError(error, error_detail=detail, recoverable=recoverable)
                if self._repeats.seen(frame, self.cursor):
                    failed.retryable = False  # stored: the same again, nothing to wait for
                self._raise(event, failed)
            case TruncatedFrame(floor=floor, error_detail=detail):
                self._raise(event, StreamTruncatedError(
                    f"cursor {self.cursor} is below the retention floor {floor}: refetch a "
                    "snapshot and resume_from() its sequence", floor=floor, error_detail=detail))
            case _:
                assert_never(frame)

    def eof(self) -> None:
        """The body ended. Quiet after ``end``.

        Raises:
            StreamDropError: no terminal frame arrived (an eviction or a crash, never a clean end);
                ``.cursor`` is where to re-attach.
        """
        if self.status is ResumeStatus.DONE:
            return
        self._raise(_TERMINAL_INPUTS[classify_stream_terminal("eof")], StreamDropError(
            f"stream ended without a terminal frame at cursor {self.cursor}", cursor=self.cursor))

    def reattach(self) -> int:
        """Start the next connection; return the cursor to send (``Last-Event-ID``).

        Legal after a drop, a gap, a recoverable ``fail`` or a broken connection (any time before a
        terminal). Raises the sticky error after ``end``, a non-recoverable ``fail`` or ``truncated``.
        """
        error = self._error
        if self.status is ResumeStatus.FAILED and error is not None and not error.retryable:
            raise error
        self._move(_I.REATTACH)
        self._error = None
        self.terminal = None
        self.head = None
        return self.cursor

    def resume_from(self, sequence: int) -> int:
        """Continue from a snapshot taken at ``sequence`` (after ``truncated``): the next
        connection starts there, and its first chunk may jump ahead. Returns ``sequence``."""
        if sequence < 0:
            raise ValueError(f"sequence must be >= 0, got {sequence}")
        self._move(_I.RESUME)
        self._error = None
        self._behind = None
        self._repeats.forget()
        self.terminal = None
        self.head = None
        self.cursor = sequence
        return sequence

    # -- internals -------------------------------------------------------------------------------

    def _check(self, event: _Input) -> None:
        """Raise unless ``event`` is legal now: the sticky error, else a ``UsageError``."""
        if (self.status, event) not in _TRANSITIONS:
            if self._error is not None:
                raise self._error
            raise UsageError(f"ResumeState cannot take {event.value} in status {self.status.value}")

    def _move(self, event: _Input) -> None:
        """Take the transition for ``event``."""
        self._check(event)
        nxt = _TRANSITIONS[self.status, event]
        if nxt is not None:
            self.status = nxt

    def _raise(self, event: _Input, error: StreamwireError) -> NoReturn:
        """Take the transition for ``event``, then raise ``error`` and keep it (sticky)."""
        self._move(event)
        self._error = error
        raise error

    def _behind_error(self, rewound: RewoundFrame) -> StreamTruncatedError:
        at = rewound.at_sequence or 0
        return StreamTruncatedError(
            f"a cleanup rewound the stream to step {rewound.at_step} at sequence {at} while this "
            f"reader was behind it (cursor {self.cursor}): refetch a snapshot",
            floor=at, error_detail={"code": "TRUNCATED", "atStep": rewound.at_step,
                                    "atSequence": at})
