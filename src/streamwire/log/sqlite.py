"""``SQLiteLog``: the stream log in one SQLite file; streams survive a restart of the process.

Theory of operation:

* **One connection, one thread.** Every SQL statement runs on a dedicated worker thread that owns
  the connection: ``sqlite3`` calls block (a checkpoint fsyncs), so they never run on the event
  loop, and one owner means no connection sharing across threads. Calls queue up while a
  transaction runs and the worker commits the whole queue in ONE transaction (group commit; each
  call in its own ``SAVEPOINT``, so one call's error undoes only that call). A hop to a dedicated
  thread costs about half of ``anyio.to_thread.run_sync`` (measured in ``bench/bench_log.py``).
  Off asyncio (trio), calls go through ``anyio.to_thread.run_sync`` one at a time instead.
* **Sequences** are allocated inside the write transaction, so they stay gap-free also with
  several processes writing one file. An append is ONE ``INSERT`` (the head is MAX(sequence), and
  ``streams.head`` is written only before chunks are deleted); the worker caches each active
  stream's head, key and retained size, and drops the cache whenever ``PRAGMA data_version``
  says another connection committed.
* **Readers** pull pages of chunks above their position (no buffer per reader in the log). In
  this process they are woken by a per-stream ``anyio.Event`` that every committed change sets (no
  polling). Changes committed by another connection (another process, or another log on the same
  file) are seen within ``watch_interval`` seconds: while any reader is parked, the worker thread
  asks ``PRAGMA data_version`` that often (one cheap query per log, however many readers) and
  wakes every parked reader when it moved. Off asyncio there is no worker thread, and readers
  look within ``poll_interval`` instead.
  ``rewound`` markers are rows (``markers``), so readers in every process get them, in place.
* **Durability** (``synchronous``, WAL mode): with ``"NORMAL"`` (the default) a call that returned
  survives a crash of the process (the WAL is written before the commit returns); a power loss or
  OS crash may lose the last commits since the previous checkpoint, never the file's consistency.
  ``"FULL"`` fsyncs every commit and survives power loss too, at the cost of one fsync per group.
* **A dead writer.** Each stream remembers the process (pid) and the log instance that last wrote
  it. When a log opens the file, and when a waiting reader's ``poll_interval`` elapses, an active
  stream whose writer is gone (its process died, or its log in this process was closed) is failed
  with ``recoverable: true`` and ``errorDetail.code`` ``WRITER_GONE``: readers re-attach and get
  everything stored, then that terminal, instead of waiting forever. (A pid reused by an unrelated
  process after a crash can keep a stream active until that process exits.)
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import queue
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, final

import anyio
import msgspec

from ..errors import LogError, StreamNotFoundError, StreamStateError, StreamwireError, UsageError
from ..frames import CaughtUpFrame, ChunkFrame, EndStatus, RewoundFrame, StreamFrame
from . import StreamInfo, StreamStatus
from ._common import (
    DEFAULT_FINISHED_TTL,
    DEFAULT_MAX_BYTES_PER_STREAM,
    DEFAULT_MAX_CHUNK_SIZE,
    DEFAULT_MAX_CHUNKS_PER_STREAM,
    FINISHED,
    behind_frame,
    check_cursor,
    check_end_status,
    check_limits,
    check_step,
    closed_frame,
    coerce_chunk,
    deleted_frame,
    end_payload,
    fail_payload,
    is_truncated,
    rewound_frame,
    terminal_frame,
    truncated_frame,
)
from ._sqlite_schema import COLUMNS, SCHEMA, Row

__all__ = ["DEFAULT_POLL_INTERVAL", "DEFAULT_WATCH_INTERVAL", "SQLiteLog"]

#: Seconds a waiting reader sleeps before it looks for a dead writer (and, off asyncio, for changes
#: made by another process). In-process changes wake it at once.
DEFAULT_POLL_INTERVAL: Final = 1.0
#: Seconds between the worker's looks for commits by other connections while readers are parked.
DEFAULT_WATCH_INTERVAL: Final = 0.05
#: Seconds a statement waits for another process's write lock before ``LogError``.
DEFAULT_BUSY_TIMEOUT: Final = 5.0
#: Chunks a reader takes per query: bounds what one reader holds, amortises the thread hop.
READ_PAGE: Final = 512
#: Bytes a reader takes per query at most (at least one chunk): multi-MB chunks come one by one.
READ_PAGE_BYTES: Final = 4 * 1024 * 1024
#: ``rewound`` marker rows kept per stream (readers further behind get a recoverable fail).
MAX_MARKERS: Final = 1024
#: Calls the worker commits in one transaction at most.
MAX_GROUP: Final = 256

#: Tokens of the SQLiteLog instances open in this process (their streams' writer is alive).
_LIVE_TOKENS: set[str] = set()

_T = TypeVar("_T")
_json_encode = msgspec.json.encode
_json_decode = msgspec.json.decode


@final
class _Local:
    """This process's view of one stream: who waits on it, and a change counter."""

    __slots__ = ("changes", "readers", "version", "wake")

    def __init__(self) -> None:
        self.changes = 0  # every committed change
        self.version = 0  # changes that can make a computed page stale (cleanup, reset, delete)
        self.readers = 0
        self.wake: anyio.Event | None = None


@final
class _Hot:
    """The worker's cache of an active stream it appends to (valid while no other connection
    committed)."""

    __slots__ = ("head", "key", "nbytes", "nchunks")

    def __init__(self, key: int, head: int, nchunks: int, nbytes: int) -> None:
        self.key = key
        self.head = head
        self.nchunks = nchunks
        self.nbytes = nbytes


@final
class _Reader:
    __slots__ = ("caught_up", "key", "mark", "pos")

    def __init__(self, key: int, pos: int, mark: int) -> None:
        self.key = key
        self.pos = pos
        self.mark = mark
        self.caught_up = False


@final
class _Job:
    __slots__ = ("args", "error", "fn", "future", "loop", "result", "write")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], write: bool) -> None:
        self.fn = fn
        self.args = args
        self.write = write
        self.result: Any = None
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.future: asyncio.Future[Any] | None = None


def _nothing(conn: sqlite3.Connection) -> None:  # _WATCH's function: the worker never runs it
    return None


#: Put on the worker's queue when the first reader parks: stop blocking, start watching.
_WATCH: Final = _Job(_nothing, (), write=False)


def _settle(jobs: list[_Job]) -> None:
    for job in jobs:
        future = job.future
        if future is None or future.done():
            continue
        if job.error is not None:
            future.set_exception(job.error)
        else:
            future.set_result(job.result)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _owner_alive(pid: int, token: str) -> bool:
    if pid == os.getpid():
        return token in _LIVE_TOKENS
    return _pid_alive(pid)


_WRITER_GONE: Final = {"error": "the stream's writer is gone (its process or log closed)",
                       "recoverable": True, "error_detail": {"code": "WRITER_GONE"}}


@final
class SQLiteLog:
    """A ``StreamLog`` in a SQLite file (WAL mode): durable, shared by the processes of one host.

    Args:
        path: the database file (created when missing).
        max_chunks_per_stream: retained chunks per stream; past it the oldest are trimmed.
        max_bytes_per_stream: retained chunk bytes per stream, trimmed the same way.
        max_chunk_size: the largest chunk ``append`` accepts (``LogLimitError`` past it).
        finished_ttl: seconds a finished stream is kept (0: forever).
        synchronous: ``"NORMAL"`` (survives a process crash) or ``"FULL"`` (also power loss).
        poll_interval: seconds before a waiting reader looks for a dead writer, and off asyncio
            for other processes' changes (``math.inf``: never; in-process changes always wake it
            at once).
        watch_interval: seconds between looks for commits by other connections (other processes,
            other logs on the file) while readers are parked (asyncio).
        busy_timeout: seconds to wait for another process's write lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_chunks_per_stream: int = DEFAULT_MAX_CHUNKS_PER_STREAM,
        max_bytes_per_stream: int = DEFAULT_MAX_BYTES_PER_STREAM,
        max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE,
        finished_ttl: float = DEFAULT_FINISHED_TTL,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        watch_interval: float = DEFAULT_WATCH_INTERVAL,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        check_limits(max_chunks_per_stream, max_bytes_per_stream, max_chunk_size, finished_ttl)
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
        self.synchronous = synchronous
        self.poll_interval = float(poll_interval)
        self.watch_interval = float(watch_interval)
        self.busy_timeout = float(busy_timeout)
        self._token = uuid.uuid4().hex
        self._pid = os.getpid()
        self._conn: sqlite3.Connection | None = None
        self._conn_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._locals: dict[str, _Local] = {}
        self._closed = False
        self._hot: dict[str, _Hot] = {}  # worker-thread only
        self._data_version = -1
        # Parked readers, and their loop: while there are any, the worker watches other
        # connections' commits for them (the worker only reads these).
        self._parked = 0
        self._parked_loop: asyncio.AbstractEventLoop | None = None

    # -- the worker ---------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """Open the file on first use (in the thread that runs SQL): schema, pragmas, and fail
        the active streams whose writer is gone."""
        conn = self._conn
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                                   check_same_thread=False, cached_statements=64)
        except sqlite3.Error as exc:
            raise LogError(f"cannot open the SQLite stream log {self.path}: {exc}") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.executescript(SCHEMA)  # idempotent; executescript commits on its own
            conn.execute("BEGIN IMMEDIATE")
            self._fail_gone_writers(conn)
            self._sweep(conn)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.close()  # the next call tries again (a lock held too long is transient)
            raise LogError(f"cannot open the SQLite stream log {self.path}: {exc}",
                           retryable=True) from exc
        _LIVE_TOKENS.add(self._token)
        self._conn = conn
        return conn

    def _run_group(self, jobs: list[_Job]) -> None:
        """Run calls in one transaction, each in a savepoint; set each one's result or error."""
        try:
            conn = self._connection()
        except StreamwireError as exc:
            for job in jobs:
                job.error = exc
            return
        single = len(jobs) == 1
        try:
            conn.execute("BEGIN IMMEDIATE" if any(job.write for job in jobs) else "BEGIN")
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:  # another connection committed: forget the cache
                self._hot.clear()
                self._data_version = version
            for job in jobs:
                if not single:
                    conn.execute("SAVEPOINT call")
                try:
                    job.result = job.fn(conn, *job.args)
                except Exception as exc:  # the caller gets it; the worker goes on
                    job.error = self._mapped(exc)
                    if not single:
                        conn.execute("ROLLBACK TO call")
                if not single:
                    conn.execute("RELEASE call")
            failed = any(job.error is not None for job in jobs)
            if failed:
                self._hot.clear()  # a rolled-back call may have touched it
            conn.execute("ROLLBACK" if single and failed else "COMMIT")
        except sqlite3.Error as exc:
            self._hot.clear()
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            error = self._mapped(exc)
            for job in jobs:
                job.error = error
                job.result = None

    def _mapped(self, exc: Exception) -> Exception:
        if isinstance(exc, sqlite3.Error):
            error = LogError(f"the SQLite stream log {self.path} failed: {exc}", retryable=True)
            error.__cause__ = exc
            return error
        return exc

    def _worker(self) -> None:
        jobs = self._jobs
        stop = False
        while not stop:
            try:
                first = jobs.get(timeout=self.watch_interval) if self._parked else jobs.get()
            except queue.Empty:
                self._watch()
                continue
            if first is None:
                break
            if first is _WATCH:
                continue
            group = [first]
            while len(group) < MAX_GROUP:
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stop = True
                    break
                if job is not _WATCH:
                    group.append(job)
            self._run_group(group)
            by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
            for job in group:
                if job.loop is not None:
                    by_loop.setdefault(job.loop, []).append(job)
            for loop, settled in by_loop.items():
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                    loop.call_soon_threadsafe(_settle, settled)
        with self._conn_lock:
            self._close_connection()

    def _watch(self) -> None:
        """Worker thread, readers parked: wake them all if another connection committed."""
        loop = self._parked_loop
        conn = self._conn
        if loop is None or conn is None:
            return
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return  # the next call meets the error and reports it
        if version == self._data_version:
            return
        self._hot.clear()  # as in _run_group: the cached heads may be stale
        self._data_version = version
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(self._notify_all)

    def _notify_all(self) -> None:
        for stream_id in list(self._locals):
            self._notify(stream_id)

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        _LIVE_TOKENS.discard(self._token)

    async def _call(self, fn: Callable[..., _T], *args: Any, write: bool = True) -> _T:
        if self._closed:
            raise LogError("the stream log is closed")
        job = _Job(fn, args, write)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): one call at a time through anyio's threads
            if self._limiter is None:
                self._limiter = anyio.CapacityLimiter(1)
            await anyio.to_thread.run_sync(self._run_group, [job], limiter=self._limiter)
        else:
            if self._thread is None:
                self._thread = threading.Thread(target=self._worker, daemon=True,
                                                name=f"streamwire-sqlite:{self.path.name}")
                self._thread.start()
            job.loop = loop
            job.future = loop.create_future()
            self._jobs.put(job)
            return await job.future  # type: ignore[no-any-return]
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[no-any-return]

    # -- SQL helpers (worker thread) -----------------------------------------------------------

    def _fail_gone_writers(self, conn: sqlite3.Connection) -> None:
        owners = conn.execute("SELECT DISTINCT owner_pid, owner_token FROM streams "
                              "WHERE status = 'active'").fetchall()
        for pid, token in owners:
            if not _owner_alive(pid, token):
                self._finish_sql(conn, "failed", _WRITER_GONE,
                                 "owner_pid = ? AND owner_token = ? AND status = 'active'",
                                 (pid, token))

    def _sweep(self, conn: sqlite3.Connection) -> None:
        expired = [key for (key,) in conn.execute(
            "SELECT key FROM streams WHERE expires_at <= ?", (time.time(),))]
        for key in expired:
            self._drop(conn, key)

    def _drop(self, conn: sqlite3.Connection, key: int) -> None:
        conn.execute("DELETE FROM chunks WHERE skey = ?", (key,))
        conn.execute("DELETE FROM markers WHERE skey = ?", (key,))
        conn.execute("DELETE FROM streams WHERE key = ?", (key,))

    def _row(self, conn: sqlite3.Connection, stream_id: str) -> Row:
        found = conn.execute(f"SELECT {COLUMNS} FROM streams WHERE id = ?",
                             (stream_id,)).fetchone()
        if found is None:
            raise StreamNotFoundError(stream_id)
        row = Row(*found)
        if row.expires_at is not None and row.expires_at <= time.time():
            raise StreamNotFoundError(stream_id)  # expired: the next sweep deletes it
        return row

    def _active_row(self, conn: sqlite3.Connection, stream_id: str) -> Row:
        row = self._row(conn, stream_id)
        if row.status != "active":
            raise StreamStateError(f"stream {stream_id!r} is {row.status}, not active: "
                                   "reset_stream or reactivate_stream starts it again")
        return row

    def _floor(self, conn: sqlite3.Connection, row: Row) -> tuple[int, int | None]:
        oldest: int | None = conn.execute("SELECT MIN(seq) FROM chunks WHERE skey = ?",
                                          (row.key,)).fetchone()[0]
        return (row.head if oldest is None else oldest - 1), oldest

    def _info_sql(self, conn: sqlite3.Connection, stream_id: str) -> StreamInfo:
        row = self._row(conn, stream_id)
        floor, oldest = self._floor(conn, row)
        payload: dict[str, Any] = _json_decode(row.payload) if row.payload else {}
        return StreamInfo(stream_id=row.id, status=row.status, head=row.head, floor=floor,
                          oldest_retained_sequence=oldest, truncated_at_step=row.marker,
                          epoch=row.epoch, **payload)

    def _create_sql(self, conn: sqlite3.Connection, stream_id: str) -> StreamInfo:
        self._sweep(conn)
        conn.execute(
            "INSERT INTO streams (id, status, head, run_start, marker, trimmed, trim_floor, "
            "epoch, payload, expires_at, owner_pid, owner_token) "
            "VALUES (?, 'active', 0, 0, NULL, 0, 0, ?, NULL, NULL, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (stream_id, uuid.uuid4().hex[:16], self._pid, self._token))
        return self._info_sql(conn, stream_id)

    def _append_sql(self, conn: sqlite3.Connection, stream_id: str,
                    rows: Sequence[tuple[int, bytes]]) -> int:
        """Append rows; return the sequence of the first."""
        hot = self._hot.get(stream_id)
        if hot is None:
            row = self._active_row(conn, stream_id)
            nchunks, nbytes = conn.execute(
                "SELECT COUNT(*), TOTAL(length(chunk)) FROM chunks WHERE skey = ?",
                (row.key,)).fetchone()
            if row.owner_token != self._token:  # this log is the stream's writer now
                conn.execute("UPDATE streams SET owner_pid = ?, owner_token = ? WHERE key = ?",
                             (self._pid, self._token, row.key))
            hot = _Hot(row.key, row.head, nchunks, int(nbytes))
        first = hot.head + 1
        key = hot.key
        if len(rows) == 1:
            conn.execute("INSERT INTO chunks VALUES (?, ?, ?, ?)",
                         (key, first, rows[0][0], rows[0][1]))
        else:
            conn.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?)",
                             [(key, seq, step, chunk)
                              for seq, (step, chunk) in enumerate(rows, first)])
        hot.head += len(rows)
        hot.nchunks += len(rows)
        hot.nbytes += sum([len(chunk) for _, chunk in rows])
        if hot.nchunks > self.max_chunks_per_stream or hot.nbytes > self.max_bytes_per_stream:
            self._trim(conn, hot)
        self._hot[stream_id] = hot  # only once the call succeeded
        return first

    def _trim(self, conn: sqlite3.Connection, hot: _Hot) -> None:
        """Retention: drop the oldest chunks until both limits hold; the floor moves up."""
        cut = None
        count = size = 0
        for seq, length in conn.execute(
                "SELECT seq, length(chunk) FROM chunks WHERE skey = ? ORDER BY seq", (hot.key,)):
            if (hot.nchunks - count <= self.max_chunks_per_stream
                    and hot.nbytes - size <= self.max_bytes_per_stream):
                break
            cut = seq
            count += 1
            size += length
        if cut is None:
            return
        conn.execute("UPDATE streams SET head = ?, trimmed = 1, trim_floor = ? WHERE key = ?",
                     (hot.head, cut, hot.key))
        conn.execute("DELETE FROM chunks WHERE skey = ? AND seq <= ?", (hot.key, cut))
        hot.nchunks -= count
        hot.nbytes -= size

    def _finish_sql(self, conn: sqlite3.Connection, status: StreamStatus,
                    payload: dict[str, Any], where: str, args: tuple[Any, ...]) -> None:
        expires = time.time() + self.finished_ttl if self.finished_ttl else None
        conn.execute(f"UPDATE streams SET status = ?, payload = ?, expires_at = ? WHERE {where}",
                     (status, _json_encode(payload), expires, *args))

    def _end_sql(self, conn: sqlite3.Connection, stream_id: str, status: StreamStatus,
                 payload: dict[str, Any]) -> None:
        self._hot.pop(stream_id, None)
        row = self._active_row(conn, stream_id)
        self._finish_sql(conn, status, payload, "key = ?", (row.key,))

    def _cleanup_sql(self, conn: sqlite3.Connection, stream_id: str, step: int) -> RewoundFrame:
        self._hot.pop(stream_id, None)
        row = self._row(conn, stream_id)
        removed_min: int | None = conn.execute(
            "SELECT MIN(seq) FROM chunks WHERE skey = ? AND step > ?", (row.key, step)).fetchone()[0]
        conn.execute("UPDATE streams SET marker = ?, head = ? WHERE key = ?",
                     (step, row.head, row.key))
        if removed_min is not None:
            conn.execute("DELETE FROM chunks WHERE skey = ? AND step > ?", (row.key, step))
        frame = rewound_frame(step, row.head, removed_min)
        idx: int = conn.execute("SELECT COALESCE(MAX(idx), 0) + 1 FROM markers WHERE skey = ?",
                                (row.key,)).fetchone()[0]
        conn.execute("INSERT INTO markers VALUES (?, ?, ?, ?, ?)",
                     (row.key, idx, step, row.head, frame.min_sequence))
        conn.execute("DELETE FROM markers WHERE skey = ? AND idx <= ?",
                     (row.key, idx - MAX_MARKERS))
        return frame

    def _reset_sql(self, conn: sqlite3.Connection, stream_id: str) -> None:
        self._hot.pop(stream_id, None)
        row = self._row(conn, stream_id)
        conn.execute(
            "UPDATE streams SET status = 'active', head = ?, run_start = ?, marker = NULL, "
            "trimmed = 0, trim_floor = 0, payload = NULL, expires_at = NULL, owner_pid = ?, "
            "owner_token = ? WHERE key = ?", (row.head, row.head, self._pid, self._token, row.key))
        conn.execute("DELETE FROM chunks WHERE skey = ?", (row.key,))

    def _reactivate_sql(self, conn: sqlite3.Connection, stream_id: str) -> None:
        self._hot.pop(stream_id, None)
        row = self._row(conn, stream_id)
        if row.status == "active":
            raise StreamStateError(f"stream {stream_id!r} is already active")
        conn.execute(
            "UPDATE streams SET status = 'active', marker = NULL, payload = NULL, "
            "expires_at = NULL, owner_pid = ?, owner_token = ? WHERE key = ?",
            (self._pid, self._token, row.key))

    def _delete_sql(self, conn: sqlite3.Connection, stream_id: str) -> None:
        self._hot.pop(stream_id, None)
        self._drop(conn, self._row(conn, stream_id).key)

    def _attach_sql(self, conn: sqlite3.Connection, stream_id: str,
                    cursor: int) -> _Reader | int:
        """A reader at ``cursor``, or the floor when it must get ``truncated``."""
        row = self._row(conn, stream_id)
        check_cursor(cursor, row.head)
        floor, _ = self._floor(conn, row)
        if is_truncated(cursor, run_start=row.run_start, floor=floor, marker=row.marker,
                        trimmed=bool(row.trimmed)):
            return floor
        mark: int = conn.execute("SELECT COALESCE(MAX(idx), 0) FROM markers WHERE skey = ?",
                                 (row.key,)).fetchone()[0]
        return _Reader(row.key, cursor, mark)

    def _poll_sql(self, conn: sqlite3.Connection, stream_id: str, reader: _Reader,
                  check_writer: bool) -> tuple[list[StreamFrame], bool]:
        """The reader's next frames and whether they end it; ``[]`` means: wait."""
        found = conn.execute(f"SELECT {COLUMNS} FROM streams WHERE id = ?",
                             (stream_id,)).fetchone()
        if found is None or found[0] != reader.key:
            return [deleted_frame()], True
        row = Row(*found)
        pos = reader.pos
        if row.trim_floor > pos:  # retention removed a chunk this reader still lacked
            return [truncated_frame(self._floor(conn, row)[0])], True
        marker = conn.execute(
            "SELECT idx, at_step, at_sequence, min_sequence FROM markers "
            "WHERE skey = ? AND idx > ? ORDER BY idx LIMIT 1", (row.key, reader.mark)).fetchone()
        bound = row.head if marker is None else marker[2]
        page: list[StreamFrame] = []
        size = 0
        raw = msgspec.Raw
        for seq, chunk in conn.execute(
                "SELECT seq, chunk FROM chunks WHERE skey = ? AND seq > ? AND seq <= ? "
                "ORDER BY seq LIMIT ?", (row.key, pos, bound, READ_PAGE)):
            page.append(ChunkFrame(seq, raw(chunk)))
            reader.pos = seq
            size += len(chunk)
            if size >= READ_PAGE_BYTES:
                break
        if page:
            return page, False
        if marker is not None:
            idx, at_step, at_sequence, min_sequence = marker
            if idx != reader.mark + 1:
                return [behind_frame()], True  # markers it was owed were pruned
            reader.mark = idx
            reader.pos = max(pos, at_sequence)
            return [RewoundFrame(at_step, at_sequence, min_sequence)], False
        status = row.status
        if status == "active" and check_writer and not _owner_alive(row.owner_pid,
                                                                    row.owner_token):
            self._finish_sql(conn, "failed", _WRITER_GONE, "key = ?", (row.key,))
            status = "failed"
            row.payload = _json_encode(_WRITER_GONE)
        frames: list[StreamFrame] = []
        if not reader.caught_up:
            reader.caught_up = True
            frames.append(CaughtUpFrame(row.head))
        finished = status in FINISHED
        if finished:
            payload: dict[str, Any] = _json_decode(row.payload) if row.payload else {}
            frames.append(terminal_frame(status, **payload))
        return frames, finished

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

    # -- the API -------------------------------------------------------------------------------

    async def create_stream(self, stream_id: str) -> StreamInfo:
        """Create the stream if it does not exist (idempotent); return its info."""
        if type(stream_id) is not str or not stream_id:
            raise UsageError(f"a stream id is a non-empty str, not {stream_id!r}")
        return await self._call(self._create_sql, stream_id)

    async def info(self, stream_id: str) -> StreamInfo:
        """Head, status, marker, floor and the persisted end or fail payload."""
        return await self._call(self._info_sql, stream_id, write=False)

    async def append(self, stream_id: str, step: int, chunk: bytes) -> int:
        """Append one chunk (its JSON text) produced at ``step``; return its sequence."""
        row = (check_step(step), coerce_chunk(chunk, self.max_chunk_size))
        seq = await self._call(self._append_sql, stream_id, (row,))
        self._notify(stream_id)
        return seq

    async def append_many(self, stream_id: str, chunks: Sequence[tuple[int, bytes]]) -> list[int]:
        """Append ``(step, chunk_json)`` pairs atomically (all or none); return their sequences."""
        limit = self.max_chunk_size
        rows = [(check_step(step), coerce_chunk(chunk, limit)) for step, chunk in chunks]
        if not rows:
            await self._call(self._active_row, stream_id, write=False)
            return []
        first = await self._call(self._append_sql, stream_id, rows)
        self._notify(stream_id)
        return list(range(first, first + len(rows)))

    async def end_stream(
        self,
        stream_id: str,
        status: EndStatus = "completed",
        *,
        output: Any = None,
        state: Any = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        """Persist the end status and payload; attached readers get ``EndFrame`` and stop."""
        check_end_status(status)
        await self._call(self._end_sql, stream_id, status, end_payload(output, state, usage))
        self._notify(stream_id)

    async def fail_stream(
        self,
        stream_id: str,
        error: str,
        *,
        error_detail: dict[str, Any] | None = None,
        recoverable: bool = False,
    ) -> None:
        """Persist a failure; attached readers get ``FailFrame`` and stop."""
        payload = fail_payload(error, error_detail, recoverable)
        await self._call(self._end_sql, stream_id, "failed", payload)
        self._notify(stream_id)

    async def cleanup_to_step(self, stream_id: str, step: int) -> RewoundFrame:
        """Remove the chunks of steps after ``step``, set the cleanup marker, and broadcast the
        returned ``RewoundFrame`` to every attached reader (also when nothing was removed)."""
        check_step(step)
        frame = await self._call(self._cleanup_sql, stream_id, step)
        self._notify(stream_id, stale=True)
        return frame

    async def reset_stream(self, stream_id: str) -> None:
        """Start a new run: drop every chunk, clear the marker, status active; the counter goes on."""
        await self._call(self._reset_sql, stream_id)
        self._notify(stream_id, stale=True)

    async def reactivate_stream(self, stream_id: str) -> None:
        """Make a finished stream active again (keeping its chunks) and clear the marker.

        Raises ``StreamStateError`` when the stream is already active.
        """
        await self._call(self._reactivate_sql, stream_id)
        self._notify(stream_id, stale=True)

    async def delete_stream(self, stream_id: str) -> None:
        """Forget the stream; attached readers get a recoverable ``FailFrame``."""
        await self._call(self._delete_sql, stream_id)
        self._notify(stream_id, stale=True)

    async def read(self, stream_id: str, cursor: int = 0) -> AsyncIterator[StreamFrame]:
        """Frames for one reader from ``cursor``: replay, caught-up, live, exactly one terminal.

        Raises (on the first ``__anext__``) ``StreamNotFoundError``, ``UsageError`` for a negative
        cursor and ``StreamStateError`` for a cursor above the head.
        """
        local = self._locals.get(stream_id)
        if local is None:
            local = self._locals[stream_id] = _Local()
        local.readers += 1
        try:
            attached = await self._call(self._attach_sql, stream_id, cursor, write=False)
            if isinstance(attached, int):
                yield truncated_frame(attached)
                return
            reader = attached
            check_writer = False
            while True:
                if self._closed:
                    yield closed_frame()
                    return
                changes, version = local.changes, local.version
                frames, done = await self._call(self._poll_sql, stream_id, reader, check_writer,
                                                write=check_writer)
                check_writer = False
                if frames:
                    for frame in frames:
                        yield frame
                        if local.version != version:
                            # a cleanup, reset or delete happened meanwhile: the rest of this
                            # page may be stale (removed chunks are never delivered after it)
                            if isinstance(frame, ChunkFrame):
                                reader.pos = frame.sequence
                            break
                    else:
                        if done:
                            return
                        continue
                    if done and frame is frames[-1]:
                        return
                    continue
                if local.changes != changes:
                    continue  # a change landed while we looked: look again before sleeping
                wake = local.wake
                if wake is None:
                    wake = local.wake = anyio.Event()
                self._park(+1)
                try:
                    with anyio.move_on_after(self.poll_interval) as scope:
                        await wake.wait()
                finally:
                    self._park(-1)
                check_writer = scope.cancelled_caught
        finally:
            local.readers -= 1
            if not local.readers and self._locals.get(stream_id) is local:
                del self._locals[stream_id]

    def _park(self, delta: int) -> None:
        """Count the parked readers; the first one sets the worker watching. (Off asyncio there is
        no worker: readers look for other processes within ``poll_interval``.)"""
        self._parked += delta
        if delta > 0 and self._parked == 1 and self._thread is not None:
            self._parked_loop = asyncio.get_running_loop()
            self._jobs.put(_WATCH)

    async def aclose(self) -> None:
        """Stop the worker, close the file and end every reader with a recoverable ``FailFrame``."""
        if self._closed:
            return
        self._closed = True
        for stream_id in list(self._locals):
            self._notify(stream_id, stale=True)
        thread = self._thread
        if thread is not None:
            self._jobs.put(None)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.join)
        else:
            with self._conn_lock:
                self._close_connection()

    async def __aenter__(self) -> SQLiteLog:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
