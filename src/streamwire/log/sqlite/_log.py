"""``SQLiteLog``: the stream log in one SQLite file; streams survive a restart of the process.

Theory of operation:

* **One connection, one thread** (``streamwire.log.sqlite._worker``): every SQL statement runs on
  a dedicated worker thread that owns the connection, and calls that queue up while a transaction
  runs are committed together (group commit). The SQL itself is in ``streamwire.log.sqlite._sql``,
  the tables in ``streamwire.log.sqlite._schema``; the read rules are the shared ones
  (``streamwire.log._reader``). This module is the API, the reader loop and the wake-ups. The
  record store beside the streams (``record_store``: run records) runs on the same worker.
* **Readers** pull pages of chunks above their position (no buffer per reader in the log). In
  this process they are woken by a per-stream ``anyio.Event`` that every committed change sets (no
  polling). Changes committed by another connection (another process, or another log on the same
  file) are seen within ``watch_interval`` seconds: while any reader is parked, the worker thread
  asks ``PRAGMA data_version`` that often (one cheap query per log, however many readers) and
  wakes every parked reader when it moved. Off asyncio (trio) there is no worker thread: SQL runs
  through anyio's worker threads one call at a time, and readers look within ``poll_interval``.
  ``rewound`` markers are rows (``markers``), so readers in every process get them, in place.
* **Durability** (``synchronous``, WAL mode): with ``"NORMAL"`` (the default) a call that returned
  survives a crash of the process (the WAL is written before the commit returns); a power loss or
  OS crash may lose the last commits since the previous checkpoint, never the file's consistency.
  ``"FULL"`` fsyncs every commit and survives power loss too, at the cost of one fsync per group.
* **The writer's lease.** A stream belongs to its writer's lease, not to a process: appends (written
  to the file at most every third of ``writer_timeout``) and ``keepalive`` renew it, so a server
  restart is invisible to a writer that comes back within ``writer_timeout``. An active stream
  whose lease lapsed fails with ``recoverable: true`` and ``errorDetail.code`` ``WRITER_GONE``,
  written by whoever notices first: a parked reader (it waits until the lease would lapse, then
  looks), the next write call, or a log opening the file. Readers re-attach and get everything
  stored, then that terminal, instead of waiting forever.
* **Idle readers cost no I/O.** A parked reader sleeps until a change in this process wakes it, the
  worker sees another connection's commit (one ``PRAGMA data_version`` per ``watch_interval`` for
  the whole log), or the writer's lease would lapse. Off asyncio it also looks every
  ``poll_interval``.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, final

import anyio

from ...errors import LogError, UsageError
from ...frames import ChunkFrame, EndStatus, RewoundFrame, StreamFrame, TruncatedFrame
from .. import DEFAULT_LIST_LIMIT, LogCapabilities, Producer, StreamInfo
from .._common import (
    DEFAULT_DURABLE_FINISHED_TTL,
    DEFAULT_MAX_BYTES_PER_STREAM,
    DEFAULT_MAX_CHUNK_SIZE,
    DEFAULT_MAX_CHUNKS_PER_STREAM,
    DEFAULT_PAUSED_TTL,
    DEFAULT_WRITER_TIMEOUT,
    check_end_status,
    check_limits,
    check_list,
    check_seconds,
    check_step,
    check_ttl,
    closed_frame,
    coerce_chunk,
    end_payload,
    fail_payload,
)
from .._producers import check_producer
from .._reader import ReadPosition
from .._records import RecordStore, check_kind
from ._records import SQLiteRecordStore
from ._sql import Statements
from ._worker import Worker

__all__ = ["DEFAULT_BUSY_TIMEOUT", "DEFAULT_POLL_INTERVAL", "DEFAULT_WATCH_INTERVAL", "SQLiteLog"]

#: Seconds a waiting reader sleeps before it looks for a dead writer (and, off asyncio, for changes
#: made by another process). In-process changes wake it at once.
DEFAULT_POLL_INTERVAL: Final = 1.0
#: Seconds between the worker's looks for commits by other connections while readers are parked.
DEFAULT_WATCH_INTERVAL: Final = 0.05
#: Seconds a statement waits for another process's write lock before ``LogError``.
DEFAULT_BUSY_TIMEOUT: Final = 5.0
#: What a ``SQLiteLog`` offers beyond ``StreamLog``: everything.
CAPABILITIES: Final = LogCapabilities(positions=True, listing=True, fanout=True, records=True)

_T = TypeVar("_T")
#: Seconds a parked reader waits past the lease's end before it looks (clock granularity).
_LEASE_SLACK: Final = 0.01


@final
class _Local:
    """This process's view of one stream: who waits on it, and a change counter."""

    __slots__ = ("changes", "lease", "readers", "version", "wake")

    def __init__(self) -> None:
        self.lease = 0.0  # time.time() when the writer's lease lapses, as last known here
        self.changes = 0  # every committed change
        self.version = 0  # changes that can make a computed page stale (cleanup, reset, delete)
        self.readers = 0
        self.wake: anyio.Event | None = None


@final
class SQLiteLog:
    """A ``StreamLog`` in a SQLite file (WAL mode): durable, shared by the processes of one host.

    Args:
        path: the database file (created when missing).
        max_chunks_per_stream: retained chunks per stream; past it the oldest are trimmed.
        max_bytes_per_stream: retained chunk bytes per stream, trimmed the same way.
        max_chunk_size: the largest chunk ``append`` accepts (``LogLimitError`` past it).
        finished_ttl: seconds a finished stream is kept (0: forever); a week by default, the
            runs service's record retention, so a run's reply lasts as long as its record.
        paused_ttl: seconds a paused stream is kept (0, the default: until it is reactivated).
        synchronous: ``"NORMAL"`` (survives a process crash) or ``"FULL"`` (also power loss).
        poll_interval: off asyncio, seconds before a waiting reader looks for other processes'
            changes (``math.inf``: never; in-process changes always wake it at once).
        watch_interval: seconds between looks for commits by other connections (other processes,
            other logs on the file) while readers are parked (asyncio).
        busy_timeout: seconds to wait for another process's write lock.
        writer_timeout: seconds a writer's lease lasts without an append or ``keepalive``; an
            active stream whose lease lapsed ends with a recoverable ``fail`` (``WRITER_GONE``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_chunks_per_stream: int = DEFAULT_MAX_CHUNKS_PER_STREAM,
        max_bytes_per_stream: int = DEFAULT_MAX_BYTES_PER_STREAM,
        max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE,
        finished_ttl: float = DEFAULT_DURABLE_FINISHED_TTL,
        paused_ttl: float = DEFAULT_PAUSED_TTL,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        watch_interval: float = DEFAULT_WATCH_INTERVAL,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        writer_timeout: float = DEFAULT_WRITER_TIMEOUT,
    ) -> None:
        check_limits(max_chunks_per_stream, max_bytes_per_stream, max_chunk_size, finished_ttl)
        check_seconds("writer_timeout", writer_timeout)
        self.writer_timeout = float(writer_timeout)
        if synchronous not in ("NORMAL", "FULL"):
            raise UsageError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        if not poll_interval > 0:
            raise UsageError(f"poll_interval must be > 0 seconds, not {poll_interval!r}")
        if not 0 < watch_interval < math.inf:
            raise UsageError(f"watch_interval must be a finite number of seconds > 0, "
                             f"not {watch_interval!r}")
        self.path = Path(path)
        self.max_chunks_per_stream = max_chunks_per_stream
        self.max_bytes_per_stream = max_bytes_per_stream
        self.max_chunk_size = max_chunk_size
        self.finished_ttl = float(finished_ttl)
        self.paused_ttl = check_ttl("paused_ttl", paused_ttl)
        self.synchronous = synchronous
        self.poll_interval = float(poll_interval)
        self.watch_interval = float(watch_interval)
        self.busy_timeout = float(busy_timeout)
        self._locals: dict[str, _Local] = {}
        self._closed = False
        self._sql = Statements(max_chunks_per_stream=max_chunks_per_stream,
                               max_bytes_per_stream=max_bytes_per_stream,
                               finished_ttl=self.finished_ttl, paused_ttl=self.paused_ttl,
                               writer_timeout=self.writer_timeout, token=uuid.uuid4().hex)
        self._worker = Worker(self.path, self._sql, synchronous=synchronous,
                              busy_timeout=self.busy_timeout, watch_interval=self.watch_interval,
                              on_foreign_commit=self._notify_all)

    @property
    def _thread(self) -> object:
        """The worker thread once started (tests check it stops)."""
        return self._worker.thread

    @property
    def capabilities(self) -> LogCapabilities:
        """Positions, listing, fan-out and a record store (``LogCapabilities``)."""
        return CAPABILITIES

    def record_store(self, kind: str) -> RecordStore:
        """The store of ``kind`` records in this file (table ``{kind}s``), run on this log's
        worker thread: one connection and one thread for streams and records alike."""
        return SQLiteRecordStore(self._call, check_kind(kind))

    async def _call(self, fn: Callable[..., _T], *args: Any, write: bool = True) -> _T:
        if self._closed:
            raise LogError("the stream log is closed")
        return await self._worker.call(fn, *args, write=write)

    # -- in-process wake-ups ----------------------------------------------------------------

    def _notify(self, stream_id: str, *, stale: bool = False) -> None:
        local = self._locals.get(stream_id)
        if local is None:
            return
        local.changes += 1
        if stale:
            local.version += 1
        wake = local.wake
        if wake is not None:
            local.wake = None
            wake.set()

    def _notify_all(self) -> None:
        for stream_id in list(self._locals):
            self._notify(stream_id)


    # -- the API -------------------------------------------------------------------------------

    async def create_stream(self, stream_id: str) -> StreamInfo:
        """Create the stream if it does not exist (idempotent); return its info."""
        if type(stream_id) is not str or not stream_id:
            raise UsageError(f"a stream id is a non-empty str, not {stream_id!r}")
        return await self._call(self._sql.create, stream_id)

    async def info(self, stream_id: str) -> StreamInfo:
        """Head, status, marker, floor and the persisted end or fail payload."""
        return await self._call(self._sql.info, stream_id, write=False)

    async def list_streams(self, *, after: str = "",
                           limit: int = DEFAULT_LIST_LIMIT) -> list[StreamInfo]:
        """The infos of at most ``limit`` streams with an id greater than ``after``, in id order
        (SQLite's BINARY collation of UTF-8 text: codepoint order); expired ones are skipped."""
        check_list(after, limit)
        return await self._call(self._sql.list_streams, after, limit, write=False)

    async def append(self, stream_id: str, step: int, chunk: bytes, *,
                     producer: Producer | None = None) -> int:
        """Append one chunk (its JSON text) produced at ``step``; return its sequence."""
        row = (check_step(step), coerce_chunk(chunk, self.max_chunk_size))
        if producer is not None:
            check_producer(producer)
        first, _ = await self._call(self._sql.append, stream_id, (row,), producer)
        self._notify(stream_id)
        return first

    async def append_many(self, stream_id: str, chunks: Sequence[tuple[int, bytes]], *,
                          producer: Producer | None = None) -> list[int]:
        """Append ``(step, chunk_json)`` pairs atomically (all or none); return their sequences."""
        limit = self.max_chunk_size
        rows = [(check_step(step), coerce_chunk(chunk, limit)) for step, chunk in chunks]
        if producer is not None:
            check_producer(producer)
        elif not rows:
            await self._call(self._sql.active_row, stream_id, write=False)
            return []
        first, count = await self._call(self._sql.append, stream_id, rows, producer)
        self._notify(stream_id)
        return list(range(first, first + count))

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
        """Persist the end status and payload; attached readers get ``EndFrame`` and stop."""
        check_end_status(status)
        payload = end_payload(output, state, usage)
        await self._call(self._sql.end, stream_id, status, payload,
                         None if producer is None else check_producer(producer))
        self._notify(stream_id)

    async def fail_stream(
        self,
        stream_id: str,
        error: str,
        *,
        error_detail: dict[str, Any] | None = None,
        recoverable: bool = False,
        producer: Producer | None = None,
    ) -> None:
        """Persist a failure; attached readers get ``FailFrame`` and stop."""
        payload = fail_payload(error, error_detail, recoverable)
        await self._call(self._sql.end, stream_id, "failed", payload,
                         None if producer is None else check_producer(producer))
        self._notify(stream_id)

    async def cleanup_to_step(self, stream_id: str, step: int) -> RewoundFrame:
        """Remove the chunks of steps after ``step``, set the cleanup marker, and broadcast the
        returned ``RewoundFrame`` to every attached reader (also when nothing was removed)."""
        check_step(step)
        frame = await self._call(self._sql.cleanup, stream_id, step)
        self._notify(stream_id, stale=True)
        return frame

    async def keepalive(self, stream_id: str) -> None:
        """Renew the writer's lease of an active stream (``StreamStateError`` once it is not,
        e.g. after it lapsed)."""
        await self._call(self._sql.keepalive, stream_id)
        local = self._locals.get(stream_id)
        if local is not None:  # parked readers here need not look when the old lease ends
            local.lease = time.time() + self.writer_timeout

    async def reset_stream(self, stream_id: str) -> None:
        """Start a new run: drop every chunk, clear the marker, status active; the counter goes on."""
        await self._call(self._sql.reset, stream_id)
        self._notify(stream_id, stale=True)

    async def reactivate_stream(self, stream_id: str) -> None:
        """Make a finished stream active again (keeping its chunks) and clear the marker.

        Raises ``StreamStateError`` when the stream is already active.
        """
        await self._call(self._sql.reactivate, stream_id)
        self._notify(stream_id, stale=True)

    async def delete_stream(self, stream_id: str) -> None:
        """Forget the stream; attached readers get a recoverable ``FailFrame``."""
        await self._call(self._sql.delete, stream_id)
        self._notify(stream_id, stale=True)

    async def read(self, stream_id: str, cursor: int = 0, *,
                   position: ReadPosition | None = None) -> AsyncIterator[StreamFrame]:
        """Frames for one reader from ``cursor``: replay, caught-up, live, exactly one terminal.

        Raises (on the first ``__anext__``) ``StreamNotFoundError``, ``UsageError`` for a negative
        cursor and ``StreamStateError`` for a cursor above the head. ``position`` is kept up to
        date with the reader's (the stream server shares one reader among its connections).
        """
        local = self._locals.get(stream_id)
        if local is None:
            local = self._locals[stream_id] = _Local()
        local.readers += 1
        try:
            attached = await self._call(self._sql.attach, stream_id, cursor, write=False)
            if isinstance(attached, TruncatedFrame):
                yield attached
                return
            reader = attached
            settle = False  # look in a write transaction: a lapsed lease is written down
            while True:
                if self._closed:
                    yield closed_frame()
                    return
                changes, version = local.changes, local.version
                if position is not None:
                    position.state = None  # the worker thread moves it while it polls
                step, lease, settled = await self._call(self._sql.poll, stream_id, reader,
                                                        settle, write=settle)
                if position is not None:
                    position.state = reader.state
                assert step is not None  # this view holds every range
                frames, done = step
                settle = False
                if lease is not None:
                    local.lease = lease
                if frames:
                    last = frames[-1]
                    if position is not None:
                        position.last = last
                    if position is not None and position.paged:  # taken whole, in one step
                        position.page = frames
                        yield last
                    else:
                        for frame in frames:
                            yield frame
                            if local.version != version:
                                # a cleanup, reset or delete happened meanwhile: the rest of
                                # this page may be stale (removed chunks are never delivered)
                                if isinstance(frame, ChunkFrame):
                                    reader.state.pos = frame.sequence
                                last = frame
                                break
                    if done and last is frames[-1]:
                        return
                    if local.version != version or not settled or local.changes != changes:
                        continue
                    # else park now: the poll that gave these frames saw nothing more, and
                    # nothing changed since (a reader saves a poll per live batch)
                if local.changes != changes:
                    continue  # a change landed while we looked: look again before sleeping
                settle = await self._park(local, lease is not None)
        finally:
            local.readers -= 1
            if not local.readers and self._locals.get(stream_id) is local:
                del self._locals[stream_id]

    async def _park(self, local: _Local, active: bool) -> bool:
        """Sleep until a change wakes the reader, or (``active``) until the writer's lease would
        lapse, or off asyncio ``poll_interval``; True when the lease has lapsed by then."""
        while True:
            wait = local.lease - time.time() + _LEASE_SLACK if active else math.inf
            if self._worker.thread is None:  # off asyncio nobody watches other connections
                wait = min(wait, self.poll_interval)
            wake = local.wake
            if wake is None:
                wake = local.wake = anyio.Event()
            self._worker.park(+1)
            try:
                with anyio.move_on_after(wait) as scope:
                    await wake.wait()
            finally:
                self._worker.park(-1)
            if not scope.cancelled_caught:
                return False
            if not active or time.time() >= local.lease:
                return active
            if self._worker.thread is None:
                return False  # poll_interval: look for other processes' changes

    async def aclose(self) -> None:
        """Stop the worker, close the file and end every reader with a recoverable ``FailFrame``."""
        if self._closed:
            return
        self._closed = True
        for stream_id in list(self._locals):
            self._notify(stream_id, stale=True)
        await self._worker.aclose()

    async def __aenter__(self) -> SQLiteLog:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
