"""Helpers every ``StreamLog`` backend shares: limits, argument checks and the read rules.

Nothing here does I/O. A backend keeps its own storage and calls these so that memory, SQLite and
Redis answer the same input with the same frame or the same typed error.
"""

from __future__ import annotations

import math
from typing import Any, Final, cast

import msgspec

from ..errors import LogLimitError, PayloadError, StreamStateError, UsageError
from ..frames import EndFrame, FailFrame, RewoundFrame, TerminalFrame, TruncatedFrame
from . import MAX_LIST_LIMIT, StreamStatus

__all__ = [
    "DEFAULT_DURABLE_FINISHED_TTL",
    "DEFAULT_FINISHED_TTL",
    "DEFAULT_MAX_BYTES_PER_STREAM",
    "DEFAULT_MAX_CHUNKS_PER_STREAM",
    "DEFAULT_MAX_CHUNK_SIZE",
    "DEFAULT_PAUSED_TTL",
    "DEFAULT_WRITER_TIMEOUT",
    "FINISHED",
    "MAX_SAFE_INTEGER",
    "WRITER_GONE",
    "behind_frame",
    "check_cursor",
    "check_end_status",
    "check_limits",
    "check_list",
    "check_seconds",
    "check_step",
    "check_ttl",
    "closed_frame",
    "coerce_chunk",
    "deleted_frame",
    "end_payload",
    "fail_payload",
    "rewound_frame",
    "terminal_frame",
    "truncated_frame",
    "ttl_for",
]

#: Retained chunks per stream. An LLM reply is a few thousand chunks; 100,000 leaves room for long
#: agent runs while bounding what one stream can pin. Older chunks are trimmed (the floor moves).
DEFAULT_MAX_CHUNKS_PER_STREAM: Final = 100_000
#: Retained chunk bytes per stream (64 MiB): a handful of multi-MB data-URL payloads fit.
DEFAULT_MAX_BYTES_PER_STREAM: Final = 64 * 1024 * 1024
#: One chunk (16 MiB): the SSE decoder's default event limit admits the same payloads.
DEFAULT_MAX_CHUNK_SIZE: Final = 16 * 1024 * 1024
#: Seconds a finished stream (completed / interrupted / failed) is kept by ``MemoryLog``: an hour
#: lets a reader that lost its connection re-attach and read the end; then the stream is
#: forgotten (the process holds it in memory). 0 keeps finished streams forever (every backend
#: reads it so).
DEFAULT_FINISHED_TTL: Final = 3600.0
#: Seconds a finished stream is kept by the durable logs (SQLite, Redis): a week, the runs
#: service's record retention (``streamwire.runs.DEFAULT_RECORD_TTL``), so a run's reply stays
#: readable as long as its record answers ``/status``.
DEFAULT_DURABLE_FINISHED_TTL: Final = 7 * 24 * 3600.0
#: Seconds a paused stream is kept, on every backend: 0, until it is resumed (a human may answer
#: a pause days later).
DEFAULT_PAUSED_TTL: Final = 0.0

#: The largest integer a JavaScript reader holds exactly (``Number.MAX_SAFE_INTEGER``): steps,
#: cursors and producer epochs and seqs above it are refused, on every backend alike.
MAX_SAFE_INTEGER: Final = 2**53 - 1

#: Seconds a writer's lease lasts without an append or a ``keepalive``: a stream whose lease lapsed
#: that long ends with ``fail{recoverable: true, errorDetail.code: WRITER_GONE}``. 30 s (as Durable
#: Streams' leases) lets a producer ride out a server restart or a slow tool call that keeps alive.
DEFAULT_WRITER_TIMEOUT: Final = 30.0

#: The statuses after which a reader gets its terminal frame.
FINISHED: Final[frozenset[StreamStatus]] = frozenset({"completed", "paused", "interrupted", "failed"})

_raw_decoder: Final = msgspec.json.Decoder(msgspec.Raw)


def check_limits(
    max_chunks_per_stream: int, max_bytes_per_stream: int, max_chunk_size: int,
    finished_ttl: float,
) -> None:
    """Refuse nonsensical limits at construction, naming the keyword."""
    for name, value in (("max_chunks_per_stream", max_chunks_per_stream),
                        ("max_bytes_per_stream", max_bytes_per_stream),
                        ("max_chunk_size", max_chunk_size)):
        if type(value) is not int or value < 1:
            raise UsageError(f"{name} must be a positive int, not {value!r}")
    if max_chunk_size > max_bytes_per_stream:
        # otherwise one accepted chunk could be trimmed the moment it is appended
        raise UsageError(f"max_chunk_size={max_chunk_size} is over max_bytes_per_stream="
                         f"{max_bytes_per_stream}; raise max_bytes_per_stream= too")
    check_ttl("finished_ttl", finished_ttl)


def check_ttl(name: str, value: object) -> float:
    """A time to live: a finite number of seconds >= 0 (0: forever; bool, NaN and inf refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0 <= value < math.inf):
        raise UsageError(f"{name} must be a number of seconds >= 0 (0: keep forever), "
                         f"not {value!r}")
    return float(value)


def ttl_for(status: StreamStatus, finished_ttl: float, paused_ttl: float) -> float:
    """Seconds a stream that just ended with ``status`` is kept (0: until it is reactivated,
    reset or deleted): ``paused_ttl`` for a pause, ``finished_ttl`` for every other end."""
    return paused_ttl if status == "paused" else finished_ttl


#: The persisted ``fail`` payload of a stream whose writer's lease lapsed (one rule, every backend:
#: the stream is failed by whichever process notices first, once; readers re-attach and get every
#: stored chunk, then this terminal).
WRITER_GONE: Final[dict[str, Any]] = {
    "error": "the stream's writer is gone: no append or keepalive within writer_timeout",
    "recoverable": True, "error_detail": {"code": "WRITER_GONE"}}


def check_list(after: object, limit: object) -> None:
    """``list_streams``' arguments: ``after`` a str ('' for the first page), ``limit`` an int in
    ``1..MAX_LIST_LIMIT`` (bool refused)."""
    if type(after) is not str:
        raise UsageError(f"after must be a str (the last stream id of the previous page, '' for "
                         f"the first), not {after!r}")
    if type(limit) is not int or not 1 <= limit <= MAX_LIST_LIMIT:
        raise UsageError(f"limit must be an int from 1 to {MAX_LIST_LIMIT}, not {limit!r}: ask "
                         "for more pages with after= instead")


def check_seconds(name: str, value: object) -> None:
    """A duration keyword: a finite number of seconds > 0 (bool refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0 < value < math.inf):
        raise UsageError(f"{name} must be a number of seconds > 0, not {value!r}")


def check_step(step: object) -> int:
    """A step is an int in ``0..2**53 - 1`` (bool refused)."""
    if type(step) is not int or not 0 <= step <= MAX_SAFE_INTEGER:
        raise UsageError(f"step must be an int in 0..2**53 - 1, not {step!r}")
    return step


def check_cursor(cursor: object, head: int) -> int:
    """A cursor is an int in ``0..head``; above head it names a chunk that does not exist."""
    if type(cursor) is not int or not 0 <= cursor <= MAX_SAFE_INTEGER:
        raise UsageError(f"cursor must be an int in 0..2**53 - 1, not {cursor!r}")
    if cursor > head:
        raise StreamStateError(
            f"cursor {cursor} is above the stream's head {head}: it names a chunk this stream "
            "never had (a cursor from another stream, or from data the log lost)")
    return cursor


def coerce_chunk(chunk: object, max_chunk_size: int) -> bytes:
    """The chunk as ``bytes``: one JSON value, at most ``max_chunk_size`` bytes.

    Invalid JSON is refused here (``PayloadError``) because the log passes the chunk through as
    ``msgspec.Raw``: a bad one would make every reader's frame malformed, forever.
    """
    if type(chunk) is not bytes:
        if isinstance(chunk, bytearray):
            chunk = bytes(chunk)
        elif isinstance(chunk, memoryview):
            chunk = chunk.tobytes()
        elif isinstance(chunk, str):
            chunk = chunk.encode()
        else:
            raise UsageError(f"a chunk is JSON text as bytes, not {type(chunk).__name__}")
    assert isinstance(chunk, bytes)
    if len(chunk) > max_chunk_size:
        raise LogLimitError(
            f"chunk of {len(chunk)} bytes is over max_chunk_size={max_chunk_size}; "
            "raise max_chunk_size= on the log to accept it", limit="max_chunk_size")
    try:
        _raw_decoder.decode(chunk)
    except msgspec.DecodeError as exc:
        raise PayloadError(f"a chunk must be one JSON value: {exc}", event="chunk",
                           raw=chunk) from None
    return chunk


def check_end_status(status: object) -> None:
    """An ``end`` frame's status is one of the three the seed names."""
    if status not in ("completed", "paused", "interrupted"):
        raise UsageError(f"end status must be completed, paused or interrupted, not {status!r}")


def end_payload(output: Any, state: Any, usage: object) -> dict[str, Any]:
    """The persisted ``end`` payload (absent fields left out), as JSON would give it back: every
    backend stores JSON, so a value that does not encode is refused now, not at a reader."""
    if usage is not None and not isinstance(usage, dict):
        raise UsageError(f"usage must be a JSON object (a dict) or None, not {usage!r}")
    fields = (("output", output), ("state", state), ("usage", cast("dict[str, Any] | None", usage)))
    return json_copy({k: v for k, v in fields if v is not None}, "the end payload")


def fail_payload(error: object, error_detail: object, recoverable: bool) -> dict[str, Any]:
    """The persisted ``fail`` payload, checked like ``end_payload``."""
    if type(error) is not str:
        raise UsageError(f"error must be a str, not {error!r}")
    if error_detail is not None and not isinstance(error_detail, dict):
        raise UsageError(f"error_detail must be a JSON object (a dict) or None, not {error_detail!r}")
    payload: dict[str, Any] = {"error": error, "recoverable": bool(recoverable)}
    if error_detail is not None:
        payload["error_detail"] = cast("dict[str, Any]", error_detail)
    return json_copy(payload, "the fail payload")


def json_copy(value: dict[str, Any], what: str) -> dict[str, Any]:
    """``value`` through JSON and back (a copy the caller cannot mutate afterwards)."""
    try:
        copied: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(value))
    except (TypeError, msgspec.EncodeError) as exc:
        raise UsageError(f"{what} must be JSON-serialisable: {exc}") from None
    return copied


def terminal_frame(status: StreamStatus, *, output: Any = None, state: Any = None,
                   usage: dict[str, Any] | None = None, error: str | None = None,
                   error_detail: dict[str, Any] | None = None,
                   recoverable: bool | None = None) -> TerminalFrame:
    """The terminal a reader of a finished stream gets: ``end`` with the persisted status, or
    ``fail`` with the persisted failure."""
    if status == "failed":
        return FailFrame(error=error or "stream failed", recoverable=bool(recoverable),
                         error_detail=error_detail)
    if status == "active":
        raise AssertionError("an active stream has no terminal")
    return EndFrame(status=status, output=output, state=state, usage=usage)


def truncated_frame(floor: int) -> TruncatedFrame:
    """``truncated{floor}`` (errorDetail code TRUNCATED)."""
    return TruncatedFrame(floor=floor)


def rewound_frame(step: int, head: int, removed_min: int | None) -> RewoundFrame:
    """``rewound{atStep, atSequence: head, minSequence?}``; chunks above ``minSequence`` (the
    lowest removed sequence - 1) with a later step were removed."""
    return RewoundFrame(at_step=step, at_sequence=head,
                        min_sequence=None if removed_min is None else removed_min - 1)


def deleted_frame() -> FailFrame:
    """What an attached reader gets when its stream is deleted."""
    return FailFrame(error="stream deleted", recoverable=True,
                     error_detail={"code": "STREAM_DELETED"})


def behind_frame() -> FailFrame:
    """What a reader gets when the ``rewound`` markers it was owed were pruned (it sat still
    through more cleanups than the log keeps): re-attach from the cursor."""
    return FailFrame(error="the reader fell behind the stream's rewound markers",
                     recoverable=True, error_detail={"code": "READER_BEHIND"})


def closed_frame() -> FailFrame:
    """What an attached reader gets when the log closes (e.g. the server shuts down)."""
    return FailFrame(error="stream log closed", recoverable=True,
                     error_detail={"code": "LOG_CLOSED"})
