"""The resumable client's sans-I/O half: what to send, what the bytes mean, when and whether to retry.

The reader's loop (``_async.py``, and ``_sync.py`` generated from it) and ``streamwire tail`` only
move bytes and sleep; every decision lives here. Bytes become frames through
``streamwire.frames.FrameDecoder``; what a frame means to a reader (dedup by sequence, ``rewound``,
the end of a connection mapped through ``classify_stream_terminal``) is
``streamwire.frames.ResumeState``. This module adds the policy around re-attaching: which HTTP
answers are worth another attempt (``response_error``, in ``_http``), backoff with jitter (never
shorter than the server's ``retry:`` or ``Retry-After``), and the attempt and outage caps.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeAlias, TypeVar, final

from ..errors import (
    ResponseStatusError,
    RetriesExhaustedError,
    StreamDropError,
    StreamFailedError,
    StreamTruncatedError,
    StreamwireError,
)
from ..frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FrameDecoder,
    ResumeState,
    RewoundFrame,
    StreamFrame,
    UnknownFrame,
)
from ..sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE
from ._http import (
    BODY_QUOTE,
    RETRY_STATUSES,
    is_event_stream,
    request_headers,
    response_error,
)

# The names from ``_http`` stay importable from here too (``streamwire tail`` imports them so).
__all__ = [
    "BODY_QUOTE",
    "DEFAULT_BACKOFF_INITIAL",
    "DEFAULT_BACKOFF_MAX",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_ELAPSED",
    "RETRY_STATUSES",
    "Backoff",
    "RetryPolicy",
    "describe",
    "is_event_stream",
    "request_headers",
    "response_error",
]

T = TypeVar("T")

#: Consecutive failed attempts (no progress in between) before giving up. Ten attempts with the
#: default backoff span about a minute, longer than a typical deploy's restart.
DEFAULT_MAX_ATTEMPTS: Final = 10
#: Seconds of outage (time since the last progress) before giving up.
DEFAULT_MAX_ELAPSED: Final = 120.0
#: First reconnection delay (seconds) when the server sent no ``retry:``; doubles per failure.
DEFAULT_BACKOFF_INITIAL: Final = 0.25
#: The backoff never grows past this (seconds), unless the server's ``retry:`` asks for more.
DEFAULT_BACKOFF_MAX: Final = 10.0
#: Seconds without a single byte (a heartbeat included) before a connection counts as dropped.
#: Servers heartbeat every 15 s by default, so 45 s tolerates two lost heartbeats.
DEFAULT_IDLE_TIMEOUT: Final = 45.0
#: Seconds to open a connection and get the response headers.
DEFAULT_CONNECT_TIMEOUT: Final = 10.0

@final
@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how often a resumable stream re-attaches.

    ``max_attempts`` counts consecutive attempts without progress and ``max_elapsed`` the seconds
    since the last progress (a new chunk, a caught-up frame or a terminal frame; a caught-up right
    before another recoverable ``fail`` does not count), so a long healthy stream with occasional
    drops never runs out while a stream that keeps failing backs off and gives up; None lifts a
    cap. A recoverable ``fail`` that a re-attach answers again at the same cursor, with no new
    chunk, is stored in the log: the read raises it (``StreamFailedError``, ``recoverable`` kept,
    not ``retryable``) after that second attempt, whatever the caps. The delay before attempt *n* is
    ``backoff_initial * 2**(n-1)`` capped at ``backoff_max``, times a random factor in
    ``[1, 1 + jitter]``; the server's ``retry:`` (when ``honour_server_retry``) replaces
    ``backoff_initial`` and is never undercut, as a browser's EventSource would honour it.
    """

    max_attempts: int | None = DEFAULT_MAX_ATTEMPTS
    max_elapsed: float | None = DEFAULT_MAX_ELAPSED
    backoff_initial: float = DEFAULT_BACKOFF_INITIAL
    backoff_max: float = DEFAULT_BACKOFF_MAX
    jitter: float = 0.5
    honour_server_retry: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1 (or None for no cap)")
        if self.backoff_initial < 0 or self.backoff_max < 0 or self.jitter < 0:
            raise ValueError("backoff_initial, backoff_max and jitter must be >= 0")


@dataclass(slots=True)
class ClientStats:
    """Counters of one resumable stream (read them after or during iteration)."""

    #: Connections opened (the first one included).
    connections: int = 0
    #: Re-attachments after a drop, an eviction, a malformed frame or a recoverable failure.
    reattaches: int = 0
    #: Chunks delivered on a re-attached connection before its caught-up frame (from the log).
    replayed: int = 0
    #: Chunk frames dropped because their sequence was already delivered.
    duplicates: int = 0
    #: Chunks handed to the caller.
    delivered: int = 0
    #: Received chunks dropped before reaching the caller because a cleanup removed them.
    pruned: int = 0


class ClientSession(Generic[T]):
    """One logical read of a stream across any number of connections (sans-I/O)."""

    __slots__ = (
        "_deferred",
        "_in_replay",
        "_max_event",
        "_max_line",
        "_state",
        "backoff",
        "decoder",
        "end_frame",
        "finished",
        "handed",
        "last_error",
        "pending",
        "policy",
        "stats",
    )

    def __init__(self, cursor: int, policy: RetryPolicy, *, max_line_size: int = DEFAULT_MAX_LINE_SIZE,
                 max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
                 rng: random.Random | None = None) -> None:
        if cursor < 0:
            raise ValueError(f"cursor must be >= 0, got {cursor}")
        self.policy = policy
        self._state = ResumeState(cursor)
        self._max_line = max_line_size
        self._max_event = max_event_size
        self.decoder = FrameDecoder(max_line_size=max_line_size, max_event_size=max_event_size)
        self.pending: deque[ChunkFrame | RewoundFrame] = deque()
        self._deferred: StreamwireError | None = None
        self.backoff = Backoff(policy, rng)
        self._in_replay = False
        self.end_frame: EndFrame | None = None
        #: The sequence of the last chunk handed to the caller (``hand_out``).
        self.handed = cursor
        self.finished = False
        self.last_error: BaseException | None = None
        self.stats = ClientStats()

    @property
    def cursor(self) -> int:
        """The highest sequence delivered (what a re-attach sends as ``Last-Event-ID``)."""
        return self._state.cursor

    # -- a connection ----------------------------------------------------------------------------

    def begin(self) -> dict[str, str]:
        """A connection is about to open: reset per-connection state, return its request headers."""
        self.stats.connections += 1
        self._in_replay = self.stats.connections > 1
        if self._in_replay:
            self._state.reattach()
        # The server's reconnection time outlives the connection that set it, as in EventSource.
        self.decoder = FrameDecoder(max_line_size=self._max_line, max_event_size=self._max_event,
                                    retry=self.decoder.retry)
        return request_headers(str(self.cursor) if self.cursor else "")

    def check_response(self, status: int, content_type: str, retry_after: str | None,
                       body: bytes) -> bool:
        """True for a 200 ``text/event-stream``; else the connection fails with the typed
        ``ResponseStatusError`` of ``response_error`` and this returns False."""
        error = response_error(status, content_type, retry_after, body)
        if error is not None:
            self._defer(error)
        return error is None

    def feed(self, data: bytes) -> None:
        """Bytes of the body: queue what they complete; a protocol error waits behind the chunks
        decoded before it (``take_error``)."""
        if self._deferred is not None or self.finished:
            return
        decoder = self.decoder
        try:
            frames = decoder.feed(data)
        except StreamwireError as exc:  # malformed (retryable) or over a limit (not retryable)
            self._defer(exc)
            return
        self._frames(frames)
        if decoder.error is not None and self._deferred is None and not self.finished:
            self._defer(decoder.error)  # it follows the frames just queued: stop reading now

    def end_of_body(self) -> None:
        """The body ended: a last frame may lack its blank line; no terminal frame is a drop."""
        if self._deferred is not None or self.finished:
            return
        try:
            self._frames(self.decoder.flush())
        except StreamwireError as exc:
            self._defer(exc)
            return
        if self._deferred is not None or self.finished:
            return
        if self.decoder.error is not None:  # a malformed last frame: it follows those queued
            self._defer(self.decoder.error)
            return
        try:
            self._state.eof()
        except StreamDropError as exc:  # no terminal frame: a drop, never a clean end
            self._defer(exc)

    def transport_failed(self, exc: BaseException, what: str) -> None:
        """The connection broke (network error, idle timeout): a drop, chained to its cause."""
        if self._deferred is not None or self.finished:
            return
        drop = StreamDropError(f"{what}: {type(exc).__name__}: {exc}", cursor=self.cursor)
        drop.__cause__ = exc
        self._defer(drop)

    def _frames(self, frames: Sequence[StreamFrame | UnknownFrame]) -> None:
        state = self._state
        for frame in frames:
            try:
                before = state.cursor
                out = state.receive(frame)
            except StreamwireError as exc:
                self._defer(exc)
                return
            if isinstance(frame, CaughtUpFrame):
                self._in_replay = False
                self.backoff.caught_up()
            for item in out:
                if isinstance(item, ChunkFrame):
                    if self._in_replay:
                        self.stats.replayed += 1
                elif item.min_sequence is not None:
                    self._prune(item.min_sequence)
                self.pending.append(item)
            if isinstance(frame, ChunkFrame) and state.cursor == before:
                self.stats.duplicates += 1
            elif out:
                self._progress()
            if state.terminal is not None:
                if isinstance(state.terminal, EndFrame):
                    self.end_frame = state.terminal
                self.finished = True
                self._progress()
                return

    def _prune(self, min_sequence: int) -> None:
        """A cleanup removed the chunks above ``min_sequence``: those still waiting for the
        caller are dropped (wire v2 seed, "rewound while attached": a reader prunes its buffer)."""
        kept = [item for item in self.pending
                if not (isinstance(item, ChunkFrame) and item.sequence > min_sequence)]
        self.stats.pruned += len(self.pending) - len(kept)
        self.pending = deque(kept)

    def hand_out(self, chunk: ChunkFrame) -> None:
        """``chunk`` goes to the caller now."""
        self.handed = chunk.sequence
        self.stats.delivered += 1

    def _defer(self, exc: StreamwireError) -> None:
        self._deferred = exc

    def _progress(self) -> None:
        self.backoff.progress()

    # -- between connections ---------------------------------------------------------------------

    def take_error(self) -> StreamwireError | None:
        """The error that ended the current connection, once its chunks were handed out."""
        if self.pending:
            return None
        exc, self._deferred = self._deferred, None
        return exc

    def resume_from(self, sequence: int) -> None:
        """After a snapshot (the truncated hook): continue from ``sequence``."""
        self._state.resume_from(sequence)
        self.handed = sequence

    def reattach_delay(self, exc: StreamwireError, now: float) -> float:
        """Seconds to wait before re-attaching after ``exc``, or raise: ``exc`` itself when it is
        not retryable, ``RetriesExhaustedError`` (chained to ``exc``) when a cap is reached."""
        self.last_error = exc
        delay = self.backoff.next_delay(exc, now, self.decoder.retry, self.cursor)
        self.stats.reattaches += 1
        return delay


#: How a cap is named in a message, and where to raise it (a command passes its flags).
CapNames: TypeAlias = tuple[str, str, str]
_LIBRARY_CAPS: Final[CapNames] = ("max_attempts", "max_elapsed", "raise it in RetryPolicy")


class Backoff:
    """The re-attach schedule of one reader: counts attempts and outage time since the last
    progress, enforces the caps of a ``RetryPolicy`` and draws the jittered delays.

    A chunk or a terminal is progress (``progress``): the caps start over. A ``caught-up`` frame
    (``caught_up``) is progress too, so a quiet live stream whose connections a proxy cuts now and
    then never runs out, unless the connection before it ended in a recoverable ``fail``: a
    stream that keeps failing right after catching up backs off, the delay doubling each time up
    to ``backoff_max``, and the caps apply to it.
    """

    __slots__ = ("_attempt", "_caps", "_failing", "_outage_since", "_rng", "failures", "policy")

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None, *,
                 caps: CapNames = _LIBRARY_CAPS) -> None:
        self.policy = policy
        self._rng = rng if rng is not None else random.Random()
        self._caps = caps
        self._attempt = 0
        self._outage_since = -1.0
        self._failing = False
        #: Recoverable ``fail`` frames in a row with no new chunk between them.
        self.failures = 0

    @property
    def attempt(self) -> int:
        """The attempts made since the last progress (the one about to start included)."""
        return self._attempt

    def progress(self) -> None:
        """The reader moved on (a new chunk, a terminal): the caps start over."""
        self._attempt = 0
        self._outage_since = -1.0
        self._failing = False
        self.failures = 0

    def caught_up(self) -> None:
        """A connection reached the head: progress, unless the stream keeps failing."""
        if not self._failing:
            self._attempt = 0
            self._outage_since = -1.0

    def next_delay(self, exc: StreamwireError, now: float, server_retry: int | None,
                   cursor: int, *, doing: str = "") -> float:
        """Seconds to wait before the next attempt after ``exc``; raises ``exc`` when it is not
        retryable (or is a truncation) and ``RetriesExhaustedError`` when a cap is reached.
        ``server_retry`` is the stream's ``retry:`` in milliseconds, if it sent one; ``doing``
        names what was retried in that error (default: re-attaching at ``cursor``)."""
        if isinstance(exc, StreamTruncatedError) or not exc.retryable:
            raise exc
        self._failing = isinstance(exc, StreamFailedError)
        if self._failing:
            self.failures += 1
        if self._outage_since < 0:
            self._outage_since = now
        self._attempt += 1
        policy = self.policy
        elapsed = now - self._outage_since
        over_attempts = policy.max_attempts is not None and self._attempt > policy.max_attempts
        over_time = policy.max_elapsed is not None and elapsed >= policy.max_elapsed
        if over_attempts or over_time:
            attempts, seconds, where = self._caps
            cap = (f"{attempts}={policy.max_attempts}" if over_attempts
                   else f"{seconds}={policy.max_elapsed:g}s")
            raise RetriesExhaustedError(
                f"gave up {doing or f're-attaching at cursor {cursor}'} after "
                f"{self._attempt - 1} attempts "
                f"in {elapsed:.1f}s ({cap}; {where}); last error: {describe(exc)}",
                attempts=self._attempt - 1, elapsed=elapsed, last_error=exc,
            ) from exc
        base = policy.backoff_initial
        if policy.honour_server_retry and server_retry is not None:
            base = server_retry / 1000
        delay = min(base * 2.0 ** (self._attempt - 1), max(policy.backoff_max, base))
        if isinstance(exc, ResponseStatusError) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        return delay * (1 + policy.jitter * self._rng.random())

    def reattach_message(self, exc: StreamwireError, delay: float, where: str) -> str:
        """One line saying why the connection ended and what happens next (for a log or a
        terminal): the cause, where it re-attaches, in how long, which attempt of how many,
        and how often the stream failed in a row."""
        cap = self.policy.max_attempts
        of = f" of {cap}" if cap is not None else ""
        line = (f"{describe(exc)}; re-attaching from {where} in {delay:.1f}s "
                f"(attempt {self._attempt}{of})")
        if self.failures > 1:
            line += (f"; the stream failed {self.failures} times in a row without a new chunk "
                     "(is its writer gone?)")
        return line


def describe(exc: BaseException) -> str:
    """An error as a person reads it: a failed stream by its error and detail, a network error by
    what happened, anything else by its message."""
    if isinstance(exc, StreamFailedError):
        detail = f" {exc.error_detail}" if exc.error_detail else ""
        how = " (recoverable)" if exc.recoverable else ""
        return f"the stream failed{how}: {exc}{detail}"
    if isinstance(exc, StreamwireError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
