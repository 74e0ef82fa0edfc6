"""RedisLog beyond the shared contract: its Redis layout, one subscription per stream per process,
epochs, retention in Redis, many processes, and faults (killed connections, server restarts).

Needs a Redis server at ``STREAMWIRE_TEST_REDIS`` (default ``redis://127.0.0.1:6379/0``) and,
for the fault tests, the ``redis-server`` binary (each fault test starts its own server on a free
port, so the shared one is never killed or restarted). Without them these tests skip; in CI they
fail.
"""

from __future__ import annotations

import itertools
import json
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
import redis.asyncio as aioredis

from conftest import REDIS_URL, require, require_redis
from streamwire.errors import LogError, StreamNotFoundError, StreamStateError, UsageError
from streamwire.frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    StreamFrame,
    TruncatedFrame,
)
from streamwire.log.redis import RedisLog

pytestmark = [pytest.mark.redis, pytest.mark.anyio]

SHARED = REDIS_URL
HERE = Path(__file__).parent
PROC = HERE / "redis_proc.py"
GUARD = 30.0


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def prefix() -> str:
    return f"swtest-redis:{uuid.uuid4().hex}"


@pytest.fixture
async def log(prefix: str) -> AsyncIterator[RedisLog]:
    require_redis()
    the_log = RedisLog(SHARED, prefix=prefix)
    yield the_log
    await the_log.purge()
    await the_log.aclose()


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(SHARED, protocol=2)
    yield client
    await client.aclose()


class OwnRedis:
    """A private redis-server on a free port (no persistence unless told to save on shutdown)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if _answers(self.port):
                return
            subprocess.run(["sleep", "0.02"], check=True)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def cli(self, *args: str) -> str:
        done = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True,
                              timeout=10, check=False)
        return done.stdout.decode()

    def stop(self, *, save: bool) -> None:
        self.cli("SHUTDOWN", "SAVE" if save else "NOSAVE")
        assert self.proc is not None
        self.proc.wait(timeout=10)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    require(shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None,
            "redis-server / redis-cli not installed (apt-get install redis-server)")
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.kill()


def _chunk(k: int) -> bytes:
    return msgspec.json.encode({"i": k})


async def _until_caught_up(frames: AsyncIterator[StreamFrame]) -> list[StreamFrame]:
    got: list[StreamFrame] = []
    with anyio.fail_after(GUARD):
        async for frame in frames:
            got.append(frame)
            if isinstance(frame, CaughtUpFrame):
                return got
    raise AssertionError(f"no caught-up: {got}")


async def _collect(frames: AsyncIterator[StreamFrame]) -> list[StreamFrame]:
    with anyio.fail_after(GUARD):
        return [frame async for frame in frames]


async def _subscribers_become(raw: aioredis.Redis, channel: str, n: int) -> None:
    """Wait until Redis counts ``n`` subscriptions to ``channel`` (all processes together)."""
    with anyio.fail_after(GUARD):
        for _ in itertools.count():
            if await raw.pubsub_numsub(channel) == [(channel.encode(), n)]:
                return
            await anyio.sleep(0.01)


def _seqs(frames: list[StreamFrame]) -> list[int]:
    return [f.sequence for f in frames if isinstance(f, ChunkFrame)]


# -- layout ----------------------------------------------------------------------------------


def test_import_without_redis_names_the_extra() -> None:
    code = ("import sys; sys.modules['redis'] = None\n"
            "try:\n    import streamwire.log.redis\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=60)
    assert 'pip install "streamwire[redis]"' in out.stdout.decode()


async def test_chunks_live_in_a_redis_stream_keyed_by_sequence(
        log: RedisLog, raw: aioredis.Redis, prefix: str) -> None:
    info = await log.create_stream("s")
    assert await log.append_many("s", [(0, b'"a"'), (1, b"2")]) == [1, 2]
    assert await log.append("s", 1, b'{"x":3}') == 3
    entries = await raw.xrange(f"{prefix}:s:{{s}}:chunks")
    assert [(i, f) for i, f in entries] == [
        (b"1-0", {b"s": b"0", b"c": b'"a"'}), (b"2-0", {b"s": b"1", b"c": b"2"}),
        (b"3-0", {b"s": b"1", b"c": b'{"x":3}'})]
    meta = await raw.hgetall(f"{prefix}:s:{{s}}:meta")
    assert (meta[b"head"], meta[b"status"], meta[b"epoch"].decode()) == (
        b"3", b"active", info.epoch)
    assert len(info.epoch) == 16


async def test_one_subscription_per_stream_per_process(
        log: RedisLog, raw: aioredis.Redis, prefix: str) -> None:
    channel = f"{prefix}:s:{{s}}:live"
    await log.create_stream("s")
    await log.append("s", 0, _chunk(0))
    readers = [log.read("s", 0) for _ in range(50)]
    for frames in readers:
        assert _seqs(await _until_caught_up(frames)) == [1]
    assert await raw.pubsub_numsub(channel) == [(channel.encode(), 1)]
    await log.append("s", 0, _chunk(1))
    for frames in readers:
        with anyio.fail_after(GUARD):
            frame = await anext(frames)
        assert isinstance(frame, ChunkFrame)
        assert frame.sequence == 2
    for frames in readers:
        await frames.aclose()  # type: ignore[attr-defined]
    await _subscribers_become(raw, channel, 0)


async def test_a_reader_whose_queue_overflows_catches_up_from_xrange(prefix: str) -> None:
    require_redis()
    log = RedisLog(SHARED, prefix=prefix, max_reader_queue=3)
    try:
        await log.create_stream("s")
        frames = log.read("s", 0)
        await _until_caught_up(frames)
        for k in range(60):  # the reader takes nothing meanwhile: its queue overflows
            await log.append("s", k // 7, _chunk(k))
        await log.end_stream("s")
        rest = await _collect(frames)
        assert _seqs(rest) == list(range(1, 61))
        assert rest[-1] == EndFrame("completed")
    finally:
        await log.purge()
        await log.aclose()


async def test_retention_trims_the_redis_stream(
        prefix: str, raw: aioredis.Redis) -> None:
    require_redis()
    log = RedisLog(SHARED, prefix=prefix, max_chunks_per_stream=5,
                   max_bytes_per_stream=60, max_chunk_size=50)
    try:
        await log.create_stream("s")
        for k in range(12):
            await log.append("s", 0, _chunk(k))
        assert await raw.xlen(f"{prefix}:s:{{s}}:chunks") == 5
        assert (await log.info("s")).floor == 7
        assert await _collect(log.read("s", 3)) == [TruncatedFrame(floor=7)]
        await log.append("s", 0, b'"' + b"x" * 40 + b'"')  # 42 bytes: bytes bound the rest
        info = await log.info("s")
        assert (info.head, info.oldest_retained_sequence) == (13, 11)
    finally:
        await log.purge()
        await log.aclose()


async def test_finished_streams_get_a_ttl_and_reactivate_keeps_them(
        prefix: str, raw: aioredis.Redis) -> None:
    require_redis()
    log = RedisLog(SHARED, prefix=prefix, finished_ttl=60)
    meta, chunks = f"{prefix}:s:{{s}}:meta", f"{prefix}:s:{{s}}:chunks"
    try:
        await log.create_stream("s")
        await log.append("s", 0, _chunk(0))
        assert (await raw.pttl(meta), await raw.pttl(chunks)) == (-1, -1)
        await log.fail_stream("s", "boom", error_detail={"code": "X"})
        assert 0 < await raw.pttl(meta) <= 60_000
        assert 0 < await raw.pttl(chunks) <= 60_000
        await log.reactivate_stream("s")
        assert (await raw.pttl(meta), await raw.pttl(chunks)) == (-1, -1)
    finally:
        await log.purge()
        await log.aclose()


async def test_the_stream_index_is_a_sorted_set_the_scripts_keep(
        log: RedisLog, raw: aioredis.Redis, prefix: str) -> None:
    ids = f"{prefix}:s:ids"
    for sid in ("b", "a", "c"):
        await log.create_stream(sid)
    assert await raw.zrange(ids, 0, -1, withscores=True) == [(b"a", 0.0), (b"b", 0.0),
                                                              (b"c", 0.0)]
    await log.delete_stream("b")
    assert await raw.zrange(ids, 0, -1) == [b"a", b"c"]
    # Redis dropped a stream's keys by itself (an eviction): a listing skips it and unlists it
    await raw.delete(f"{prefix}:s:{{c}}:meta", f"{prefix}:s:{{c}}:chunks")
    assert [info.stream_id for info in await log.list_streams()] == ["a"]
    assert await raw.zrange(ids, 0, -1) == [b"a"]


async def test_expired_ids_leave_the_index_without_a_listing(
        prefix: str, raw: aioredis.Redis) -> None:
    require_redis()
    log = RedisLog(SHARED, prefix=prefix, finished_ttl=0.2, writer_timeout=0.5)
    ids, expiring = f"{prefix}:s:ids", f"{prefix}:s:exp"
    try:
        for n in range(4):
            await log.create_stream(f"done{n}")
            await log.end_stream(f"done{n}")
        await log.create_stream("quiet")  # its writer's lease lapses: failed, so it expires too
        await log.create_stream("again")
        await log.end_stream("again")
        await log.reactivate_stream("again")  # active again: it no longer expires
        assert await raw.zcard(ids) == 6
        assert await raw.zcard(expiring) == 4
        await anyio.sleep(0.7)
        with pytest.raises(StreamStateError):
            await log.keepalive("quiet")  # noticed now: failed, expires 0.2 s from now
        assert await raw.zscore(expiring, "quiet") is not None
        await anyio.sleep(0.4)
        await log.create_stream("new")  # each creation drops a few expired ids
        assert await raw.zrange(ids, 0, -1) == [b"again", b"new"]
        assert await raw.zcard(expiring) == 0
    finally:
        await log.purge()
        await log.aclose()


async def test_scripts_are_reloaded_after_a_script_flush(own_redis: OwnRedis) -> None:
    log = RedisLog(own_redis.url)
    try:
        await log.create_stream("s")
        own_redis.cli("SCRIPT", "FLUSH")
        assert await log.append("s", 0, _chunk(0)) == 1
    finally:
        await log.aclose()


# -- epochs ----------------------------------------------------------------------------------


async def test_a_stream_lost_and_recreated_answers_truncated_not_a_mix(
        log: RedisLog, raw: aioredis.Redis, prefix: str) -> None:
    old = await log.create_stream("s")
    await log.append_many("s", [(0, _chunk(k)) for k in range(5)])
    assert _seqs(await _until_caught_up(log.read("s", 0))) == [1, 2, 3, 4, 5]
    live = log.read("s", 5)
    await _until_caught_up(live)
    # the data is lost (an eviction, a restart without persistence, a flush)
    await raw.delete(f"{prefix}:s:{{s}}:meta", f"{prefix}:s:{{s}}:chunks")
    with pytest.raises(StreamNotFoundError):  # never recreated behind the writer's back
        await log.append("s", 0, _chunk(5))
    new = await log.create_stream("s")
    assert new.epoch != old.epoch
    assert new.head == 0
    await log.append_many("s", [(0, _chunk(k)) for k in range(3)])
    # the reader that was attached learns of the new epoch from the next message
    assert await _collect(live) == [TruncatedFrame(floor=0)]
    # a re-attach through the same log (it remembers the epoch it served) ...
    assert await _collect(log.read("s", 2)) == [TruncatedFrame(floor=0)]
    # ... or through another process that passes the epoch it had
    other = RedisLog(SHARED, prefix=prefix)
    try:
        assert await _collect(other.read("s", 2, epoch=old.epoch)) == [TruncatedFrame(floor=0)]
        with pytest.raises(StreamStateError, match="above the stream's head"):
            await _collect(other.read("s", 5))
        # a reader of the new epoch from 0 reads the new run
        frames = log.read("s", 0, epoch=new.epoch)
        assert _seqs(await _until_caught_up(frames)) == [1, 2, 3]
        await frames.aclose()  # type: ignore[attr-defined]
    finally:
        await other.aclose()


async def test_delete_reaches_a_reader_in_another_process(
        log: RedisLog, prefix: str) -> None:
    other = RedisLog(SHARED, prefix=prefix)  # its own pub/sub connection, as another server's
    try:
        await log.create_stream("s")
        frames = other.read("s", 0)
        await _until_caught_up(frames)
        await log.delete_stream("s")
        rest = await _collect(frames)
        assert len(rest) == 1
        assert isinstance(rest[0], FailFrame)
        assert rest[0].recoverable
    finally:
        await other.aclose()


async def test_markers_and_terminals_reach_readers_of_another_process(
        log: RedisLog, prefix: str) -> None:
    other = RedisLog(SHARED, prefix=prefix)
    try:
        await log.create_stream("s")
        await log.append_many("s", [(0, _chunk(0)), (1, _chunk(1))])
        frames = other.read("s", 0)
        assert _seqs(await _until_caught_up(frames)) == [1, 2]
        await log.append("s", 2, _chunk(2))
        rewound = await log.cleanup_to_step("s", 1)
        await log.append("s", 2, _chunk(3))
        await log.end_stream("s", "paused", state={"k": 1})
        rest = await _collect(frames)
        # chunk 3 was removed before this reader took it, or reached it just before the cleanup
        assert [f for f in rest if not isinstance(f, ChunkFrame) or f.sequence != 3] == [
            rewound, ChunkFrame(4, msgspec.Raw(_chunk(3))), EndFrame("paused", state={"k": 1})]
    finally:
        await other.aclose()


# -- many processes --------------------------------------------------------------------------


def _spawn(*args: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(PROC), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _lines(proc: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines()]


def _wait_line(proc: subprocess.Popen[bytes], key: str) -> list[dict[str, Any]]:
    """Lines up to the first that has ``key`` (the process keeps running)."""
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    while True:
        line = proc.stdout.readline()
        assert line, f"process ended before {key!r}: {seen}"
        seen.append(json.loads(line))
        if key in seen[-1]:
            return seen


async def test_a_writer_process_and_reader_processes_share_one_stream(
        log: RedisLog, prefix: str) -> None:
    count = 300
    await log.create_stream("s")
    reader_a = _spawn("read", SHARED, prefix, "s", 0, 0)
    reader_b = _spawn("read", SHARED, prefix, "s", 0, 100)  # leaves after 100 chunks
    try:
        await anyio.to_thread.run_sync(_wait_line, reader_a, "caught_up")
        await anyio.to_thread.run_sync(_wait_line, reader_b, "caught_up")
        writer = _spawn("write", SHARED, prefix, "s", count, 0.002)
        first_b = await anyio.to_thread.run_sync(_lines, reader_b)
        left_at = first_b[-1]["left_at"]
        assert left_at == 100
        # B re-attaches through a different process, mid-stream
        reader_b2 = _spawn("read", SHARED, prefix, "s", left_at, 0)
        lines_a = await anyio.to_thread.run_sync(_lines, reader_a)
        lines_b2 = await anyio.to_thread.run_sync(_lines, reader_b2)
        assert (await anyio.to_thread.run_sync(_lines, writer)) == [{"head": count}]
    finally:
        for proc in (reader_a, reader_b):
            proc.kill()
    want = [{"seq": k + 1, "i": k} for k in range(count)]
    assert [x for x in lines_a if "seq" in x] == want
    assert [x for x in first_b if "seq" in x] + [x for x in lines_b2 if "seq" in x] == want
    assert lines_a[-1] == lines_b2[-1] == {"end": "completed"}


# -- faults ----------------------------------------------------------------------------------


class Reader:
    """A reader that re-attaches from its cursor after every retryable error."""

    def __init__(self, log: RedisLog, stream_id: str) -> None:
        self.log, self.stream_id = log, stream_id
        self.seqs: list[int] = []
        self.errors: list[LogError] = []
        self.terminal: StreamFrame | None = None
        self.live = anyio.Event()

    async def run(self) -> None:
        while self.terminal is None:
            cursor = self.seqs[-1] if self.seqs else 0
            try:
                async for frame in self.log.read(self.stream_id, cursor):
                    if isinstance(frame, ChunkFrame):
                        self.seqs.append(frame.sequence)
                    elif isinstance(frame, CaughtUpFrame):
                        self.live.set()
                    elif isinstance(frame, EndFrame | FailFrame | TruncatedFrame):
                        self.terminal = frame
            except StreamNotFoundError as exc:  # lost with the server's data, not recreated yet
                self.errors.append(exc)
                await anyio.sleep(0.05)
            except LogError as exc:
                if not exc.retryable:
                    raise
                self.errors.append(exc)
                await anyio.sleep(0.05)


async def _append_surely(log: RedisLog, stream_id: str, k: int, errors: list[LogError]) -> None:
    """Append chunk k (sequence k + 1) exactly once, whatever the connection does."""
    while True:
        try:
            assert await log.append(stream_id, 0, _chunk(k)) == k + 1
            return
        except StreamNotFoundError:
            raise
        except LogError as exc:
            errors.append(exc)
            if not exc.retryable:  # sent, outcome unknown: the head says whether it landed
                while True:
                    try:
                        head = (await log.info(stream_id)).head
                        break
                    except LogError:
                        await anyio.sleep(0.05)
                if head == k + 1:
                    return
            await anyio.sleep(0.05)


async def test_killed_subscription_gives_a_retryable_error_and_nothing_is_lost(
        own_redis: OwnRedis) -> None:
    log = RedisLog(own_redis.url)
    writer = RedisLog(own_redis.url)
    try:
        await writer.create_stream("s")
        readers = [Reader(log, "s") for _ in range(3)]
        append_errors: list[LogError] = []
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as group:
                for reader in readers:
                    group.start_soon(reader.run)
                for reader in readers:
                    await reader.live.wait()
                for k in range(300):
                    await _append_surely(writer, "s", k, append_errors)
                    if k % 60 == 30:
                        own_redis.cli("CLIENT", "KILL", "TYPE", "pubsub")
                    if k % 60 == 45:  # every command connection but redis-cli's own
                        own_redis.cli("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
                    await anyio.sleep(0.001)
                await writer.end_stream("s")
        for reader in readers:
            assert reader.seqs == list(range(1, 301))
            assert reader.terminal == EndFrame("completed")
            assert len(reader.errors) >= 3
        assert (await writer.info("s")).head == 300
    finally:
        await log.aclose()
        await writer.aclose()


async def test_an_append_that_cannot_reach_redis_says_nothing_was_stored(
        own_redis: OwnRedis) -> None:
    log = RedisLog(own_redis.url)
    try:
        await log.create_stream("s")
        await log.append("s", 0, _chunk(0))
        own_redis.stop(save=True)
        with pytest.raises(LogError, match=r"cannot reach Redis.*nothing was changed") as caught:
            await log.append("s", 0, _chunk(1))
        assert caught.value.retryable
        assert isinstance(caught.value.__cause__, Exception)
        own_redis.start()
        assert (await log.info("s")).head == 1
        assert await log.append("s", 0, _chunk(1)) == 2
    finally:
        await log.aclose()


async def test_a_hung_server_gives_a_timeout_error_not_a_hang(own_redis: OwnRedis) -> None:
    log = RedisLog(own_redis.url, command_timeout=0.3)
    try:
        await log.create_stream("s")
        await log.append("s", 0, _chunk(0))  # the append script is loaded
        assert own_redis.proc is not None
        own_redis.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(LogError, match=r"command_timeout=0\.3s.*may or may not") as caught:
                await log.append("s", 0, _chunk(1))
            assert not caught.value.retryable  # sent: the outcome is unknown
            with pytest.raises(LogError) as caught:  # a new connection times out too
                await log.info("s")
            assert caught.value.retryable
        finally:
            own_redis.proc.send_signal(signal.SIGCONT)
        # the late reply of the timed-out append is matched to no one; the line stays in step
        assert (await log.info("s")).head == 2  # it did land, late
        assert await log.append("s", 0, _chunk(2)) == 3
    finally:
        await log.aclose()


async def test_a_silent_dead_subscription_is_found_by_ping(own_redis: OwnRedis) -> None:
    log = RedisLog(own_redis.url, health_interval=0.2)
    try:
        await log.create_stream("s")
        frames = log.read("s", 0)
        await _until_caught_up(frames)
        await anyio.sleep(0.5)  # quiet, but answering PINGs: still attached
        assert own_redis.proc is not None
        own_redis.proc.send_signal(signal.SIGSTOP)  # now silent and deaf
        try:
            with anyio.fail_after(5), pytest.raises(LogError, match="PING") as caught:
                await anext(frames)
            assert caught.value.retryable
        finally:
            own_redis.proc.send_signal(signal.SIGCONT)
    finally:
        await log.aclose()


async def test_a_ping_while_subscribed_to_nothing_keeps_the_subscription(prefix: str) -> None:
    """Redis answers a PING outside subscribed mode with a plain ``PONG``, not ``[pong, ""]``:
    after every reader left, the quiet subscription connection is PINGed, and must survive it
    (it broke, failing the reader that attached as the PING went out)."""
    require_redis()
    log = RedisLog(SHARED, prefix=prefix, health_interval=0.1)
    try:
        await log.create_stream("s")
        frames = log.read("s", 0)
        await _until_caught_up(frames)
        await frames.aclose()  # the last reader leaves: the connection unsubscribes
        (dispatcher,) = log._dispatchers.values()
        await anyio.sleep(0.6)  # several PINGs, with nothing subscribed
        assert dispatcher.dead is None, dispatcher.dead
        again = log.read("s", 0)
        await _until_caught_up(again)
        assert list(log._dispatchers.values()) == [dispatcher]  # the same connection
        await log.append("s", 0, _chunk(0))
        with anyio.fail_after(5):
            assert isinstance(await anext(again), ChunkFrame)
        await again.aclose()
    finally:
        await log.purge()
        await log.aclose()


def test_bad_settings_name_the_keyword() -> None:
    with pytest.raises(UsageError, match="command_timeout"):
        RedisLog(SHARED, command_timeout=0)
    with pytest.raises(UsageError, match="max_reader_queue"):
        RedisLog(SHARED, max_reader_queue=0)
    with pytest.raises(UsageError, match="max_chunks_per_stream"):
        RedisLog(SHARED, max_chunks_per_stream=-1)


async def _restart_mid_stream(own_redis: OwnRedis, *, save: bool) -> tuple[Reader, list[int]]:
    log = RedisLog(own_redis.url)
    writer = RedisLog(own_redis.url)
    reader = Reader(log, "s")
    written: list[int] = []
    try:
        await writer.create_stream("s")
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as group:
                group.start_soon(reader.run)
                await reader.live.wait()
                for k in range(100):
                    await _append_surely(writer, "s", k, [])
                    written.append(k + 1)
                with anyio.fail_after(5):
                    for _ in itertools.count():
                        if len(reader.seqs) == 100:
                            break
                        await anyio.sleep(0.01)
                await anyio.to_thread.run_sync(lambda: own_redis.stop(save=save))
                await anyio.sleep(0.2)  # the reader notices, retries against a dead server
                await anyio.to_thread.run_sync(own_redis.start)
                try:
                    for k in range(100, 150):
                        await _append_surely(writer, "s", k, [])
                        written.append(k + 1)
                except StreamNotFoundError:
                    # the data is gone: a new run under a new epoch
                    await writer.create_stream("s")
                    for k in range(20):
                        await _append_surely(writer, "s", k, [])
                await writer.end_stream("s")
        return reader, written
    finally:
        await log.aclose()
        await writer.aclose()


async def test_a_server_restart_with_its_data_loses_nothing(own_redis: OwnRedis) -> None:
    reader, written = await _restart_mid_stream(own_redis, save=True)
    assert reader.errors, "the restart must reach the reader as a retryable error"
    assert reader.seqs == written == list(range(1, 151))
    assert reader.terminal == EndFrame("completed")


async def test_a_server_restart_that_lost_the_data_answers_truncated(
        own_redis: OwnRedis) -> None:
    reader, written = await _restart_mid_stream(own_redis, save=False)
    assert reader.errors
    assert written == reader.seqs == list(range(1, 101))
    assert reader.terminal == TruncatedFrame(floor=0)


async def test_cancelled_reads_leave_no_subscription(log: RedisLog, raw: aioredis.Redis,
                                                    prefix: str) -> None:
    channel = f"{prefix}:s:{{s}}:live"
    await log.create_stream("s")

    async def read_forever() -> None:
        async for _ in log.read("s", 0):
            pass

    async with anyio.create_task_group() as group:
        for _ in range(5):
            group.start_soon(read_forever)
        await _subscribers_become(raw, channel, 1)
        group.cancel_scope.cancel()
    await _subscribers_become(raw, channel, 0)


async def test_the_redis_py_adapter_still_fits() -> None:
    """The one place RedisLog reads a redis-py private attribute (a connection's stream writer):
    fail loudly on a redis-py it was not checked against, or when a real connection no longer
    has what the adapter reads."""
    import asyncio
    import time

    import redis
    from redis.asyncio.connection import Connection

    from streamwire._compat.redis import (
        TESTED_REDIS_PY_MAJORS,
        idle_socket_readable,
        writer_of,
    )

    require_redis()
    major = int(redis.__version__.split(".")[0])
    assert major in TESTED_REDIS_PY_MAJORS, (
        f"redis-py {redis.__version__} is not one streamwire/_compat/redis.py was checked "
        "against: check Connection._writer still holds the asyncio.StreamWriter, then widen "
        "TESTED_REDIS_PY_MAJORS")
    conn = Connection(**aioredis.ConnectionPool.from_url(SHARED, protocol=2).connection_kwargs)
    await conn.connect()  # type: ignore[no-untyped-call]
    try:
        writer = writer_of(conn)
        assert isinstance(writer, asyncio.StreamWriter)
        assert not idle_socket_readable(conn)
        writer.write(b"*1\r\n$4\r\nPING\r\n")  # straight to the socket, as the log writes
        time.sleep(0.2)  # noqa: ASYNC251 - block the loop: the reply waits unseen by asyncio
        assert idle_socket_readable(conn)
        assert await conn.read_response() in (b"PONG", "PONG")
    finally:
        await conn.disconnect()


async def test_a_password_in_the_url_stays_out_of_error_messages() -> None:
    """The URL is quoted in errors (which reach logs and, for 503s, clients): its password not."""
    from streamwire.log.redis import RedisLog
    from streamwire.log.redis._commands import redacted_url

    assert redacted_url("redis://app:s3cret@10.0.0.1:6379/2") == "redis://app:***@10.0.0.1:6379/2"
    assert redacted_url("redis://:s3cret@h:1/0") == "redis://:***@h:1/0"
    assert redacted_url("redis://h:1/0") == "redis://h:1/0"
    log = RedisLog("redis://app:s3cret@127.0.0.1:1/0", command_timeout=0.5)
    try:
        with pytest.raises(LogError) as caught:
            await log.create_stream("s")
    finally:
        await log.aclose()
    assert "s3cret" not in str(caught.value)
    assert "app:***@127.0.0.1:1" in str(caught.value)
