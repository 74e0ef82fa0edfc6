"""Where run records live: one ``RunStore`` protocol of storage primitives, and the store that
sits beside each stream log (same memory, same SQLite file and worker, same Redis connection and
prefix): the log's ``record_store("run")`` (``streamwire.log.RecordStore``), which keeps each
record as the JSON ``encode_record`` makes.

The primitives only store: ``insert`` if absent, ``get``, ``swap`` (compare-and-set on the
record's ``version``) and ``running`` (the ids to sweep). Every rule (transitions, exactly-once,
leases) is in ``streamwire.runs._record`` and ``streamwire.runs._service``, written once.
"""

from __future__ import annotations

from typing import Final, Protocol, final, runtime_checkable

from ..errors import UsageError
from ..log import RecordStore, StoredRecord, StreamLog, capabilities_of, record_store_of
from ._record import RunRecord, decode_record, encode_record

__all__ = ["MemoryRunStore", "RecordRunStore", "RunStore", "store_for"]

#: The record kind of runs in a log's record store (SQLite table ``runs``, Redis keys ``run:``).
RUN_RECORDS: Final = "run"


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
        """Release what the store holds (a log's record store: nothing, the log owns it)."""
        ...


class RecordRunStore:
    """A ``RunStore`` over a log's ``RecordStore``: each run record kept as its JSON."""

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    async def insert(self, record: RunRecord) -> RunRecord | None:
        stored = await self.records.insert(_stored(record))
        return None if stored is None else decode_record(stored.body)

    async def get(self, run_id: str) -> RunRecord | None:
        stored = await self.records.get(run_id)
        return None if stored is None else decode_record(stored.body)

    async def swap(self, record: RunRecord) -> bool:
        return await self.records.swap(_stored(record))

    async def running(self) -> list[str]:
        return await self.records.running()

    async def expire(self, before: float) -> int:
        return await self.records.expire(before)

    async def aclose(self) -> None:
        await self.records.aclose()


@final
class MemoryRunStore(RecordRunStore):
    """Records in this process's memory, in a store of their own (``store_for`` a ``MemoryLog``
    gives the one beside the log instead)."""

    def __init__(self) -> None:
        from ..log.memory._records import MemoryRecordStore

        super().__init__(MemoryRecordStore())


def _stored(record: RunRecord) -> StoredRecord:
    return StoredRecord(record.run_id, record.status, record.version, record.updated_at,
                        encode_record(record))


def store_for(log: StreamLog) -> RunStore:
    """The run store beside ``log``: records live in the same backend as the streams (the store
    the log declares, ``LogCapabilities.records``), so every server process on that backend
    answers for every run."""
    if not capabilities_of(log).records:
        raise UsageError(f"a {type(log).__name__} declares no record store "
                         "(LogCapabilities.records); pass store= (a RunStore) to Runs")
    return RecordRunStore(record_store_of(log, RUN_RECORDS))
