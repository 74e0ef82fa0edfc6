"""The on-disk format of ``SQLiteLog``: the tables, and the row shape ``SELECT {COLUMNS}`` reads a
stream into (``Row`` is array-like, so its fields follow ``COLUMNS`` in order)."""

from __future__ import annotations

from typing import Final

import msgspec

from .. import StreamStatus

__all__ = ["ADDED_COLUMNS", "COLUMNS", "SCHEMA", "Row"]

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS streams (
    key INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    head INTEGER NOT NULL,
    run_start INTEGER NOT NULL,
    marker INTEGER,
    trimmed INTEGER NOT NULL,
    trim_floor INTEGER NOT NULL,
    epoch TEXT NOT NULL,
    payload BLOB,
    expires_at REAL,
    owner_pid INTEGER NOT NULL,
    owner_token TEXT NOT NULL,
    lease_until REAL
);
CREATE TABLE IF NOT EXISTS chunks (
    skey INTEGER NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL, chunk BLOB NOT NULL,
    PRIMARY KEY (skey, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS markers (
    skey INTEGER NOT NULL, idx INTEGER NOT NULL, at_step INTEGER NOT NULL,
    at_sequence INTEGER NOT NULL, min_sequence INTEGER,
    PRIMARY KEY (skey, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS producers (
    skey INTEGER NOT NULL, pid TEXT NOT NULL, state TEXT NOT NULL,
    PRIMARY KEY (skey, pid)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS streams_expiry ON streams (expires_at) WHERE expires_at IS NOT NULL;
"""

#: ``head`` is the counter: MAX(sequence), or the stored head when chunks were deleted.
COLUMNS: Final = (
    "key, id, status, "
    "MAX(head, COALESCE((SELECT MAX(seq) FROM chunks WHERE skey = streams.key), 0)), "
    "run_start, marker, trimmed, trim_floor, epoch, payload, expires_at, owner_pid, owner_token, "
    "lease_until")

#: Columns added after the first release, with their type: a file made before gets them on open.
ADDED_COLUMNS: Final = (("lease_until", "REAL"),)


class Row(msgspec.Struct, array_like=True, gc=False):
    key: int
    id: str
    status: StreamStatus
    head: int
    run_start: int
    marker: int | None
    trimmed: int
    trim_floor: int
    epoch: str
    payload: bytes | None
    expires_at: float | None
    owner_pid: int  # the process and log that created or restarted the stream (informational)
    owner_token: str
    lease_until: float | None  # time.time() when the writer's lease lapses
