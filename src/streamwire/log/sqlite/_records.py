"""``SQLiteRunStore``: run records in the stream log's SQLite file (table ``runs``), so every
process that opens the file answers for every run. Calls run in a worker thread, one at a time
per store; the compare-and-set is one ``UPDATE ... WHERE version = ?``."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import anyio.to_thread

from ..errors import LogError
from ._record import RunRecord, decode_record, encode_record

__all__ = ["SQLiteRunStore"]

T = TypeVar("T")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    updated_at REAL NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status);
"""
#: Seconds to wait for another process's write lock (the log's writers share the file).
_BUSY_TIMEOUT: Final = 10.0


class SQLiteRunStore:
    """A ``RunStore`` in the SQLite file at ``path`` (WAL, as the log opens it)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            with self._lock:
                if self._closed:
                    raise LogError("the SQLite run store is closed")
                try:
                    return fn(self._connection())
                except sqlite3.Error as exc:
                    raise LogError(f"the SQLite run store {self.path} failed: {exc}",
                                   retryable=True) from exc

        return await anyio.to_thread.run_sync(run)

    async def insert(self, record: RunRecord) -> RunRecord | None:
        def insert(conn: sqlite3.Connection) -> RunRecord | None:
            cur = conn.execute(
                "INSERT INTO runs (id, version, status, updated_at, body) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (record.run_id, record.version, record.status, record.updated_at,
                 encode_record(record)))
            if cur.rowcount == 1:
                return None
            return _get(conn, record.run_id)

        return await self._call(insert)

    async def get(self, run_id: str) -> RunRecord | None:
        return await self._call(lambda conn: _get(conn, run_id))

    async def swap(self, record: RunRecord) -> bool:
        def swap(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE runs SET version = ?, status = ?, updated_at = ?, body = ? "
                "WHERE id = ? AND version = ?",
                (record.version, record.status, record.updated_at, encode_record(record),
                 record.run_id, record.version - 1))
            return cur.rowcount == 1

        return await self._call(swap)

    async def running(self) -> list[str]:
        def running(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT id FROM runs WHERE status = 'running'").fetchall()
            return [str(row[0]) for row in rows]

        return await self._call(running)

    async def expire(self, before: float) -> int:
        def expire(conn: sqlite3.Connection) -> int:
            cur = conn.execute("DELETE FROM runs WHERE status != 'running' AND updated_at < ?",
                               (before,))
            return cur.rowcount

        return await self._call(expire)

    async def aclose(self) -> None:
        def close() -> None:
            with self._lock:
                self._closed = True
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await anyio.to_thread.run_sync(close)


def _get(conn: sqlite3.Connection, run_id: str) -> RunRecord | None:
    row = conn.execute("SELECT body FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else decode_record(row[0])
