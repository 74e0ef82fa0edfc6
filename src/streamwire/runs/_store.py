"""Where run records live: one ``RunStore`` protocol of four storage primitives, and the store
that sits beside each stream log (same memory, same SQLite file, same Redis server and prefix).

The primitives only store: ``insert`` if absent, ``get``, ``swap`` (compare-and-set on the
record's ``version``) and ``running`` (the ids to sweep). Every rule (transitions, exactly-once,
leases) is in ``streamwire.runs._record`` and ``streamwire.runs._service``, written once.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..errors import UsageError
from ..log import StreamLog
from ._record import RunRecord

__all__ = ["MemoryRunStore", "RunStore", "store_for"]


@runtime_checkable
class RunStore(Protocol):
    """Storage of run records. Backend failures raise ``LogError`` (retryable when nothing was
    changed)."""

    async def insert(self, record: RunRecord) -> RunRecord | None:
        """Store ``record`` if no run has its id (atomically); else return the stored one."""
        ...

    async def get(self, run_id: str) -> RunRecord | None:
        """The stored record, or None."""
        ...

    async def swap(self, record: RunRecord) -> bool:
        """Replace the stored record whose version is ``record.version - 1`` by ``record``;
        False (and nothing changed) when the stored version differs."""
        ...

    async def running(self) -> list[str]:
        """The ids of the runs stored as ``running`` (for the lease sweeper)."""
        ...

    async def expire(self, before: float) -> int:
        """Delete the records not ``running`` last changed before ``before`` (epoch seconds);
        returns how many."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class MemoryRunStore:
    """Records in a dict, beside a ``MemoryLog`` (one process)."""

    def __init__(self) -> None:
        self._records: dict[str, RunRecord] = {}

    async def insert(self, record: RunRecord) -> RunRecord | None:
        stored = self._records.get(record.run_id)
        if stored is None:
            self._records[record.run_id] = record
        return stored

    async def get(self, run_id: str) -> RunRecord | None:
        return self._records.get(run_id)

    async def swap(self, record: RunRecord) -> bool:
        stored = self._records.get(record.run_id)
        if stored is None or stored.version != record.version - 1:
            return False
        self._records[record.run_id] = record
        return True

    async def running(self) -> list[str]:
        return [r.run_id for r in self._records.values() if r.status == "running"]

    async def expire(self, before: float) -> int:
        old = [k for k, r in self._records.items()
               if r.status != "running" and r.updated_at < before]
        for key in old:
            del self._records[key]
        return len(old)

    async def aclose(self) -> None:
        return None


def store_for(log: StreamLog) -> RunStore:
    """The run store beside ``log``: records live in the same backend as the streams, so every
    server process on that backend answers for every run."""
    kind = type(log).__name__
    if kind == "MemoryLog":
        return MemoryRunStore()
    if kind == "SQLiteLog":
        from ._sqlite_store import SQLiteRunStore

        return SQLiteRunStore(getattr(log, "path"))  # noqa: B009 - typed as the protocol
    if kind == "RedisLog":
        from ._redis_store import RedisRunStore

        return RedisRunStore(getattr(log, "url"), prefix=getattr(log, "prefix"))  # noqa: B009
    raise UsageError(f"no run store for a {kind}; pass store= (a RunStore) to Runs")
