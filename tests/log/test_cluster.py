"""``RedisLog`` on a Redis Cluster (``redis-cluster://``), on the private local 3-master cluster the
tests start (``redis_cluster_url`` in conftest; the contract and records suites run on it too):
one stream's keys and its run record share a slot, its live messages are sharded pub/sub on that
slot's master, the index migration lists streams the index misses, a reader in this process
follows a writer in another, and ``streamwire serve --log redis-cluster://...`` serves runs."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import msgspec
import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from conftest import REDIS_URL, require, require_redis
from helpers.runs_server import free_port, serve_cli
from log.redis_proc import cluster_problem, redis_cluster
from streamwire.errors import LogError, UsageError
from streamwire.frames import ChunkFrame, EndFrame
from streamwire.log import StoredRecord, record_store_of
from streamwire.log.redis import RedisLog

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
HERE = Path(__file__).parent


def _prefix() -> str:
    return f"swcl:{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def raw(redis_cluster_url: str) -> AsyncIterator[RedisCluster]:
    """redis-py's own cluster client on the same cluster, to look at the keys."""
    host, port = redis_cluster_url.removeprefix("redis-cluster://").split(",")[0].split(":")
    client = RedisCluster(host=host, port=int(port))
    await client.initialize()
    yield client
    await client.aclose()


@pytest.fixture
async def log(redis_cluster_url: str) -> AsyncIterator[RedisLog]:
    made = RedisLog(redis_cluster_url, prefix=_prefix(), finished_ttl=60)
    yield made
    await made.purge()
    await made.aclose()


async def _keys(raw: RedisCluster, prefix: str) -> list[str]:
    return sorted([k.decode() async for k in raw.scan_iter(match=f"{prefix}:*")])


async def test_one_streams_keys_and_its_run_record_share_one_slot(
        log: RedisLog, raw: RedisCluster) -> None:
    ids = [f"run-{n}" for n in range(12)]
    records = record_store_of(log, "run")
    for run_id in ids:
        await log.create_stream(run_id)
        await log.append(run_id, 0, b'{"n":1}')
        assert await records.insert(StoredRecord(run_id, "running", 1, 1.0, b"{}")) is None
    await log.end_stream(ids[0])
    keys = await _keys(raw, log.prefix)
    slots_used: set[int] = set()
    for run_id in ids:
        own = [k for k in keys if f"{{{run_id}}}" in k]
        assert sorted(own) == sorted([f"{log.prefix}:s:{{{run_id}}}:meta",
                                      f"{log.prefix}:s:{{{run_id}}}:chunks",
                                      f"{log.prefix}:run:{{{run_id}}}"])
        slots = {int(await raw.execute_command("CLUSTER KEYSLOT", k)) for k in own}
        # the channel is sharded pub/sub on the same slot
        slots.add(int(await raw.execute_command("CLUSTER KEYSLOT",
                                                f"{log.prefix}:s:{{{run_id}}}:live")))
        assert len(slots) == 1, (run_id, slots)
        slots_used |= slots
    # the indexes: each in one slot of its own (the listing and the run records')
    rest = [k for k in keys if not any(f"{{{run_id}}}" in k for run_id in ids)]
    assert sorted(rest) == sorted([
        f"{log.prefix}:s:{{{log.prefix}:s}}:ids", f"{log.prefix}:s:{{{log.prefix}:s}}:exp",
        f"{log.prefix}:runs:{{{log.prefix}:runs}}:running",
        f"{log.prefix}:runs:{{{log.prefix}:runs}}:ver"])
    for group in (rest[:2], rest[2:]):
        assert len({int(await raw.execute_command("CLUSTER KEYSLOT", k)) for k in group}) == 1
    # twelve streams are spread over the masters, not piled into one slot
    nodes = {raw.get_node_from_key(f"{log.prefix}:s:{{{run_id}}}:meta").name for run_id in ids}
    assert len(nodes) > 1
    assert len(slots_used) == len(ids)
    assert [i.stream_id for i in await log.list_streams()] == sorted(ids)
    assert await records.running() == sorted(ids)


async def test_live_messages_are_sharded_pubsub_on_the_slots_master(
        log: RedisLog, raw: RedisCluster) -> None:
    await log.create_stream("s")
    channel = f"{log.prefix}:s:{{s}}:live"
    got: list[object] = []

    async def read() -> None:
        got.extend([frame async for frame in log.read("s")])

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        owner = raw.get_node_from_key(channel)
        with anyio.fail_after(10):
            while True:  # the reader subscribed on the slot's master, and only there
                where = {node.name: await raw.execute_command(
                    "PUBSUB SHARDCHANNELS", target_nodes=node) for node in raw.get_primaries()}
                if where[owner.name]:
                    break
                await anyio.sleep(0.02)
        assert {name for name, chans in where.items() if chans} == {owner.name}
        assert [c.decode() for c in where[owner.name]] == [channel]
        await log.append("s", 0, b'{"a":1}')
        await log.end_stream("s")
    assert [type(f).__name__ for f in got] == ["CaughtUpFrame", "ChunkFrame", "EndFrame"]


async def test_the_migration_lists_streams_the_index_misses(
        log: RedisLog, raw: RedisCluster) -> None:
    for n in range(8):
        await log.create_stream(f"old-{n}")
    await log.end_stream("old-0")  # finished: kept for finished_ttl, and expiring in the index
    ids_key, exp_key = (f"{log.prefix}:s:{{{log.prefix}:s}}:{k}" for k in ("ids", "exp"))
    await raw.delete(ids_key, exp_key)  # as written before the index existed (or lost)
    assert await log.list_streams() == []
    assert await log.migrate_index() == 8
    assert [i.stream_id for i in await log.list_streams()] == [f"old-{n}" for n in range(8)]
    expiring = await raw.zrange(exp_key, 0, -1, withscores=True)
    assert [m for m, _ in expiring] == [b"old-0"]
    assert await log.migrate_index() == 0  # idempotent
    assert await raw.zcard(ids_key) == 8


async def test_the_migration_on_one_server_keeps_its_key_names() -> None:
    require_redis()
    prefix = _prefix()
    log = RedisLog(REDIS_URL, prefix=prefix)
    raw = aioredis.Redis.from_url(REDIS_URL)
    try:
        for n in range(3):
            await log.create_stream(f"old-{n}")
        assert await raw.exists(f"{prefix}:s:ids", f"{prefix}:s:{{old-0}}:meta") == 2
        await raw.delete(f"{prefix}:s:ids")
        assert await log.list_streams() == []
        assert await log.migrate_index() == 3
        assert [i.stream_id for i in await log.list_streams()] == ["old-0", "old-1", "old-2"]
        assert await log.migrate_index() == 0
    finally:
        await log.purge()
        await log.aclose()
        await raw.aclose()


async def test_a_listed_stream_whose_index_entry_is_stale_is_skipped_and_unlisted(
        log: RedisLog, raw: RedisCluster) -> None:
    await log.create_stream("kept")
    await log.create_stream("gone")
    await raw.delete(f"{log.prefix}:s:{{gone}}:meta", f"{log.prefix}:s:{{gone}}:chunks")
    assert [i.stream_id for i in await log.list_streams()] == ["kept"]
    assert await raw.zrange(f"{log.prefix}:s:{{{log.prefix}:s}}:ids", 0, -1) == [b"kept"]


async def test_the_run_record_index_ignores_an_older_update_arriving_late(
        log: RedisLog, raw: RedisCluster) -> None:
    records = record_store_of(log, "run")
    assert await records.insert(StoredRecord("r", "running", 1, 1.0, b"{}")) is None
    assert await records.swap(StoredRecord("r", "completed", 2, 2.0, b"{}"))
    assert await records.running() == []
    # an index update of version 1 that arrives after version 2's changes nothing
    from streamwire.log.redis._records import _REINDEX  # the script the store runs after a swap

    sets = [f"{log.prefix}:runs:{{{log.prefix}:runs}}:{k}"
            for k in ("ver", "running", "settled", "paused")]
    assert await raw.evalsha(_REINDEX.sha, 4, *sets, "r", 1, "running", "", 1.0) == 0
    assert await records.running() == []
    assert await records.expire(3.0) == 1
    assert await records.get("r") is None
    assert await _keys(raw, f"{log.prefix}:run") == []


async def test_a_reader_here_follows_a_writer_in_another_process(
        redis_cluster_url: str) -> None:
    prefix = _prefix()
    log = RedisLog(redis_cluster_url, prefix=prefix)
    try:
        await log.create_stream("x")
        seen: list[int] = []
        async with anyio.create_task_group() as tg:
            async def read() -> None:
                async for frame in log.read("x"):
                    if isinstance(frame, ChunkFrame):
                        seen.append(msgspec.json.decode(bytes(frame.chunk))["i"])
                    if isinstance(frame, EndFrame):
                        return
            tg.start_soon(read)
            await anyio.sleep(0.2)
            done = await anyio.run_process(
                [sys.executable, str(HERE / "redis_proc.py"), "write", redis_cluster_url,
                 prefix, "x", "40", "0.002"], check=True)
        assert json.loads(done.stdout) == {"head": 40}
        assert seen == list(range(40))
    finally:
        await log.purge()
        await log.aclose()


def test_a_cluster_url_is_checked() -> None:
    for bad in ("redis-cluster://", "redis-cluster://h", "redis-cluster://h:0",
                "redis-cluster://h:1,x", "redis-cluster://h:1/2"):
        with pytest.raises(UsageError):
            RedisLog(bad)
    from streamwire.cli.serve import open_log

    with pytest.raises(ValueError, match="HOST:PORT"):
        open_log("redis-cluster://h:x")


async def test_serve_on_the_cluster_starts_reads_stops_and_lists_runs(
        redis_cluster_url: str) -> None:
    port = free_port()
    prefix = _prefix()
    auth = {"Authorization": "Bearer t0ken"}
    flags = ["--log", redis_cluster_url, "--redis-prefix", prefix, "--token", "t0ken",
             "--agent", "demo", "--log-level", "warning"]
    with serve_cli(*flags, port=port, stderr=subprocess.DEVNULL):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=auth,
                                     timeout=10) as client:
            started = await client.post("/runs", json={
                "agent": "demo", "runId": "quick", "input": {"prompt": "hi", "pace": 0.001}})
            assert started.status_code == 201, started.text
            body = ""
            with anyio.fail_after(20):
                async with client.stream("GET", "/runs/quick/sse") as resp:
                    assert resp.status_code == 200
                    async for text in resp.aiter_text():
                        body += text
            assert "event: end" in body
            assert '"completed"' in body
            slow = await client.post("/runs", json={
                "agent": "demo", "runId": "slow", "input": {"prompt": "/slow"}})
            assert slow.status_code == 201, slow.text
            stopped = await client.post("/runs/slow/stop")
            assert stopped.status_code == 200, stopped.text
            with anyio.fail_after(10):  # its stream ends (interrupted), read to its end
                async with client.stream("GET", "/runs/slow/sse") as resp:
                    body = "".join([text async for text in resp.aiter_text()])
            assert '"interrupted"' in body
            assert (await client.get("/runs/slow/status")).json()["status"] == "interrupted"
            assert (await client.put("/streams/plain")).status_code in (200, 201)
            # /streams lists the plain stream (a run's is listed to its owner only: there is
            # no user behind a static token)
            listed = (await client.get("/streams")).json()["streams"]
            assert [(s["streamId"], s["status"]) for s in listed] == [("plain", "active")]
    check = RedisLog(redis_cluster_url, prefix=prefix)
    try:
        listed = [(i.stream_id, i.status) for i in await check.list_streams()]
        assert listed == [("plain", "active"), ("quick", "completed"), ("slow", "interrupted")]
        # each run's record is beside its stream, indexed as settled
        records = record_store_of(check, "run")
        assert {r: (await records.get(r) or StoredRecord("", "", 0, 0, b"")).status
                for r in ("quick", "slow")} == {"quick": "completed", "slow": "interrupted"}
        assert await records.running() == []
    finally:
        await check.purge()
        await check.aclose()


async def _move_slot(raw: RedisCluster, key: str) -> None:
    """Migrate ``key``'s slot (and its keys) to another master, as a resharding does."""
    slot = int(await raw.execute_command("CLUSTER KEYSLOT", key))
    source = raw.get_node_from_key(key)
    target = next(n for n in raw.get_primaries() if n.name != source.name)
    ids = {n.name: (await raw.execute_command("CLUSTER MYID", target_nodes=n)).decode()
           for n in (source, target)}
    await raw.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", ids[source.name],
                              target_nodes=target)
    await raw.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", ids[target.name],
                              target_nodes=source)
    while keys := await raw.execute_command("CLUSTER GETKEYSINSLOT", slot, 100,
                                            target_nodes=source):
        await raw.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS",
                                  *keys, target_nodes=source)
    # the source last: it drops the slot's subscriptions once every other master knows
    others = [n for n in raw.get_primaries() if n.name != source.name]
    for node in [*sorted(others, key=lambda n: n.name != target.name), source]:
        await raw.execute_command("CLUSTER SETSLOT", slot, "NODE", ids[target.name],
                                  target_nodes=node)


async def test_a_stream_follows_its_slot_to_another_master(
        log: RedisLog, raw: RedisCluster) -> None:
    await log.create_stream("moving")
    await log.append("moving", 0, b'{"n":1}')
    frames: list[object] = []
    failed: list[LogError] = []

    async def read() -> None:
        cursor = 0
        while True:
            try:
                async for frame in log.read("moving", cursor):
                    frames.append(frame)
                    if isinstance(frame, ChunkFrame):
                        cursor = frame.sequence
                    if isinstance(frame, EndFrame):
                        return
            except LogError as exc:  # the slot moved: re-attach from the cursor
                failed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        with anyio.fail_after(10):
            while not frames:  # noqa: ASYNC110 - the reader caught up
                await anyio.sleep(0.01)
        await _move_slot(raw, f"{log.prefix}:s:{{moving}}:meta")
        # the log's slot map is stale: MOVED, read the map again, append on the new master
        assert await log.append("moving", 0, b'{"n":2}') == 2
        await log.end_stream("moving")
    chunks = [f.sequence for f in frames if isinstance(f, ChunkFrame)]
    assert chunks == [1, 2]
    assert isinstance(frames[-1], EndFrame)
    assert len(failed) == 1
    assert failed[0].retryable
    assert "slot moved" in str(failed[0])
    assert (await log.info("moving")).head == 2


async def test_a_cluster_that_requires_a_password(tmp_path: Path) -> None:
    problem = cluster_problem()
    require(problem is None, problem or "")
    with redis_cluster(tmp_path, password="s3cret") as cluster:
        assert cluster.url.startswith("redis-cluster://:s3cret@")
        log = RedisLog(cluster.url, prefix=_prefix())
        wrong = RedisLog(cluster.url.replace("s3cret", "wrong"), prefix=_prefix())
        try:
            for n in range(6):  # over every master
                await log.create_stream(f"s{n}")
                await log.append(f"s{n}", 0, b'{"n":1}')
            await log.end_stream("s1")
            assert [i.stream_id for i in await log.list_streams()] == [f"s{n}" for n in range(6)]
            assert [type(f).__name__ async for f in log.read("s1")] == [
                "ChunkFrame", "CaughtUpFrame", "EndFrame"]
            with pytest.raises(LogError) as refused:
                await wrong.create_stream("x")
            assert refused.value.retryable
            assert "redis-cluster://:***@" in str(refused.value)
            assert "wrong" not in str(refused.value)
        finally:
            await log.aclose()
            await wrong.aclose()
