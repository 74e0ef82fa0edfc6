"""The SQL of ``SQLiteLog``: one method per call, each run by the worker thread inside its
transaction (``conn`` is the worker's connection), and the ``ReadView`` a reader's step reads.

Sequences are allocated inside the write transaction, so they stay gap-free also with several
processes writing one file. An append is ONE ``INSERT`` (the head is MAX(sequence), and
``streams.head`` is written only before chunks are deleted); the statements cache each active
stream's head, key and retained size (``forget`` drops the cache whenever another connection
committed, or a call was rolled back).
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Sequence
from typing import Any, Final, final

import msgspec

from ...errors import StreamNotFoundError, StreamStateError
from ...frames import ChunkFrame, RewoundFrame, TerminalFrame, TruncatedFrame
from .. import Producer, StreamInfo, StreamStatus
from .._common import WRITER_GONE, rewound_frame, terminal_frame, ttl_for
from .._producers import ProducerState, admit, record
from .._reader import ReaderState, Step, attach, next_frames, settled
from ._schema import COLUMNS, Row

__all__ = ["MAX_MARKERS", "READ_PAGE", "READ_PAGE_BYTES", "SQLReader", "Statements"]

#: Chunks a reader takes per query: bounds what one reader holds, amortises the thread hop.
READ_PAGE: Final = 512
#: Bytes a reader takes per query at most (at least one chunk): multi-MB chunks come one by one.
READ_PAGE_BYTES: Final = 4 * 1024 * 1024
#: ``rewound`` marker rows kept per stream (readers further behind get a recoverable fail).
MAX_MARKERS: Final = 1024
#: An append renews the lease in the file when less than this share of writer_timeout is left.
_RENEW_WHEN_LEFT: Final = 2 / 3

_json_encode = msgspec.json.encode
_json_decode = msgspec.json.decode
_GONE_JSON: Final = _json_encode(WRITER_GONE)


@final
class _Hot:
    """The cache of an active stream this log appends to (valid while no other connection
    committed)."""

    __slots__ = ("head", "key", "lease_until", "nbytes", "nchunks")

    def __init__(self, key: int, head: int, nchunks: int, nbytes: int,
                 lease_until: float) -> None:
        self.key = key
        self.lease_until = lease_until
        self.head = head
        self.nchunks = nchunks
        self.nbytes = nbytes


@final
class SQLReader:
    """One reader: the stream row it attached to (a recreated stream has another key)."""

    __slots__ = ("key", "state")

    def __init__(self, key: int, state: ReaderState) -> None:
        self.key = key
        self.state = state


@final
class _View:
    """A ``ReadView`` of one stream inside the worker's transaction (queries run on demand)."""

    __slots__ = ("_conn", "_marker", "_row", "deleted", "epoch", "head", "lost_above",
                 "run_start", "status", "trimmed", "truncated_at_step")

    def __init__(self, conn: sqlite3.Connection, row: Row | None) -> None:
        self._conn = conn
        self.deleted = row is None
        if row is None:
            row = Row(0, "", "failed", 0, 0, None, 0, 0, "", None, None, 0, "", None)
        self._row = row
        self.epoch = row.epoch
        self.status: StreamStatus = row.status
        self.head = row.head
        self.run_start = row.run_start
        self.truncated_at_step = row.marker
        self.trimmed = bool(row.trimmed)
        self.lost_above = row.trim_floor

    @property
    def marks(self) -> int:
        mark: int = self._conn.execute("SELECT COALESCE(MAX(idx), 0) FROM markers WHERE skey = ?",
                                       (self._row.key,)).fetchone()[0]
        return mark

    def floor(self) -> int:
        oldest: int | None = self._conn.execute("SELECT MIN(seq) FROM chunks WHERE skey = ?",
                                                (self._row.key,)).fetchone()[0]
        return self.head if oldest is None else oldest - 1

    def next_marker(self, mark: int) -> tuple[int, RewoundFrame] | None:
        found = self._conn.execute(
            "SELECT idx, at_step, at_sequence, min_sequence FROM markers "
            "WHERE skey = ? AND idx > ? ORDER BY idx LIMIT 1", (self._row.key, mark)).fetchone()
        if found is None:
            return None
        idx, at_step, at_sequence, min_sequence = found
        return idx, RewoundFrame(at_step, at_sequence, min_sequence)

    def chunks(self, after: int, upto: int) -> list[ChunkFrame]:
        page: list[ChunkFrame] = []
        size = 0
        raw = msgspec.Raw
        for seq, chunk in self._conn.execute(
                "SELECT seq, chunk FROM chunks WHERE skey = ? AND seq > ? AND seq <= ? "
                "ORDER BY seq LIMIT ?", (self._row.key, after, upto, READ_PAGE)):
            page.append(ChunkFrame(seq, raw(chunk)))
            size += len(chunk)
            if size >= READ_PAGE_BYTES:
                break
        return page

    def terminal(self) -> TerminalFrame:
        raw = self._row.payload
        payload: dict[str, Any] = _json_decode(raw) if raw else {}
        return terminal_frame(self.status, **payload)


@final
class Statements:
    """Every call of ``SQLiteLog`` as SQL; ``pid`` and ``token`` name this log as a writer."""

    def __init__(self, *, max_chunks_per_stream: int, max_bytes_per_stream: int,
                 finished_ttl: float, paused_ttl: float, writer_timeout: float,
                 token: str) -> None:
        self.writer_timeout = writer_timeout
        self.max_chunks_per_stream = max_chunks_per_stream
        self.max_bytes_per_stream = max_bytes_per_stream
        self.finished_ttl = finished_ttl
        self.paused_ttl = paused_ttl
        self.token = token
        self.pid = os.getpid()
        self._hot: dict[str, _Hot] = {}

    def forget(self) -> None:
        """Drop the cached heads (another connection committed, or a call was rolled back)."""
        self._hot.clear()

    def on_open(self, conn: sqlite3.Connection) -> None:
        """First thing in a fresh connection's first transaction: fail the active streams whose
        writer's lease lapsed (streams of a file from before leases get one now) and drop the
        expired ones."""
        now = time.time()
        conn.execute("UPDATE streams SET lease_until = ? WHERE lease_until IS NULL",
                     (now + self.writer_timeout,))
        self._finish(conn, "failed", WRITER_GONE, "status = 'active' AND lease_until <= ?",
                     (now,))
        self._sweep(conn)

    def _settle(self, conn: sqlite3.Connection, row: Row, write: bool) -> Row:
        """Apply the lease rule to ``row``: an active stream whose lease lapsed fails (recoverable,
        WRITER_GONE): written now when ``write`` (a write transaction), else only reported so (the
        next write call or a parked reader's look writes it)."""
        if row.status == "active" and row.lease_until is not None and (
                row.lease_until <= time.time()):
            if write:
                self._hot.pop(row.id, None)
                self._finish(conn, "failed", WRITER_GONE, "key = ?", (row.key,))
            row.status = "failed"
            row.payload = _GONE_JSON
        return row

    def _lease(self, conn: sqlite3.Connection, key: int) -> float:
        """Renew the writer's lease of stream ``key``; return when it lapses now."""
        until = time.time() + self.writer_timeout
        conn.execute("UPDATE streams SET lease_until = ? WHERE key = ?", (until, key))
        return until

    # -- helpers ------------------------------------------------------------------------------

    def _sweep(self, conn: sqlite3.Connection) -> None:
        expired = [key for (key,) in conn.execute(
            "SELECT key FROM streams WHERE expires_at <= ?", (time.time(),))]
        for key in expired:
            self._drop(conn, key)

    def _drop(self, conn: sqlite3.Connection, key: int) -> None:
        conn.execute("DELETE FROM chunks WHERE skey = ?", (key,))
        conn.execute("DELETE FROM markers WHERE skey = ?", (key,))
        conn.execute("DELETE FROM producers WHERE skey = ?", (key,))
        conn.execute("DELETE FROM streams WHERE key = ?", (key,))

    def row(self, conn: sqlite3.Connection, stream_id: str, *, write: bool = True) -> Row:
        """The stream's row, the lease rule applied (``write``: in a write transaction)."""
        found = conn.execute(f"SELECT {COLUMNS} FROM streams WHERE id = ?",
                             (stream_id,)).fetchone()
        if found is None:
            raise StreamNotFoundError(stream_id)
        row = Row(*found)
        if row.expires_at is not None and row.expires_at <= time.time():
            raise StreamNotFoundError(stream_id)  # expired: the next sweep deletes it
        return self._settle(conn, row, write)

    def active_row(self, conn: sqlite3.Connection, stream_id: str) -> Row:
        row = self.row(conn, stream_id)
        if row.status != "active":
            raise StreamStateError(f"stream {stream_id!r} is {row.status}, not active: "
                                   "reset_stream or reactivate_stream starts it again")
        return row

    def _finish(self, conn: sqlite3.Connection, status: StreamStatus,
                payload: dict[str, Any], where: str, args: tuple[Any, ...]) -> None:
        ttl = ttl_for(status, self.finished_ttl, self.paused_ttl)
        expires = time.time() + ttl if ttl else None  # 0 keeps it
        conn.execute(f"UPDATE streams SET status = ?, payload = ?, expires_at = ? WHERE {where}",
                     (status, _json_encode(payload), expires, *args))

    # -- the calls ----------------------------------------------------------------------------

    def info(self, conn: sqlite3.Connection, stream_id: str, write: bool = False) -> StreamInfo:
        return self._info(conn, self.row(conn, stream_id, write=write))

    def list_streams(self, conn: sqlite3.Connection, after: str, limit: int) -> list[StreamInfo]:
        """Up to ``limit`` unexpired streams with an id above ``after``, in id order (the
        UNIQUE index on ``id`` serves the range and the order)."""
        found = conn.execute(
            f"SELECT {COLUMNS} FROM streams WHERE id > ? AND (expires_at IS NULL OR "
            "expires_at > ?) ORDER BY id LIMIT ?", (after, time.time(), limit)).fetchall()
        return [self._info(conn, self._settle(conn, Row(*row), False)) for row in found]

    def _info(self, conn: sqlite3.Connection, row: Row) -> StreamInfo:
        oldest: int | None = conn.execute("SELECT MIN(seq) FROM chunks WHERE skey = ?",
                                          (row.key,)).fetchone()[0]
        floor = row.head if oldest is None else oldest - 1
        payload: dict[str, Any] = _json_decode(row.payload) if row.payload else {}
        return StreamInfo(stream_id=row.id, status=row.status, head=row.head, floor=floor,
                          oldest_retained_sequence=oldest, truncated_at_step=row.marker,
                          epoch=row.epoch, **payload)

    def create(self, conn: sqlite3.Connection, stream_id: str) -> StreamInfo:
        self._sweep(conn)
        conn.execute(
            "INSERT INTO streams (id, status, head, run_start, marker, trimmed, trim_floor, "
            "epoch, payload, expires_at, owner_pid, owner_token, lease_until) "
            "VALUES (?, 'active', 0, 0, NULL, 0, 0, ?, NULL, NULL, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (stream_id, uuid.uuid4().hex[:16], self.pid, self.token,
             time.time() + self.writer_timeout))
        return self.info(conn, stream_id, write=True)

    def _admit(self, conn: sqlite3.Connection, stream_id: str,
               producer: Producer) -> tuple[tuple[int, int] | None, int, ProducerState | None]:
        """The shared producer rule in this transaction: (the repeated call's result or None,
        the stream key, the producer's state)."""
        key = self.row(conn, stream_id).key
        found = conn.execute("SELECT state FROM producers WHERE skey = ? AND pid = ?",
                             (key, producer.id)).fetchone()
        state = None if found is None else ProducerState.parse(found[0])
        return admit(state, producer), key, state

    def _record(self, conn: sqlite3.Connection, key: int, state: ProducerState | None,
                producer: Producer, first: int, count: int) -> None:
        conn.execute("INSERT OR REPLACE INTO producers VALUES (?, ?, ?)",
                     (key, producer.id, record(state, producer, first, count).text()))

    def append(self, conn: sqlite3.Connection, stream_id: str, rows: Sequence[tuple[int, bytes]],
               producer: Producer | None = None) -> tuple[int, int]:
        """Append rows; return the sequence of the first and how many (a repeated producer
        request: the original's, nothing stored)."""
        if producer is not None:
            repeat, key, state = self._admit(conn, stream_id, producer)
            if repeat is not None:
                return repeat
            first = self._append(conn, stream_id, rows) if rows else (
                self.active_row(conn, stream_id).head + 1)
            self._record(conn, key, state, producer, first, len(rows))
            return first, len(rows)
        return self._append(conn, stream_id, rows), len(rows)

    def _append(self, conn: sqlite3.Connection, stream_id: str,
                rows: Sequence[tuple[int, bytes]]) -> int:
        hot = self._hot.get(stream_id)
        now = time.time()
        if hot is not None and hot.lease_until <= now:
            del self._hot[stream_id]  # lapsed: the row says so (and the call fails)
            hot = None
        if hot is None:
            row = self.active_row(conn, stream_id)
            nchunks, nbytes = conn.execute(
                "SELECT COUNT(*), TOTAL(length(chunk)) FROM chunks WHERE skey = ?",
                (row.key,)).fetchone()
            hot = _Hot(row.key, row.head, nchunks, int(nbytes), row.lease_until or 0.0)
        if hot.lease_until - now < self.writer_timeout * _RENEW_WHEN_LEFT:
            # renewed by appends, written at most every third of writer_timeout
            hot.lease_until = self._lease(conn, hot.key)
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

    def end(self, conn: sqlite3.Connection, stream_id: str, status: StreamStatus,
            payload: dict[str, Any], producer: Producer | None = None) -> None:
        admitted = None if producer is None else self._admit(conn, stream_id, producer)
        if admitted is not None and admitted[0] is not None:
            return  # a repeat: already applied
        self._hot.pop(stream_id, None)
        row = self.active_row(conn, stream_id)
        self._finish(conn, status, payload, "key = ?", (row.key,))
        if producer is not None and admitted is not None:
            self._record(conn, row.key, admitted[2], producer, row.head + 1, 0)

    def cleanup(self, conn: sqlite3.Connection, stream_id: str, step: int) -> RewoundFrame:
        self._hot.pop(stream_id, None)
        row = self.row(conn, stream_id)
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

    def keepalive(self, conn: sqlite3.Connection, stream_id: str) -> None:
        hot = self._hot.pop(stream_id, None)
        key = hot.key if hot is not None and hot.lease_until > time.time() else (
            self.active_row(conn, stream_id).key)
        until = self._lease(conn, key)
        if hot is not None:
            hot.lease_until = until
            self._hot[stream_id] = hot

    def reset(self, conn: sqlite3.Connection, stream_id: str) -> None:
        self._hot.pop(stream_id, None)
        row = self.row(conn, stream_id)
        conn.execute(
            "UPDATE streams SET status = 'active', head = ?, run_start = ?, marker = NULL, "
            "trimmed = 0, trim_floor = 0, payload = NULL, expires_at = NULL, owner_pid = ?, "
            "owner_token = ?, lease_until = ? WHERE key = ?",
            (row.head, row.head, self.pid, self.token, time.time() + self.writer_timeout,
             row.key))
        conn.execute("DELETE FROM chunks WHERE skey = ?", (row.key,))

    def reactivate(self, conn: sqlite3.Connection, stream_id: str) -> None:
        self._hot.pop(stream_id, None)
        row = self.row(conn, stream_id)
        if row.status == "active":
            raise StreamStateError(f"stream {stream_id!r} is already active")
        conn.execute(
            "UPDATE streams SET status = 'active', marker = NULL, payload = NULL, "
            "expires_at = NULL, owner_pid = ?, owner_token = ?, lease_until = ? WHERE key = ?",
            (self.pid, self.token, time.time() + self.writer_timeout, row.key))

    def delete(self, conn: sqlite3.Connection, stream_id: str) -> None:
        self._hot.pop(stream_id, None)
        self._drop(conn, self.row(conn, stream_id).key)

    def attach(self, conn: sqlite3.Connection, stream_id: str,
               cursor: int) -> SQLReader | TruncatedFrame:
        """A reader at ``cursor``, or the ``truncated`` frame it gets instead."""
        row = self.row(conn, stream_id, write=False)
        attached = attach(_View(conn, row), cursor)
        return attached if isinstance(attached, TruncatedFrame) else SQLReader(row.key, attached)

    def poll(self, conn: sqlite3.Connection, stream_id: str, reader: SQLReader,
             write: bool) -> tuple[Step, float | None, bool]:
        """The reader's next step, when the writer's lease lapses (None: not active), and whether
        the reader is settled after the step (``_reader.settled``: the next poll would give
        nothing unless the stream changes). ``write``: a write transaction, where a lapsed lease
        is written down."""
        found = conn.execute(f"SELECT {COLUMNS} FROM streams WHERE id = ?",
                             (stream_id,)).fetchone()
        row = None if found is None or found[0] != reader.key else self._settle(
            conn, Row(*found), write)
        lease = row.lease_until if row is not None and row.status == "active" else None
        view = _View(conn, row)
        step = next_frames(reader.state, view)
        return step, lease, step is not None and not step[1] and settled(reader.state, view)
