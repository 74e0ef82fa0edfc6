"""Versioned records beside the streams: one storage primitive every backend implements in its
room (``log/memory/``, ``log/sqlite/``, ``log/redis/``), for what the layers above keep next to
their streams (run records and their leases today; threads next).

A record is opaque bytes (``body``) with the few fields a store must see to index it: its ``id``,
its ``status`` (``"running"`` ones are listed by ``running()``, the others expire), its
``version`` (the compare-and-set token) and ``updated_at``. What the body means, and every rule
about how a record may change, belongs to the layer that encodes it (``streamwire.runs._store``).

The store only stores, atomically: ``insert`` if absent, ``get``, ``swap`` (compare-and-set on
``version``), ``running`` and ``expire``. Records of different ``kind`` (``"run"``, ...) live
apart: a log's ``record_store(kind)`` returns the store of that kind on the log's own storage and
connection (the same memory, the same SQLite file and worker thread, the same Redis connection
and prefix).
"""

from __future__ import annotations

import re
from typing import Final, Protocol, final

import msgspec

from ..errors import UsageError

__all__ = ["PAUSED", "RUNNING", "RecordStore", "StoredRecord", "check_kind"]

#: The one status a store indexes: ``running()`` lists the records that have it.
RUNNING: Final = "running"
#: The status whose records ``expire`` keeps apart: they wait for someone (a resume), so they
#: expire on their own deadline (``paused_before``), or never.
PAUSED: Final = "paused"
_KIND: Final = re.compile(r"[a-z][a-z_]{0,31}")


@final
class StoredRecord(msgspec.Struct, frozen=True):
    """One record as a ``RecordStore`` keeps it: ``body`` and the fields the store indexes."""

    id: str
    status: str
    version: int
    updated_at: float
    body: bytes


class RecordStore(Protocol):
    """Storage of versioned records of one kind. Backend failures raise ``LogError`` (retryable
    when nothing was changed, or when retrying changes nothing twice)."""

    async def insert(self, record: StoredRecord) -> StoredRecord | None:
        """Store ``record`` if no record has its id (atomically) and return None; else return
        the stored one (and change nothing)."""
        ...

    async def get(self, record_id: str) -> StoredRecord | None:
        """The stored record, or None."""
        ...

    async def swap(self, record: StoredRecord) -> bool:
        """Replace the stored record whose version is ``record.version - 1`` by ``record``
        (atomically); False (and nothing changed) when the stored version differs or there is
        none."""
        ...

    async def running(self) -> list[str]:
        """The ids of the records whose status is ``"running"``."""
        ...

    async def expire(self, before: float, *, paused_before: float | None = None) -> int:
        """Delete the records neither ``"running"`` nor ``"paused"`` last changed before
        ``before`` (epoch seconds), and the ``"paused"`` ones last changed before
        ``paused_before`` (None: they are kept); return how many."""
        ...

    async def aclose(self) -> None:
        """Let go of the store. The connection is the log's: ``log.aclose()`` closes it."""
        ...


def check_kind(kind: str) -> str:
    """A record kind names tables and keys: lowercase letters and ``_``, at most 32."""
    if type(kind) is not str or not _KIND.fullmatch(kind):
        raise UsageError(f"a record kind is 1 to 32 lowercase letters or '_' (e.g. 'run'), "
                         f"not {kind!r}")
    return kind
