"""``SQLiteRecordStore``: versioned records in the stream log's SQLite file (one table per kind:
``runs`` for ``"run"``), so every process that opens the file answers for every record. Calls run
on the log's worker thread, in its transactions (one connection, one thread for the whole file);
the compare-and-set is one ``UPDATE ... WHERE version = ?``."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, final

from .._records import PAUSED, RUNNING, StoredRecord

__all__ = ["SQLiteRecordStore"]

_T = TypeVar("_T")


class _Call(Protocol):
    """``SQLiteLog._call``: run ``fn(conn, *args)`` on the log's worker, in a transaction."""

    async def __call__(self, fn: Callable[..., _T], *args: Any, write: bool = True) -> _T: ...


@final
class SQLiteRecordStore:
    """A ``RecordStore`` of ``kind`` records in the table ``{kind}s`` of a ``SQLiteLog``'s file."""

    def __init__(self, call: _Call, kind: str) -> None:
        self._call = call
        table = f"{kind}s"  # kind is checked: lowercase letters and '_'
        self._schema = (
            f"CREATE TABLE IF NOT EXISTS {table} (id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "status TEXT NOT NULL, updated_at REAL NOT NULL, body BLOB NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {table}_by_status ON {table} (status)")
        self._insert = (f"INSERT INTO {table} (id, version, status, updated_at, body) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
        self._get = f"SELECT id, status, version, updated_at, body FROM {table} WHERE id = ?"
        self._swap = (f"UPDATE {table} SET version = ?, status = ?, updated_at = ?, body = ? "
                      "WHERE id = ? AND version = ?")
        self._running = f"SELECT id FROM {table} WHERE status = '{RUNNING}'"
        self._expire = (f"DELETE FROM {table} WHERE status NOT IN ('{RUNNING}', '{PAUSED}') "
                        "AND updated_at < ?")
        self._expire_paused = f"DELETE FROM {table} WHERE status = '{PAUSED}' AND updated_at < ?"
        # Until a call committed, the table may not exist, and creating it in a read transaction
        # upgrades that to a write one: SQLite then answers SQLITE_BUSY at once when another
        # process holds the write lock (its busy handler only waits to begin a transaction), so
        # until then every call begins as a write transaction, which waits its turn.
        self._created = False

    def _table(self, conn: sqlite3.Connection) -> None:
        # a no-op once the table exists (no lock taken, about a microsecond each): cheaper than
        # knowing whether the transaction that created it on this connection committed
        for statement in self._schema:
            conn.execute(statement)

    def _read(self, conn: sqlite3.Connection, record_id: str) -> StoredRecord | None:
        self._table(conn)
        row = conn.execute(self._get, (record_id,)).fetchone()
        return None if row is None else StoredRecord(str(row[0]), str(row[1]), int(row[2]),
                                                     float(row[3]), bytes(row[4]))

    def _write_new(self, conn: sqlite3.Connection, r: StoredRecord) -> StoredRecord | None:
        self._table(conn)
        cur = conn.execute(self._insert, (r.id, r.version, r.status, r.updated_at, r.body))
        return None if cur.rowcount == 1 else self._read(conn, r.id)

    def _write_swap(self, conn: sqlite3.Connection, r: StoredRecord) -> bool:
        self._table(conn)
        cur = conn.execute(self._swap, (r.version, r.status, r.updated_at, r.body, r.id,
                                        r.version - 1))
        return cur.rowcount == 1

    def _list_running(self, conn: sqlite3.Connection) -> list[str]:
        self._table(conn)
        return [str(row[0]) for row in conn.execute(self._running).fetchall()]

    def _delete_old(self, conn: sqlite3.Connection, before: float,
                    paused_before: float | None) -> int:
        self._table(conn)
        count = conn.execute(self._expire, (before,)).rowcount
        if paused_before is not None:
            count += conn.execute(self._expire_paused, (paused_before,)).rowcount
        return count

    async def _run(self, fn: Callable[..., _T], *args: Any, write: bool = True) -> _T:
        result = await self._call(fn, *args, write=write or not self._created)
        self._created = True
        return result

    async def insert(self, record: StoredRecord) -> StoredRecord | None:
        return await self._run(self._write_new, record)

    async def get(self, record_id: str) -> StoredRecord | None:
        return await self._run(self._read, record_id, write=False)

    async def swap(self, record: StoredRecord) -> bool:
        return await self._run(self._write_swap, record)

    async def running(self) -> list[str]:
        return await self._run(self._list_running, write=False)

    async def expire(self, before: float, *, paused_before: float | None = None) -> int:
        return await self._run(self._delete_old, before, paused_before)

    async def aclose(self) -> None:
        return None  # the worker and its connection are the log's: SQLiteLog.aclose closes them
