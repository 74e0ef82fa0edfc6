"""The record store beside each log (``LogCapabilities.records``, ``record_store(kind)``) and the
capabilities a log declares: every backend (``make_log`` is in conftest), and logs that wrap or
subclass a built-in one keep what it offers (fan-out, the run store)."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import require
from streamwire.errors import LogError, UsageError
from streamwire.log import (
    LogCapabilities,
    StoredRecord,
    StreamLog,
    capabilities_of,
    record_store_of,
)
from streamwire.log.memory import MemoryLog
from streamwire.log.sqlite import SQLiteLog
from streamwire.runs import store_for
from streamwire.runs._record import new_record, settled
from streamwire.server._fanout import log_shares_readers
from streamwire.testing import LogFactory

pytestmark = pytest.mark.anyio

EVERYTHING = LogCapabilities(positions=True, listing=True, fanout=True, records=True)


def _record(rid: str, version: int = 1, status: str = "running", at: float = 100.0,
            body: bytes = b"{}") -> StoredRecord:
    return StoredRecord(rid, status, version, at, body)


async def _forget_records(log: StreamLog) -> None:
    """Redis: delete the test's record keys (``purge`` takes the streams' only)."""
    prefix = getattr(log, "prefix", None)
    if prefix is None:
        return
    import redis.asyncio as aioredis

    raw = aioredis.Redis()
    try:
        keys = [k async for k in raw.scan_iter(match=f"{prefix}*")]
        if keys:
            await raw.delete(*keys)
    finally:
        await raw.aclose()


async def test_every_backend_declares_everything(make_log: LogFactory) -> None:
    log = await make_log()
    assert getattr(log, "capabilities") == EVERYTHING  # noqa: B009 - not on the StreamLog protocol
    assert capabilities_of(log) == EVERYTHING
    assert log_shares_readers(log)


async def test_the_record_store_primitives(make_log: LogFactory) -> None:
    log = await make_log()
    store = record_store_of(log, "test_rec")
    try:
        assert await store.get("a") is None
        assert await store.insert(_record("a", body=b'{"n":1}')) is None
        # insert-if-absent: the stored one comes back, nothing changes
        assert await store.insert(_record("a", body=b'{"n":2}')) == _record("a", body=b'{"n":1}')
        assert await store.get("a") == _record("a", body=b'{"n":1}')
        # compare-and-set on version: only version + 1 over the stored one
        assert not await store.swap(_record("a", version=3, body=b"x"))
        assert not await store.swap(_record("a", version=1, body=b"x"))
        assert not await store.swap(_record("nope", version=2))
        assert await store.swap(_record("a", version=2, status="done", at=200.0, body=b"v2"))
        assert await store.get("a") == _record("a", version=2, status="done", at=200.0, body=b"v2")
        assert not await store.swap(_record("a", version=2, body=b"again"))
        assert await store.insert(_record("b")) is None
        assert await store.insert(_record("c", status="done", at=50.0)) is None
        assert sorted(await store.running()) == ["b"]
        assert await store.swap(_record("b", version=2, status="paused", at=300.0))
        assert await store.running() == []
        # expire: settled records last changed before the time; running ones never; paused
        # ones only before paused_before
        assert await store.insert(_record("d", at=1.0)) is None
        assert await store.expire(150.0) == 1  # c
        assert await store.get("c") is None
        assert await store.expire(math.inf) == 1  # a
        assert await store.get("b") == _record("b", version=2, status="paused", at=300.0)
        assert await store.expire(math.inf, paused_before=250.0) == 0
        assert await store.expire(math.inf, paused_before=350.0) == 1  # b
        assert await store.get("b") is None
        # a paused record resumed is running again: out of the paused index
        assert await store.insert(_record("e", status="paused", at=1.0)) is None
        assert await store.swap(_record("e", version=2, at=2.0))
        assert await store.expire(math.inf, paused_before=math.inf) == 0
        assert sorted(await store.running()) == ["d", "e"]
        assert await store.swap(_record("e", version=3, status="done", at=3.0))
        assert await store.get("d") == _record("d", at=1.0)
        assert await store.running() == ["d"]
        # kinds live apart
        other = record_store_of(log, "test_other")
        assert await other.get("d") is None
        await other.aclose()
    finally:
        await store.aclose()
        await _forget_records(log)


async def test_concurrent_inserts_of_one_id_store_one(make_log: LogFactory) -> None:
    log = await make_log()
    store = record_store_of(log, "test_rec")
    won: list[bytes] = []

    async def insert(n: int) -> None:
        if await store.insert(_record("same", body=b"%d" % n)) is None:
            won.append(b"%d" % n)

    try:
        async with anyio.create_task_group() as group:
            for n in range(50):
                group.start_soon(insert, n)
        assert len(won) == 1
        stored = await store.get("same")
        assert stored is not None
        assert stored.body == won[0]
    finally:
        await _forget_records(log)


async def test_a_record_store_is_on_its_logs_connection_and_closes_with_it(
        make_log: LogFactory, backend: str) -> None:
    log = await make_log()
    store = record_store_of(log, "test_rec")
    try:
        assert await store.insert(_record("a")) is None
        await store.aclose()  # lets go of the store only: the log and its connection stay
        assert await log.create_stream("s")
        assert await record_store_of(log, "test_rec").get("a") == _record("a")
        await log.aclose()
        if backend.startswith("memory"):
            return  # no connection: the records are a dict beside the streams
        with pytest.raises(LogError, match="closed"):
            await store.get("a")
    finally:
        await _forget_records(log)


async def test_a_malformed_kind_is_refused(make_log: LogFactory) -> None:
    log = await make_log()
    for kind in ("", "Run", "runs; DROP TABLE streams", "a-b", "x" * 33, 3):
        with pytest.raises(UsageError, match="record kind"):
            record_store_of(log, kind)  # type: ignore[arg-type]


class Delegating:
    """A log wrapped by delegation (instrumentation, say): every attribute is the inner log's."""

    def __init__(self, inner: StreamLog) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_wrapped_log_keeps_fanout_and_its_run_store(make_log: LogFactory) -> None:
    log = await make_log()
    wrapped: Any = Delegating(log)
    assert capabilities_of(wrapped) == EVERYTHING
    assert log_shares_readers(wrapped)
    record = new_record("wrapped-run", "echo", {"x": 1}, owner="w", now=1.0, lease=30.0)
    try:
        # the wrapper's run store is the log's: what one stores, the other reads
        assert await store_for(wrapped).insert(record) is None
        assert await store_for(log).get("wrapped-run") == record
    finally:
        await _forget_records(log)


async def test_a_subclassed_log_keeps_fanout_and_its_run_store(tmp_path: Path) -> None:
    # the built-in logs are @final for the type checkers; at run time a subclass still works
    class Counting(MemoryLog):  # type: ignore[misc]
        appends = 0

        async def append(self, *args: Any, **kwargs: Any) -> int:
            self.appends += 1
            return await super().append(*args, **kwargs)

    class Local(SQLiteLog):  # type: ignore[misc]
        pass

    for log in (Counting(), Local(tmp_path / "sub.db")):
        try:
            assert capabilities_of(log) == EVERYTHING
            assert log_shares_readers(log)
            store = store_for(log)
            record = new_record("sub-run", "echo", None, owner="w", now=1.0, lease=30.0)
            assert await store.insert(record) is None
            done = settled(record, "completed", now=2.0, head=0)
            assert await store.swap(done)
            assert await store_for(log).get("sub-run") == done
        finally:
            await log.aclose()


async def test_a_log_that_declares_nothing_offers_only_what_it_has() -> None:
    class Bare:
        async def list_streams(self, **kwargs: Any) -> list[Any]:
            return []

    class Older:
        pass

    assert capabilities_of(Bare()) == LogCapabilities(listing=True)
    assert capabilities_of(Older()) == LogCapabilities()
    assert not log_shares_readers(Bare())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="declares no record store"):
        store_for(Bare())  # type: ignore[arg-type]
    # a declaration that is not a LogCapabilities is no declaration
    odd: Any = Bare()
    odd.capabilities = {"fanout": True}
    assert capabilities_of(odd) == LogCapabilities(listing=True)


def test_fanout_needs_positions() -> None:
    with pytest.raises(UsageError, match="positions"):
        LogCapabilities(fanout=True)


async def test_the_redis_record_store_rides_the_logs_one_connection() -> None:
    import socket

    from streamwire.log.redis import RedisLog

    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
        up = True
    except OSError:
        up = False
    require(up, "no Redis on 127.0.0.1:6379 (start redis-server to run these)")
    log = RedisLog(prefix=f"swtest-records-{uuid.uuid4().hex[:12]}")
    try:
        store = record_store_of(log, "run")
        assert getattr(store, "_commands") is getattr(log, "_commands")  # noqa: B009
        # 500 at once on one pipelined connection: all answered, none refused
        async with anyio.create_task_group() as group:
            for n in range(500):
                group.start_soon(store.insert, _record(f"r{n}"))
        assert len(await store.running()) == 500
        await log.aclose()
        with pytest.raises(LogError, match="closed"):
            await store.get("r1")
    finally:
        await log.aclose()
        await _forget_records(log)
