"""``MemoryRecordStore``: versioned records in a dict beside a ``MemoryLog`` (one process). Every
method is an ``async def`` with no ``await`` inside, so on one event loop each one is atomic."""

from __future__ import annotations

import math
from typing import final

from .._records import PAUSED, RUNNING, StoredRecord

__all__ = ["MemoryRecordStore"]


@final
class MemoryRecordStore:
    """A ``RecordStore`` in this process's memory."""

    def __init__(self) -> None:
        self._records: dict[str, StoredRecord] = {}

    async def insert(self, record: StoredRecord) -> StoredRecord | None:
        stored = self._records.get(record.id)
        if stored is None:
            self._records[record.id] = record
        return stored

    async def get(self, record_id: str) -> StoredRecord | None:
        return self._records.get(record_id)

    async def swap(self, record: StoredRecord) -> bool:
        stored = self._records.get(record.id)
        if stored is None or stored.version != record.version - 1:
            return False
        self._records[record.id] = record
        return True

    async def running(self) -> list[str]:
        return [r.id for r in self._records.values() if r.status == RUNNING]

    async def expire(self, before: float, *, paused_before: float | None = None) -> int:
        old = [k for k, r in self._records.items() if r.status != RUNNING and r.updated_at < (
            before if r.status != PAUSED else -math.inf if paused_before is None
            else paused_before)]
        for key in old:
            del self._records[key]
        return len(old)

    async def aclose(self) -> None:
        return None
