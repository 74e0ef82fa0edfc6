"""The durable stream log: where a run's chunks live so readers can attach, leave and re-attach.

One async API (``StreamLog``), several backends: ``streamwire.log.memory.MemoryLog`` (the default),
``streamwire.log.sqlite.SQLiteLog`` (a file) and ``streamwire.log.redis.RedisLog`` (many servers).
Every backend passes the same contract suite, ``streamwire.testing``.

Semantics (wire v2, ``../shared/seeds/000_e7e163321047a0a9.txt``; the read rules are written once,
in ``streamwire.log._reader``, and every backend applies them):

* sequences start at 1 and are monotonic and gap-free per stream, also across ``reset_stream``
  (a new run continues the counter, so an old cursor never aliases a new chunk);
* ``read(stream_id, cursor)`` yields every retained chunk with sequence > cursor, then
  ``CaughtUpFrame(head)``, then live chunks and ``RewoundFrame`` markers, then exactly one terminal
  frame (``EndFrame``, ``FailFrame`` or ``TruncatedFrame``) and stops;
* ``TruncatedFrame(floor)`` answers a cursor below the floor while a cleanup marker is set
  (a cleanup removed chunks of the current run), and whenever retention trimming removed chunks above the cursor: never a silent gap.
  A cursor from an earlier run (at or below the head when the stream was reset) is served the
  current run;
* readers pull from the log: a slow reader makes the log buffer nothing, an append never waits on
  a reader, and a chunk that a cleanup removed before a reader took it is never delivered to it
  (the reader gets the ``rewound`` marker in its place);
* ``rewound`` goes only to readers attached when the cleanup ran, at the point where it happened;
* a stream belongs to its writer's lease, not to a process: a writer that neither appends nor
  calls ``keepalive`` for ``writer_timeout`` seconds is gone, and its stream ends with a
  recoverable ``fail`` (``WRITER_GONE``); a server restart within that time is invisible;
* a writer that passes ``producer=Producer(id, epoch, seq)`` is idempotent: a retried request is
  stored once and answered with its original result (``Producer``);
* ``list_streams(after=, limit=)`` pages through the streams in id order (codepoint order, which
  is UTF-8 byte order: the same on every backend); deleted and expired streams are never listed;
* what a log offers beyond this protocol (positions kept for the stream server's fan-out, listing,
  a record store beside its streams) it declares in its ``capabilities`` (``LogCapabilities``);
  nothing is guessed from its type or signatures, so a wrapped or subclassed log keeps them;
* every limit is a keyword of the backend (``max_chunks_per_stream``, ``max_bytes_per_stream``,
  ``max_chunk_size``, ``finished_ttl`` and ``paused_ttl`` with 0 = keep such streams until they
  are reactivated, reset or deleted); defaults and the shared checks are in
  ``streamwire.log._common``: finished streams are kept an hour in memory and a week (the runs
  service's record retention) on SQLite and Redis; paused streams until resumed everywhere.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias, cast, final, runtime_checkable

import msgspec

from .._public import publish
from ..errors import UsageError
from ..frames import EndStatus, RewoundFrame, StreamFrame
from ._records import RecordStore, StoredRecord, check_kind

__all__ = ["DEFAULT_LIST_LIMIT", "MAX_LIST_LIMIT", "CapableLog", "LogCapabilities", "Producer",
           "RecordStore", "StoredRecord", "StreamInfo", "StreamLog", "StreamStatus",
           "capabilities_of", "record_store_of"]

#: Streams ``list_streams`` returns unless ``limit=`` says otherwise, and the most one call may ask
#: for (a page of 1,000 infos is a few hundred KB; page on with ``after=`` for more).
DEFAULT_LIST_LIMIT: Final = 100
MAX_LIST_LIMIT: Final = 1000

#: A stream's status: ``active`` while its writer runs, then one of the four final statuses.
StreamStatus: TypeAlias = Literal["active", "completed", "paused", "interrupted", "failed"]


@final
class Producer(msgspec.Struct, frozen=True):
    """An idempotent writer's identity on one call: ``id`` (a non-empty str of at most 256
    characters), ``epoch`` and ``seq`` (ints in ``0..2**53 - 1``).

    Each write call that passes ``producer=`` is one request of that producer: its ``seq`` is the
    previous one's plus 1, starting at 0 for each new ``epoch``. The log checks it atomically with
    the write: the next ``seq`` is applied and remembered; a repeat of one of the producer's last
    ``MAX_PRODUCER_BATCHES`` (5) requests is answered with what the original got (the same
    sequences; the content is not compared) and stores nothing; a ``seq`` further ahead, or a
    repeat older than that, raises ``ProducerSequenceError``; an ``epoch`` older than the newest
    the stream has seen from ``id`` raises ``ProducerEpochError`` (a newer instance took over). A
    new ``epoch`` must start at ``seq`` 0. The state lives as long as the stream (also across
    ``reset_stream``), and a repeat is recognised also after the stream finished, so a retried
    ``end_stream`` is a no-op. Calls without ``producer=`` are not checked.
    """

    id: str
    epoch: int
    seq: int


@final
class StreamInfo(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """A stream's state as ``info`` reports it (wire names camelCase, as ``GET /info`` sends).

    ``floor`` is the highest sequence that is not replayable (MIN(sequence) - 1, or ``head`` when
    no chunk is retained); ``oldest_retained_sequence`` is MIN(sequence), or None when empty.
    ``truncated_at_step`` is the cleanup marker. ``epoch`` names this incarnation of the stream's
    data (it changes when a backend lost the stream and it was recreated).
    """

    stream_id: str
    status: StreamStatus
    head: int
    floor: int
    oldest_retained_sequence: int | None = None
    truncated_at_step: int | None = None
    epoch: str = ""
    # end payload (status completed / paused / interrupted)
    output: Any = None
    state: Any = None
    usage: dict[str, Any] | None = None
    # fail payload (status failed)
    error: str | None = None
    error_detail: dict[str, Any] | None = None
    recoverable: bool | None = None


@runtime_checkable
class StreamLog(Protocol):
    """A store of sequenced streams. All methods raise ``StreamNotFoundError`` for an unknown id,
    ``StreamStateError`` when the stream's status forbids the call, ``LogLimitError`` past a
    configured limit and ``LogError`` when the backend fails (or is closed). Malformed arguments
    (a negative step or cursor, one above ``2**53 - 1`` (JavaScript readers could not hold it
    exactly), a chunk that is not bytes, an end status that is not one) raise ``UsageError``; a
    chunk that is not one JSON value raises ``PayloadError``. The write calls take
    ``producer=Producer(id, epoch, seq)`` to be idempotent (see ``Producer``); its errors are
    ``ProducerSequenceError`` and ``ProducerEpochError`` (both ``StreamStateError``).

    ``streamwire.testing.StreamLogContract`` checks every rule; run it on your own backend."""

    async def create_stream(self, stream_id: str) -> StreamInfo:
        """Create the stream if it does not exist (idempotent); return its info."""
        ...

    async def info(self, stream_id: str) -> StreamInfo:
        """Head, status, marker, floor and the persisted end or fail payload."""
        ...

    async def append(self, stream_id: str, step: int, chunk: bytes, *,
                     producer: Producer | None = None) -> int:
        """Append one chunk (its JSON text) produced at ``step``; return its sequence.

        The stream must be active (``StreamStateError`` otherwise); ``step`` is an int >= 0.
        A repeated ``producer`` request returns the original sequence and stores nothing.
        """
        ...

    async def append_many(self, stream_id: str, chunks: Sequence[tuple[int, bytes]], *,
                          producer: Producer | None = None) -> list[int]:
        """Append ``(step, chunk_json)`` pairs atomically (all or none); return their sequences
        (a repeated ``producer`` request: the original ones, nothing stored)."""
        ...

    async def end_stream(
        self,
        stream_id: str,
        status: EndStatus = "completed",
        *,
        output: Any = None,
        state: Any = None,
        usage: dict[str, Any] | None = None,
        producer: Producer | None = None,
    ) -> None:
        """Persist the end status and payload; attached readers get ``EndFrame`` and stop.
        A repeated ``producer`` request is a no-op (also once the stream finished)."""
        ...

    async def fail_stream(
        self,
        stream_id: str,
        error: str,
        *,
        error_detail: dict[str, Any] | None = None,
        recoverable: bool = False,
        producer: Producer | None = None,
    ) -> None:
        """Persist a failure; attached readers get ``FailFrame`` and stop. A repeated
        ``producer`` request is a no-op (also once the stream finished)."""
        ...

    async def keepalive(self, stream_id: str) -> None:
        """Renew the writer's lease of an active stream without writing a chunk (a quiet writer,
        e.g. during a long tool call, calls it more often than ``writer_timeout``).

        Every backend takes ``writer_timeout`` (seconds, default 30): appends, ``keepalive``,
        ``create_stream``, ``reset_stream`` and ``reactivate_stream`` renew the lease; an active
        stream whose lease lapsed ends with ``fail{recoverable: true, errorDetail.code:
        "WRITER_GONE"}``, written once by whoever notices (a parked reader, the next call); the
        writer's later calls raise ``StreamStateError``. Raises ``StreamNotFoundError`` for an
        unknown stream and ``StreamStateError`` when it is not active (also once it lapsed)."""
        ...

    async def cleanup_to_step(self, stream_id: str, step: int) -> RewoundFrame:
        """Remove the chunks of steps after ``step``, set the cleanup marker, and broadcast the
        returned ``RewoundFrame`` to every attached reader (also when nothing was removed)."""
        ...

    async def reset_stream(self, stream_id: str) -> None:
        """Start a new run: drop every chunk, clear the marker, status active; the counter goes on."""
        ...

    async def reactivate_stream(self, stream_id: str) -> None:
        """Make a finished stream active again (keeping its chunks) and clear the marker.
        ``StreamStateError`` when it is already active."""
        ...

    async def delete_stream(self, stream_id: str) -> None:
        """Forget the stream; attached readers get a recoverable ``FailFrame``."""
        ...

    async def list_streams(self, *, after: str = "",
                           limit: int = DEFAULT_LIST_LIMIT) -> list[StreamInfo]:
        """The infos of at most ``limit`` streams whose id is greater than ``after``, in id order
        (codepoint order, the same as UTF-8 byte order); pass the last id as ``after`` for the
        next page. Deleted and expired streams are never listed. ``UsageError`` when ``after``
        is not a str or ``limit`` is not an int in ``1..MAX_LIST_LIMIT``."""
        ...

    def read(self, stream_id: str, cursor: int = 0) -> AsyncIterator[StreamFrame]:
        """Frames for one reader from ``cursor``: replay, caught-up, live, exactly one terminal.

        Errors surface on the first ``__anext__``: ``StreamNotFoundError``, ``UsageError`` for a
        negative cursor, ``StreamStateError`` for a cursor above the head. Closing the iterator
        early (``aclose()``, or cancelling the task) releases everything it held.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and wake every reader (they get a recoverable ``FailFrame``)."""
        ...


@final
class LogCapabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a log offers beyond the ``StreamLog`` protocol, as the log declares it (its
    ``capabilities`` property; ``capabilities_of`` reads it). Every built-in log offers all of it.

    Attributes:
        positions: ``read(stream_id, cursor, position=ReadPosition())`` keeps the reader's
            position (``streamwire.log._reader.ReadPosition``) up to date.
        listing: ``list_streams`` pages through the streams.
        fanout: two readers of one stream that are in step (``streamwire.log._reader.in_step``)
            deliver the same frames from then on, so the stream server may serve many
            connections from one reader (needs ``positions``).
        records: ``record_store(kind)`` returns a ``RecordStore`` on the log's own storage and
            connection (where ``streamwire.runs`` keeps run records by default).
    """

    positions: bool = False
    listing: bool = False
    fanout: bool = False
    records: bool = False

    def __post_init__(self) -> None:
        if self.fanout and not self.positions:
            raise UsageError("LogCapabilities(fanout=True) needs positions=True: the stream "
                             "server compares the positions of the readers it shares")


class CapableLog(Protocol):
    """A log that declares its capabilities: ``capabilities``, and ``record_store`` when they
    say ``records``. Wrap a log by delegating both (or every attribute) to it."""

    @property
    def capabilities(self) -> LogCapabilities:
        """What this log offers beyond ``StreamLog``."""
        ...

    def record_store(self, kind: str) -> RecordStore:
        """The store of ``kind`` records beside this log's streams (the same storage and
        connection); ``UsageError`` for a malformed kind."""
        ...


def capabilities_of(log: object) -> LogCapabilities:
    """What ``log`` offers: its declared ``capabilities``. A log that declares none (a
    third-party log written before ``LogCapabilities``) offers what it has of the protocol:
    ``listing`` when it has ``list_streams``, nothing else."""
    declared = getattr(log, "capabilities", None)
    if isinstance(declared, LogCapabilities):
        return declared
    return LogCapabilities(listing=callable(getattr(log, "list_streams", None)))


def record_store_of(log: object, kind: str) -> RecordStore:
    """The store of ``kind`` records beside ``log``'s streams; ``UsageError`` when ``log``
    declares no record store (``LogCapabilities.records``)."""
    check_kind(kind)
    if not capabilities_of(log).records:
        raise UsageError(f"a {type(log).__name__} declares no record store "
                         "(LogCapabilities.records is false)")
    return cast(CapableLog, log).record_store(kind)


publish(globals(), ["RecordStore", "StoredRecord"])
