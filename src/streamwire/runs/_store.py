"""Where run records live: one ``RunStore`` protocol of storage primitives, and the store that
sits beside each stream log (same memory, same SQLite file and worker, same Redis connection and
prefix): the log's ``record_store("run")`` (``streamwire.log.RecordStore``), which keeps each
record as the JSON ``encode_record`` makes.

The primitives only store: ``insert`` if absent, ``get``, ``swap`` (compare-and-set on the
record's ``version``), ``running`` (the ids to sweep) and ``expire``. Every rule (transitions,
exactly-once, leases) is in ``streamwire.runs._record`` and ``streamwire.runs._service``, written
once.

Retention: a record not running is kept ``Runs(record_ttl=)`` seconds after its last change. A
paused record waits for its resume as long as its stream does: with the log's ``paused_ttl`` 0
(the default) until it is resumed; else ``paused_ttl`` and then ``record_ttl`` more (the pause
expiring counts as the run's end), so ``/status`` outlives the stream there too.
"""

from __future__ import annotations

import math
from typing import Final, Protocol, final, runtime_checkable

from ..errors import UsageError
from ..log import RecordStore, StoredRecord, StreamLog, capabilities_of, record_store_of
from ..log._common import check_ttl
from ._record import RunRecord, decode_record, encode_record

__all__ = ["MemoryRunStore", "RecordRunStore", "RunStore", "paused_ttl_of", "store_for"]

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
        """Delete the records not ``running`` last changed before ``before`` (epoch seconds) --
        paused ones only once their pause expired too (see the module); returns how many."""
        ...

    async def aclose(self) -> None:
        """Release what the store holds (a log's record store: nothing, the log owns it)."""
        ...


class RecordRunStore:
    """A ``RunStore`` over a log's ``RecordStore``: each run record kept as its JSON. Paused
    records expire ``paused_ttl`` seconds after the others would (0: not until resumed)."""

    def __init__(self, records: RecordStore, *, paused_ttl: float = 0.0) -> None:
        self.records = records
        self.paused_ttl = check_ttl("paused_ttl", paused_ttl)

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
        paused_before = before - self.paused_ttl if self.paused_ttl else None
        return await self.records.expire(before, paused_before=paused_before)

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
    answers for every run. Paused records wait as long as the log keeps paused streams (its
    ``paused_ttl``)."""
    if not capabilities_of(log).records:
        raise UsageError(f"a {type(log).__name__} declares no record store "
                         "(LogCapabilities.records); pass store= (a RunStore) to Runs")
    return RecordRunStore(record_store_of(log, RUN_RECORDS), paused_ttl=paused_ttl_of(log))


def paused_ttl_of(log: StreamLog) -> float:
    """The log's ``paused_ttl`` (every backend takes one); 0 (kept until resumed) when it has
    none."""
    value: object = getattr(log, "paused_ttl", 0.0)
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
        return float(value)
    return 0.0
