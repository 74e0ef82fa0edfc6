"""Every exception streamwire raises.

::

    StreamwireError                  .retryable (class default; an instance may override it)
    ├─ SSEDecodeError                bytes broke a decoder limit; names the limit and how to raise it
    ├─ PayloadError                  a payload does not match its contract type (JSON or shape)
    ├─ MalformedFrameError           a known event whose JSON or envelope does not validate (retryable)
    │  └─ StreamGapError             a chunk skipped sequences inside one connection; .cursor, .sequence
    ├─ StreamDropError               the body ended (or the transport broke) before a terminal frame (retryable)
    ├─ StreamTruncatedError          the cursor is below the retention floor; carries .floor
    ├─ StreamFailedError             the stream ended with a ``fail`` frame; retryable when recoverable
    ├─ UsageError                    the caller's fault (also a RuntimeError)
    │  └─ RunEndedError              an agent emitted on a run context after its agent ended
    ├─ LogError                      a stream log (backend) failed; foreign errors are chained ``from``
    │  ├─ StreamNotFoundError        no stream with that id (status_hint 404)
    │  ├─ StreamStateError           the operation does not fit the stream's status (status_hint 409)
    │  │  ├─ ProducerSequenceError   a producer's sequence skipped or reordered; .expected, .received
    │  │  └─ ProducerEpochError      a producer's epoch is older than the stream has seen (403)
    │  └─ LogLimitError              a chunk or request over a configured limit (status_hint 413)
    ├─ ContractError                 a contract declaration is invalid (also a TypeError): duplicate
    │                                wire name, a type msgspec cannot decode; at class creation/resolve()
    ├─ RunError                      a run request does not fit the runs API (``streamwire.runs``)
    │  ├─ RunNotFoundError           no run with that id (status_hint 404)
    │  ├─ UnknownAgentError          no agent with that name; .agents lists the served ones (404)
    │  ├─ RunConflictError           the run id (or resume id) is taken by another body (409)
    │  ├─ RunStateError              the run's status forbids it, e.g. resuming a running run (409)
    │  │  └─ PauseExpiredError       the paused run's stream expired before this resume (410)
    │  └─ ToolAnswerError            a resume's toolAnswers do not answer the calls the run waits for (422)
    ├─ ResponseStatusError           (client) the server answered with an error status or not SSE
    └─ RetriesExhaustedError         (client) re-attaching hit a cap; .attempts, .elapsed, .last_error

``status_hint`` is the HTTP status a server should answer with when this error reaches its edge
(h11's ``error_status_hint``); the server never puts the message of an unexpected exception on the
wire unless the application opts in.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ContractError",
    "LogError",
    "LogLimitError",
    "MalformedFrameError",
    "PauseExpiredError",
    "PayloadError",
    "ProducerEpochError",
    "ProducerSequenceError",
    "ResponseStatusError",
    "RetriesExhaustedError",
    "RunConflictError",
    "RunEndedError",
    "RunError",
    "RunNotFoundError",
    "RunStateError",
    "SSEDecodeError",
    "StreamDropError",
    "StreamFailedError",
    "StreamGapError",
    "StreamNotFoundError",
    "StreamStateError",
    "StreamTruncatedError",
    "StreamwireError",
    "ToolAnswerError",
    "UnknownAgentError",
    "UsageError",
]


class StreamwireError(Exception):
    """Base of every streamwire error. ``retryable`` says whether re-attaching may succeed."""

    retryable: bool = False
    status_hint: int = 500

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class SSEDecodeError(StreamwireError):
    """The SSE byte stream exceeded a decoder limit. ``limit`` names the keyword to raise;
    ``events`` holds the events decoded from the same input before the limit tripped."""

    status_hint = 413

    def __init__(self, message: str, *, limit: str, events: list[Any] | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.events: list[Any] = events if events is not None else []


class PayloadError(StreamwireError):
    """A payload's JSON does not parse, or does not match the type its contract declares."""

    status_hint = 422

    def __init__(self, message: str, *, event: str, raw: str | bytes) -> None:
        super().__init__(message)
        self.event = event
        self.raw = raw


class MalformedFrameError(StreamwireError):
    """A known wire-v2 event whose JSON or envelope does not validate (never a skip, never an end)."""

    retryable = True

    def __init__(self, message: str, *, event: str, data: str) -> None:
        super().__init__(message)
        self.event = event
        self.data = data


class StreamDropError(StreamwireError):
    """The connection ended with no terminal frame: a drop, never a clean end (wire v2, seed
    ``000_e7e163321047a0a9.txt``, "EOF with no terminal frame"); re-attach from ``cursor``."""

    retryable = True

    def __init__(self, message: str = "stream ended without a terminal frame", *,
                 cursor: int | None = None) -> None:
        super().__init__(message)
        self.cursor = cursor


class StreamTruncatedError(StreamwireError):
    """The reader's cursor is below the retention floor: refetch a snapshot, resume from ``floor``."""

    def __init__(self, message: str, *, floor: int,
                 error_detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.floor = floor
        self.error_detail: dict[str, Any] = error_detail if error_detail is not None else {
            "code": "TRUNCATED"}


class StreamFailedError(StreamwireError):
    """The stream ended with a ``fail`` frame. ``retryable`` is the frame's ``recoverable``."""

    def __init__(self, error: str, *, error_detail: dict[str, Any] | None = None,
                 recoverable: bool = False) -> None:
        super().__init__(error, retryable=recoverable)
        self.error = error
        self.error_detail = error_detail
        self.recoverable = recoverable


class UsageError(StreamwireError, RuntimeError):
    """The caller used the API wrongly (an event outside the contract, a reused object, …)."""

    status_hint = 400


class RunEndedError(UsageError):
    """An agent used its ``RunContext`` after its call ended (a task it left behind, a context
    kept in a global): nothing more reaches that run's stream, which may be ended or already
    carry a later call's chunks (a resume). ``run_id`` names the run."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r}: its agent call has ended, so its context takes no more "
                         "emits (a background task must end before the agent returns)")
        self.run_id = run_id


class LogError(StreamwireError):
    """A stream log failed. Backend exceptions are chained as ``__cause__``."""

    status_hint = 503


class StreamNotFoundError(LogError):
    """No stream with this id."""

    status_hint = 404

    def __init__(self, stream_id: str) -> None:
        super().__init__(f"no stream with id {stream_id!r}")
        self.stream_id = stream_id


class StreamStateError(LogError):
    """The operation does not fit the stream's current status (e.g. append after end)."""

    status_hint = 409


class ProducerSequenceError(StreamStateError):
    """An idempotent producer's sequence is not the next one: it skipped ahead (a lost or
    reordered request), or it repeats a request older than the log remembers. Nothing was stored
    by this call. ``expected`` is the sequence the log accepts next from ``producer_id`` (in its
    current epoch), ``received`` the one sent."""

    def __init__(self, message: str, *, producer_id: str, expected: int, received: int) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.expected = expected
        self.received = received


class ProducerEpochError(StreamStateError):
    """An idempotent producer wrote with an epoch older than the newest the stream has seen from
    that producer id: a newer instance of the producer took over, so this one is fenced off
    (nothing stored). ``current`` is the stream's epoch for ``producer_id``."""

    status_hint = 403

    def __init__(self, message: str, *, producer_id: str, current: int, received: int) -> None:
        super().__init__(message)
        self.producer_id = producer_id
        self.current = current
        self.received = received


class LogLimitError(LogError):
    """A chunk, batch or cursor is outside what the log accepts. ``limit`` names the setting."""

    status_hint = 413

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class ContractError(StreamwireError, TypeError):
    """A contract declaration is invalid: a duplicate wire name, a hidden inherited event, or a
    payload type msgspec cannot decode. Raised when the class is created or by ``resolve()``."""


class ResponseStatusError(StreamwireError):
    """The server answered a stream request with an error status (or a body that is not SSE).

    ``retryable`` for statuses a re-attach may outlive (408, 425, 429, 5xx); ``retry_after`` is the
    server's ``Retry-After`` in seconds when it sent one.
    """

    def __init__(self, message: str, *, status_code: int, retryable: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message, retryable=retryable)
        self.status_code = status_code
        self.status_hint = status_code if status_code >= 400 else 502
        self.retry_after = retry_after


class RetriesExhaustedError(StreamwireError):
    """A resumable reader gave up: ``attempts`` re-attaches over ``elapsed`` seconds of outage all
    failed; ``last_error`` (also ``__cause__``) says why the last one did."""

    def __init__(self, message: str, *, attempts: int, elapsed: float,
                 last_error: BaseException) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.elapsed = elapsed
        self.last_error = last_error


class StreamGapError(MalformedFrameError):
    """A chunk skipped sequences inside one connection (``sequence`` > ``cursor`` + 1): the server
    lost chunks. Retryable like any malformed frame: re-attach from ``cursor``, and the server
    replays what is missing or answers ``truncated``. Never a silent gap."""

    def __init__(self, *, cursor: int, sequence: int) -> None:
        super().__init__(
            f"chunk {sequence} arrived after chunk {cursor} on the same connection "
            f"(sequences {cursor + 1}..{sequence - 1} are missing); re-attach from {cursor}",
            event="chunk", data="")
        self.cursor = cursor
        self.sequence = sequence


class RunError(StreamwireError):
    """A request of the runs API does not fit the run it names (``streamwire.runs``)."""

    status_hint = 409


class RunNotFoundError(RunError):
    """No run with this id."""

    status_hint = 404

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class UnknownAgentError(RunError):
    """No agent with this name is served; ``agents`` lists those that are."""

    status_hint = 404

    def __init__(self, agent: str, agents: list[str]) -> None:
        super().__init__(f"no agent named {agent!r}; this server runs: {', '.join(agents) or 'none'}")
        self.agent = agent
        self.agents = agents


class RunConflictError(RunError):
    """The run id (or resume id) was already used with another request body: a retry must send
    the same body, a new request a new id."""


class RunStateError(RunError):
    """The run's status forbids the request (e.g. resuming a run that is not paused)."""


class PauseExpiredError(RunStateError):
    """The paused run's stream expired (the log's ``paused_ttl``, ``serve --paused-ttl``) before
    this resume: the run is now ``failed`` (``PAUSE_EXPIRED``); a new run starts over (410)."""

    status_hint = 410

    def __init__(self, run_id: str, paused_ttl: float | None = None, *,
                 message: str | None = None) -> None:
        after = f" after {paused_ttl:g} s" if paused_ttl else ""
        super().__init__(message or f"run {run_id!r} was paused too long: its stream expired"
                         f"{after} (paused_ttl) and the run failed PAUSE_EXPIRED; start a new run")
        self.run_id = run_id


class ToolAnswerError(RunError):
    """A resume's ``toolAnswers`` do not answer the tool calls the paused run waits for (its
    ``pendingTools``): an unknown call, a wrong approval id, an approval without ``approved``, a
    client tool's answer without ``output`` or ``errorText``. The run stays paused (422)."""

    status_hint = 422
