"""The worker of ``SQLiteLog``: one thread owns the connection and runs every SQL call.

``sqlite3`` calls block (a checkpoint fsyncs), so they never run on the event loop, and one owner
means no connection sharing across threads. Calls queue up while a transaction runs and the worker
commits the whole queue in ONE transaction (group commit; each call in its own ``SAVEPOINT``, so
one call's error undoes only that call). A hop to a dedicated thread costs about half of
``anyio.to_thread.run_sync`` (measured in ``bench/bench_log.py``). Off asyncio (trio), calls go
through ``anyio.to_thread.run_sync`` one at a time instead, each its own transaction.

While readers are parked (asyncio), the worker asks ``PRAGMA data_version`` every
``watch_interval`` and calls ``on_foreign_commit`` on the readers' loop when another connection
(another process, another log on the file) committed: one cheap query per log, however many readers.
Every transaction asks it too (a moved version empties the statement cache), and one that finds it
moved calls ``on_foreign_commit`` as well: it has consumed the change, so the next watch would see
nothing new and a reader parked here would sleep through another process's write (an ``end``
written by the process running a run, while this one polls the run's record for its stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar, final

import anyio

from ...errors import LogError, StreamwireError
from ._schema import ADDED_COLUMNS, SCHEMA
from ._sql import Statements

__all__ = ["MAX_GROUP", "Worker"]

#: Calls the worker commits in one transaction at most.
MAX_GROUP: Final = 256

_T = TypeVar("_T")


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


@final
class Worker:
    """Runs ``Statements`` calls on the file at ``path`` (see the module docstring)."""

    def __init__(self, path: Path, statements: Statements, *, synchronous: str,
                 busy_timeout: float, watch_interval: float,
                 on_foreign_commit: Callable[[], None]) -> None:
        self.path = path
        self._statements = statements
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._watch_interval = watch_interval
        self._on_foreign_commit = on_foreign_commit
        self._conn: sqlite3.Connection | None = None
        self._conn_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._data_version = -1
        self._foreign = False  # a transaction saw another connection's commit (worker thread)
        # Parked readers, and their loop: while there are any, the worker watches other
        # connections' commits for them (the worker thread only reads these).
        self._parked = 0
        self._parked_loop: asyncio.AbstractEventLoop | None = None

    # -- the connection (worker thread) ---------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """Open the file on first use (in the thread that runs SQL): schema, pragmas, and
        ``Statements.on_open``."""
        conn = self._conn
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                                   check_same_thread=False, cached_statements=64)
        except sqlite3.Error as exc:
            raise LogError(f"cannot open the SQLite stream log {self.path}: {exc}") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.executescript(SCHEMA)  # idempotent; executescript commits on its own
            have = {info[1] for info in conn.execute("PRAGMA table_info(streams)")}
            for name, kind in ADDED_COLUMNS:
                if name not in have:  # a file from an earlier release
                    conn.execute(f"ALTER TABLE streams ADD COLUMN {name} {kind}")
            conn.execute("BEGIN IMMEDIATE")
            self._statements.on_open(conn)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.close()  # the next call tries again (a lock held too long is transient)
            raise LogError(f"cannot open the SQLite stream log {self.path}: {exc}",
                           retryable=True) from exc
        self._conn = conn
        return conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run_group(self, jobs: list[_Job]) -> None:
        """Run calls in one transaction, each in a savepoint; set each one's result or error."""
        try:
            conn = self._connection()
        except StreamwireError as exc:
            for job in jobs:
                job.error = exc
            return
        single = len(jobs) == 1
        statements = self._statements
        try:
            conn.execute("BEGIN IMMEDIATE" if any(job.write for job in jobs) else "BEGIN")
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:  # another connection committed: forget the cache
                statements.forget()
                self._foreign = self._data_version != -1  # and wake the readers (see _run)
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
                statements.forget()  # a rolled-back call may have touched the cache
            conn.execute("ROLLBACK" if single and failed else "COMMIT")
        except sqlite3.Error as exc:
            statements.forget()
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            error = self._mapped(exc)
            for job in jobs:
                job.error = error
                job.result = None

    def _mapped(self, exc: Exception) -> Exception:
        if isinstance(exc, sqlite3.Error):
            name = getattr(exc, "sqlite_errorname", None)  # which of the BUSY cases, say
            error = LogError(f"the SQLite stream log {self.path} failed: {exc}"
                             f"{f' ({name})' if name else ''}", retryable=True)
            error.__cause__ = exc
            return error
        return exc

    def _run(self) -> None:
        jobs = self._jobs
        stop = False
        while not stop:
            try:
                first = jobs.get(timeout=self._watch_interval) if self._parked else jobs.get()
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
            if self._foreign:
                # after the results: a reader that polled before the commit and parks only now
                # still sees its change counter move (it snapshots it before each poll)
                self._foreign = False
                loops = set(by_loop)
                if self._parked_loop is not None:
                    loops.add(self._parked_loop)
                for loop in loops:
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(self._on_foreign_commit)
        with self._conn_lock:
            self._close_connection()

    def _watch(self) -> None:
        """Worker thread, readers parked: tell them if another connection committed."""
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
        self._statements.forget()  # as in _run_group: the cached heads may be stale
        self._data_version = version
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(self._on_foreign_commit)

    # -- the event loop's side --------------------------------------------------------------------

    async def call(self, fn: Callable[..., _T], *args: Any, write: bool = True) -> _T:
        """Run ``fn(conn, *args)`` in a transaction on the worker; its result or its error."""
        job = _Job(fn, args, write)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): one call at a time through anyio's threads
            if self._limiter is None:
                self._limiter = anyio.CapacityLimiter(1)
            await anyio.to_thread.run_sync(self._run_group, [job], limiter=self._limiter)
        else:
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name=f"streamwire-sqlite:{self.path.name}")
                self.thread.start()
            job.loop = loop
            job.future = loop.create_future()
            self._jobs.put(job)
            return await job.future  # type: ignore[no-any-return]
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[no-any-return]

    def park(self, delta: int) -> None:
        """Count the parked readers; the first one sets the worker watching. (Off asyncio there is
        no worker: readers look for other processes within the log's ``poll_interval``.)"""
        self._parked += delta
        if delta > 0 and self._parked == 1 and self.thread is not None:
            self._parked_loop = asyncio.get_running_loop()
            self._jobs.put(_WATCH)

    async def aclose(self) -> None:
        """Stop the thread and close the connection."""
        thread = self.thread
        if thread is not None:
            self._jobs.put(None)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.join)
        else:
            with self._conn_lock:
                self._close_connection()
