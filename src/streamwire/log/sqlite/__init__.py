"""The SQLite backend: ``SQLiteLog`` (streams in one file, shared by the processes of one host)
and its record store, in the same file, on the log's one worker thread."""

from __future__ import annotations

from ._log import DEFAULT_BUSY_TIMEOUT, DEFAULT_POLL_INTERVAL, DEFAULT_WATCH_INTERVAL, SQLiteLog

__all__ = ["DEFAULT_BUSY_TIMEOUT", "DEFAULT_POLL_INTERVAL", "DEFAULT_WATCH_INTERVAL", "SQLiteLog"]
