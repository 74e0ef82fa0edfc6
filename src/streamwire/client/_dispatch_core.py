"""The dispatcher's sans-I/O half: what a follow of a run's stream decides after each piece of
body, each terminal, each failure and each ``/status`` answer, and what both dispatchers share
(``DispatcherBase``: options, URLs, request bodies); the async dispatcher (``client._dispatcher``,
and ``_dispatcher_sync`` generated from it) only moves bytes and sleeps."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

import httpx
import msgspec

from ..errors import (
    PauseExpiredError,
    ResponseStatusError,
    RetriesExhaustedError,
    RunConflictError,
    RunNotFoundError,
    RunStateError,
    StreamwireError,
    ToolAnswerError,
    UnknownAgentError,
)
from ..frames import (
    ChunkFrame,
    EndFrame,
    FailFrame,
    RemoteOutcomeKind,
    RepeatedFail,
    TransportDecoder,
)
from ..runs import RunOutcome, outcome_from_status, outcome_from_terminal
from ._core import Backoff, RetryPolicy
from ._http import RETRY_STATUSES, request_headers

__all__ = [
    "DEFAULT_RECOVER_TIMEOUT",
    "DispatcherBase",
    "Follow",
    "error_for",
    "now",
    "retryable_error",
    "retryable_status",
]

T = TypeVar("T")

#: Seconds a follow keeps asking ``/status`` and re-attaching while the run says ``running``
#: after its stream broke: longer than a worker's default lease (30 s) plus a sweep.
DEFAULT_RECOVER_TIMEOUT: Final = 120.0
_ERRORS: Final[dict[str, type[StreamwireError]]] = {
    "RunConflictError": RunConflictError, "RunStateError": RunStateError}


def retryable_status(status: int) -> bool:
    return status in RETRY_STATUSES


def error_for(status: int, body: bytes, what: str) -> StreamwireError:
    """The typed error an error answer of the runs API means."""
    try:
        data: dict[str, Any] = msgspec.json.decode(body)
        message = str(data.get("error", ""))
    except (msgspec.DecodeError, AttributeError):
        data, message = {}, body[:200].decode("utf-8", "replace")
    if status == 404 and "agents" in data:
        return UnknownAgentError(str(data.get("agent", "")), list(data["agents"]))
    if status == 404 and what != "start":
        return RunNotFoundError(what)
    if status == 409:
        return _ERRORS.get(str(data.get("code")), RunConflictError)(message)
    if status == 410 and data.get("code") == "PauseExpiredError":
        return PauseExpiredError(what, message=message)
    if status == 422 and data.get("code") == "ToolAnswerError":
        return ToolAnswerError(message)
    return ResponseStatusError(f"HTTP {status}: {message}", status_code=status,
                               retryable=retryable_status(status))


class Follow:
    """One dispatcher's read of a run across connections: cursor, dedup, backoff, the outcome.

    After a connection ends, ``need_status`` says whether ``/status`` must decide (a recoverable
    failure, a truncation, or re-attaching ran out); ``outcome`` is set once the run settled.
    A re-attach that returns the same recoverable ``fail`` at the same cursor (``RepeatedFail``)
    made no progress: the stream holds that failure, so while ``/status`` says running the follow
    asks ``/status`` again rather than the stream, until the head moves or ``recover_timeout``.

    ``confirm_paused`` (a resume whose answer was lost and recovered through ``/status``): an
    ``end{paused}`` is checked against ``/status`` before it settles the run, since the stream
    may still hold the pause the resume ended.

    A ``/status`` that says the run ended, at a head past the follow's cursor, does not settle it
    at once: the chunks up to that head are read from the stream first (nothing is lost when the
    run ended between the follow's last read and its question).
    """

    def __init__(self, run_id: str, cursor: int, policy: RetryPolicy,
                 recover_timeout: float, poll_interval: float, *,
                 confirm_paused: bool = False) -> None:
        self.run_id = run_id
        self.cursor = cursor
        self.policy = policy
        self.backoff = Backoff(policy)
        self.recover_timeout = recover_timeout
        self.poll_interval = poll_interval
        self.decoder = TransportDecoder()
        self.outcome: RunOutcome | None = None
        self.need_status = False
        self.delay = 0.0
        self.connections = 0
        self.last_error: BaseException | None = None
        self.confirm_paused = confirm_paused
        self._recover_since = -1.0
        self._repeats = RepeatedFail()
        self._stored_fail = False  # the stream answered the same fail twice at this cursor
        self._read_to = -1  # the head of a final /status the stream was re-read for

    def begin(self) -> dict[str, str]:
        """A connection opens: its headers."""
        self.connections += 1
        self.decoder = TransportDecoder()
        self.delay = 0.0
        return request_headers(str(self.cursor) if self.cursor else "")

    def feed(self, data: bytes) -> list[ChunkFrame]:
        """Body bytes: the new chunks (each sequence once); a terminal settles or asks status."""
        out: list[ChunkFrame] = []
        for event in self.decoder.feed(data):
            if type(event) is ChunkFrame:
                if event.sequence > self.cursor:
                    self.cursor = event.sequence
                    out.append(event)
            else:
                self._terminal()
        if out:
            self.backoff.progress()
            self._recover_since = -1.0
        return out

    def end_of_body(self) -> list[ChunkFrame]:
        """The body ended: raises ``StreamDropError`` when no terminal came."""
        out = [e for e in self.decoder.close() if type(e) is ChunkFrame and e.sequence > self.cursor]
        if out:
            self.cursor = out[-1].sequence
        if self.decoder.terminal is not None:
            self._terminal()
        return out

    def _terminal(self) -> None:
        terminal = self.decoder.terminal
        assert terminal is not None
        outcome = outcome_from_terminal(terminal)
        if isinstance(terminal, FailFrame):
            self._stored_fail = self._repeats.seen(terminal, self.cursor)
        if (self.confirm_paused and isinstance(terminal, EndFrame)
                and terminal.status == "paused"):
            self.need_status = True  # maybe the pause the resume ended: /status decides
            self.last_error = StreamwireError("the stream ended paused")
        elif outcome.kind is RemoteOutcomeKind.RETRY:
            # a recoverable fail or a truncation says nothing final about the run: ask it
            self.need_status = True
            self.last_error = StreamwireError(
                terminal.error if isinstance(terminal, FailFrame) else "the stream was truncated")
        else:
            self.outcome = outcome

    def failed(self, exc: StreamwireError | Exception, now: float) -> None:
        """The connection failed (transport error, drop, malformed frame, error status): wait
        and re-attach, or ask ``/status`` once re-attaching ran out or cannot help."""
        self.last_error = exc
        try:
            self.delay = self.backoff.next_delay(retryable_error(exc), now, None, self.cursor)
        except StreamwireError:
            self.need_status = True
            self.delay = 0.0

    def status_answer(self, body: dict[str, Any], now: float) -> None:
        """``/status`` answered: settle, or (still running) re-attach after ``poll_interval``;
        ``RetriesExhaustedError`` once the run stayed running for ``recover_timeout`` seconds."""
        self.need_status = False
        outcome = outcome_from_status(body)
        if outcome is not None:
            head = body.get("head")
            if type(head) is int and head > self.cursor and head != self._read_to:
                # It ended after this follow last read its stream, which still holds the chunks
                # up to its end: read them (its terminal settles it). Once per head: a stream
                # that cannot give them (truncated, expired) settles on this answer next time.
                self._read_to = head
                return
            self.outcome = outcome
            return
        self.status_unavailable(None, now)
        self.backoff.progress()
        if self._stored_fail and body.get("head") == self.cursor:
            self.need_status = True  # the stream would answer its stored fail again
        else:
            self._stored_fail = False

    def status_unavailable(self, exc: BaseException | None, now: float) -> None:
        """``/status`` could not be read (or said running): try again after a while, within
        ``recover_timeout``."""
        if self._recover_since < 0:
            self._recover_since = now
        elapsed = now - self._recover_since
        if elapsed >= self.recover_timeout:
            last = exc or self.last_error or StreamwireError("the run stayed running")
            raise RetriesExhaustedError(
                f"run {self.run_id!r} did not settle: no terminal and no final status within "
                f"recover_timeout={self.recover_timeout}s (raise it on the dispatcher)",
                attempts=self.connections, elapsed=elapsed, last_error=last) from exc
        if exc is not None:
            self.need_status = True
        self.delay = max(self.poll_interval, min(self.policy.backoff_max, elapsed / 4))


def now() -> float:
    return time.monotonic()


def retryable_error(exc: BaseException) -> StreamwireError:
    """``exc`` as a retryable streamwire error (the backoff's input)."""
    if isinstance(exc, StreamwireError):
        return exc
    error = StreamwireError(f"{type(exc).__name__}: {exc}", retryable=True)
    error.__cause__ = exc
    return error


class DispatcherBase(Generic[T]):
    """What the async and sync dispatchers share: options, URLs, request bodies."""

    def __init__(self, base_url: str | httpx.URL, decode: Callable[[ChunkFrame], T] | None, *,
                 headers: dict[str, str] | None, retry: RetryPolicy | None,
                 recover_timeout: float, poll_interval: float, idle_timeout: float | None,
                 connect_timeout: float) -> None:
        self.base_url = str(base_url).rstrip("/")
        self.decode = decode
        self.headers = dict(headers or {})
        self.retry = retry or RetryPolicy()
        self.recover_timeout = recover_timeout
        self.poll_interval = poll_interval
        self.timeout = httpx.Timeout(connect_timeout, read=idle_timeout)

    def url(self, run_id: str | None, tail: str = "") -> str:
        return f"{self.base_url}/runs" + (f"/{run_id}/{tail}" if run_id else "")

    def item(self, chunk: ChunkFrame) -> T:
        if self.decode is None:
            return chunk  # type: ignore[return-value]  # T is ChunkFrame when decode is None
        return self.decode(chunk)

    def follow_state(self, run_id: str, cursor: int, *, confirm_paused: bool = False) -> Follow:
        return Follow(run_id, cursor, self.retry, self.recover_timeout, self.poll_interval,
                      confirm_paused=confirm_paused)

    @staticmethod
    def start_body(agent: str, input: Any, run_id: str | None) -> tuple[str, dict[str, Any]]:
        run_id = run_id or uuid.uuid4().hex
        return run_id, {"agent": agent, "input": input, "runId": run_id}

    @staticmethod
    def resume_body(input: Any, resume_id: str | None) -> dict[str, Any]:
        return {"input": input, "resumeId": resume_id or uuid.uuid4().hex}

    @staticmethod
    def settled_entry(kind: str, status: dict[str, Any] | None) -> bool:
        """After a lost answer: did the start (resume) arrive, judging by ``/status``? A start
        did when the run exists; a resume when the run is no longer paused."""
        if status is None:
            return False
        return kind == "start" or status.get("status") != "paused"
