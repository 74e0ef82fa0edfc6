"""The memory backend: ``MemoryLog`` (the default ``StreamLog``, one process) and its record
store, in this process's memory (no connection to set up)."""

from __future__ import annotations

from ._log import MAX_PENDING_MARKERS, MemoryLog

__all__ = ["MAX_PENDING_MARKERS", "MemoryLog"]
