"""The idempotent producer client over real sockets: the real stream server (uvicorn on 127.0.0.1,
``create_app`` over a MemoryLog, with a short writer lease, or over a private Redis that is frozen
mid-write), a chaos proxy that cuts answers after the server stored the write, and the scripted
server for exact answers. Every stream is read back with the resumable reader."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from helpers.chaos_proxy import ChaosConfig, ChaosProxy
from helpers.scripted import Reply, Scripted
from helpers.server import PrivateRedis, private_redis, serving
from streamwire.client import AsyncProducer, AsyncResumableStream, Producer, RetryPolicy
from streamwire.errors import (
    ProducerEpochError,
    ProducerSequenceError,
    ResponseStatusError,
    RetriesExhaustedError,
)
from streamwire.log.memory import MemoryLog

pytestmark = pytest.mark.anyio
__all__ = ["private_redis"]  # a fixture, used by name

FAST = RetryPolicy(max_attempts=8, backoff_initial=0.01, backoff_max=0.05, jitter=0.1)


@pytest.fixture
def url() -> Iterator[str]:
    with serving(MemoryLog) as running:
        yield running.base


async def create(url: str, sid: str) -> None:
    async with httpx.AsyncClient() as client:
        assert (await client.put(f"{url}/streams/{sid}")).status_code == 200


async def read_back(url: str, sid: str) -> tuple[list[Any], str | None]:
    """Every chunk of the stream (its JSON value) and how it ended."""
    async with (httpx.AsyncClient() as client,
                AsyncResumableStream(client, f"{url}/streams/{sid}/sse") as stream):
        with anyio.fail_after(20):
            got = [json.loads(bytes(frame.chunk)) async for frame in stream]
    return got, stream.end_frame.status if stream.end_frame else None


async def test_append_end_and_the_sequences_come_back(url: str) -> None:
    await create(url, "s")
    async with httpx.AsyncClient() as client, AsyncProducer(client, url, "s", retry=FAST,
                                                            producer_id="p1") as producer:
        assert await producer.append([(0, {"n": 0}), (0, {"n": 1})]) == [1, 2]
        assert await producer.append_chunk(1, "x") == 3
        await producer.end("completed", usage={"tokens": 3})
        assert producer.seq == 3
    assert await read_back(url, "s") == ([{"n": 0}, {"n": 1}, "x"], "completed")


async def test_an_answer_lost_after_the_write_is_retried_with_the_same_seq_and_stored_once(
        url: str) -> None:
    await create(url, "lost")
    # The proxy cuts the first three answers mid-header: the server stored each write.
    config = ChaosConfig(min_budget=20, max_budget=20, max_cuts=3)
    async with ChaosProxy(int(url.rsplit(":", 1)[1]), seed=3, config=config) as proxy:
        base = f"http://127.0.0.1:{proxy.port}"
        async with httpx.AsyncClient() as client, AsyncProducer(
                client, base, "lost", retry=FAST, keepalive_interval=None) as producer:
            first = await producer.append([(0, i) for i in range(3)])
            second = await producer.append([(0, i) for i in range(3, 5)])
            await producer.end()
    assert proxy.cuts == 3
    assert (first, second) == ([1, 2, 3], [4, 5])  # the original sequences, each time
    assert await read_back(url, "lost") == ([0, 1, 2, 3, 4], "completed")


def test_the_sync_producer_retries_the_same_way(url: str) -> None:
    with httpx.Client() as client:
        assert client.put(f"{url}/streams/sync").status_code == 200
    config = ChaosConfig(min_budget=20, max_budget=20, max_cuts=2)

    async def produce() -> list[int]:
        async with ChaosProxy(int(url.rsplit(":", 1)[1]), seed=5, config=config) as proxy:
            base = f"http://127.0.0.1:{proxy.port}"

            def write() -> list[int]:
                with httpx.Client() as client, Producer(client, base, "sync", retry=FAST,
                                                        keepalive_interval=None) as producer:
                    sequences = producer.append([(0, "a"), (0, "b")])
                    producer.fail("tool crashed", error_detail={"code": "TOOL"})
                    return sequences

            sequences = await anyio.to_thread.run_sync(write)
            assert proxy.cuts == 2
            return sequences

    assert anyio.run(produce) == [1, 2]
    info = httpx.get(f"{url}/streams/sync/info").json()
    assert (info["head"], info["status"]) == (2, "failed")


async def test_a_write_whose_log_answer_was_lost_is_retried_until_it_is_known(
        private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture) -> None:
    from streamwire.log.redis import RedisLog

    caplog.set_level(logging.INFO, logger="streamwire.client")

    def log() -> RedisLog:
        return RedisLog(private_redis.url, prefix="swtest-producer", command_timeout=0.5)

    with serving(log) as running:
        await create(running.base, "r")
        async with httpx.AsyncClient() as client, AsyncProducer(
                client, running.base, "r", keepalive_interval=None,
                retry=RetryPolicy(max_attempts=None, max_elapsed=20, backoff_initial=0.2,
                                  backoff_max=0.5)) as producer:
            assert await producer.append_chunk(0, "one") == 1
            os.kill(private_redis.process.pid, signal.SIGSTOP)  # frozen: answers never come
            thaw = threading.Timer(2.0, os.kill, (private_redis.process.pid, signal.SIGCONT))
            thaw.start()
            try:
                with anyio.fail_after(20):
                    assert await producer.append([(0, "two"), (0, "three")]) == [2, 3]
            finally:
                thaw.join()
            await producer.end()
        retried = [r.getMessage() for r in caplog.records if r.name == "streamwire.client"]
        assert any("HTTP 504, outcome unknown" in m for m in retried), retried
        assert await read_back(running.base, "r") == (["one", "two", "three"], "completed")


async def test_503_and_504_are_retried_with_the_same_seq() -> None:
    replies = [Reply(b'{"error": "the stream log failed", "outcome": "unknown"}', status=504,
                     content_type="application/json"),
               Reply(b'{"error": "the stream log failed", "outcome": "not-stored"}', status=503,
                     content_type="application/json", extra_headers={"retry-after": "0"}),
               Reply(b'{"sequences": [7, 8]}', content_type="application/json")]
    with Scripted(replies) as srv:
        async with httpx.AsyncClient() as client:
            producer = AsyncProducer(client, f"http://127.0.0.1:{srv.port}", "s/1",
                                     producer_id="p", epoch=3, seq=41, retry=FAST,
                                     keepalive_interval=None)
            assert await producer.append([(0, 1), (0, 2)]) == [7, 8]
            assert producer.seq == 42
    # three answers are scripted (504, 503, 200); a reply the scripted server's abort cut short on
    # a loaded machine is one more retry of the same request, never another sequence
    assert len(srv.lines) >= 3
    assert set(srv.lines) == {"POST /streams/s%2F1/chunks HTTP/1.1"}
    assert {(r["producer-id"], r["producer-epoch"], r["producer-seq"]) for r in srv.requests} == {
        ("p", "3", "41")}


async def test_a_seq_gap_is_a_final_typed_error(url: str) -> None:
    await create(url, "gap")
    async with httpx.AsyncClient() as client:
        producer = AsyncProducer(client, url, "gap", retry=FAST, seq=4, keepalive_interval=None)
        with pytest.raises(ProducerSequenceError) as info:
            await producer.append_chunk(0, "x")
        assert (info.value.expected, info.value.received) == (0, 4)
        with pytest.raises(ProducerSequenceError) as again:
            await producer.append_chunk(0, "y")
        assert again.value is info.value  # final: the producer refuses every later call


async def test_an_older_epoch_is_fenced(url: str) -> None:
    await create(url, "fence")
    async with httpx.AsyncClient() as client:
        old = AsyncProducer(client, url, "fence", producer_id="w", epoch=1, retry=FAST,
                            keepalive_interval=None)
        assert await old.append_chunk(0, "old") == 1
        new = AsyncProducer(client, url, "fence", producer_id="w", epoch=2, retry=FAST,
                            keepalive_interval=None)
        assert await new.append_chunk(0, "new") == 2
        with pytest.raises(ProducerEpochError) as info:
            await old.append_chunk(0, "zombie")
        assert (info.value.current, info.value.received) == (2, 1)
        with pytest.raises(ProducerEpochError) as again:
            await old.end()  # refused at once, without a request
        assert again.value is info.value
    assert await read_back_head(url, "fence") == 2


async def test_a_refusal_is_not_retried_and_does_not_use_up_the_seq(url: str) -> None:
    await create(url, "bad")
    async with httpx.AsyncClient() as client:
        producer = AsyncProducer(client, url, "bad", retry=FAST, keepalive_interval=None)
        with pytest.raises(ResponseStatusError) as info:
            await producer.end("finished")  # type: ignore[arg-type]  # not an end status
        assert info.value.status_code in (400, 422)
        assert not info.value.retryable
        assert producer.seq == 0
        assert await producer.append_chunk(0, "ok") == 1  # seq 0 is still the next one


async def read_back_head(url: str, sid: str) -> int:
    async with httpx.AsyncClient() as client:
        head: int = (await client.get(f"{url}/streams/{sid}/info")).json()["head"]
    return head


async def test_retries_give_up_and_the_producer_stays_stopped(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="streamwire.client")
    with Scripted([Reply(b'{"outcome": "unknown"}', status=504,
                         content_type="application/json")]) as srv:
        base = f"http://127.0.0.1:{srv.port}"
        async with httpx.AsyncClient() as client:
            producer = AsyncProducer(client, base, "s", retry=RetryPolicy(
                max_attempts=3, backoff_initial=0.01, jitter=0), keepalive_interval=None)
            with pytest.raises(RetriesExhaustedError) as info:
                await producer.append_chunk(0, "x")
            with pytest.raises(RetriesExhaustedError) as again:
                await producer.append_chunk(0, "y")  # its seq's outcome is unknown
    assert again.value is info.value
    assert "max_attempts=3" in str(info.value)
    assert "outcome unknown" in str(info.value)
    assert len(srv.requests) == 4
    assert {r["producer-seq"] for r in srv.requests} == {"0"}
    messages = [r.getMessage() for r in caplog.records if r.name == "streamwire.client"]
    assert any("sending it again in" in m and "(attempt 3)" in m for m in messages), messages


async def test_an_idle_producer_sends_keepalives_and_a_busy_one_does_not() -> None:
    # The scripted server counts the keepalives exactly (the real server's lease test is below).
    with Scripted([Reply(b'{"sequences": [1]}', content_type="application/json")]) as srv:
        base = f"http://127.0.0.1:{srv.port}"

        def keepalives() -> int:
            return srv.lines.count("POST /streams/idle/keepalive HTTP/1.1")

        async with httpx.AsyncClient() as client, AsyncProducer(
                client, base, "idle", retry=FAST, keepalive_interval=0.2) as producer:
            for i in range(10):
                await producer.append_chunk(0, i)
                await anyio.sleep(0.05)
            assert keepalives() == 0  # writing keeps the lease: no keepalive needed
            await anyio.sleep(1.1)
            assert 3 <= keepalives() <= 7
        stopped = keepalives()
        await anyio.sleep(0.5)
        assert keepalives() == stopped  # none after the producer closed

        def sync_idle() -> None:
            with httpx.Client() as sync_client, Producer(sync_client, base, "idle",
                                                         keepalive_interval=0.2):
                time.sleep(1.1)

        await anyio.to_thread.run_sync(sync_idle)
        assert keepalives() - stopped >= 3
    sent = [r for line, r in zip(srv.lines, srv.requests, strict=True) if "keepalive" in line]
    assert all("producer-seq" not in r for r in sent)


async def test_keepalives_stop_on_a_server_without_the_route(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="streamwire.client")
    await create(url, "k")
    async with httpx.AsyncClient() as client, AsyncProducer(
            client, url, "k", retry=FAST, keepalive_interval=0.1) as producer:
        await anyio.sleep(0.6)
        assert await producer.append_chunk(0, "still writes") == 1
    said = [r.getMessage() for r in caplog.records if "keepalive" in r.getMessage()]
    if any("does not serve keepalives" in m for m in said):  # the route is not served (yet)
        assert len(said) == 1, said
    else:
        assert said == []  # the server serves it: nothing to say


async def test_keepalives_hold_an_idle_producers_lease_on_the_real_server() -> None:
    with serving(lambda: MemoryLog(writer_timeout=0.8)) as running:
        url = running.base
        for sid in ("kept", "lapsed"):
            await create(url, sid)
        async with httpx.AsyncClient() as client:
            kept = AsyncProducer(client, url, "kept", retry=FAST, keepalive_interval=0.25)
            lapsed = AsyncProducer(client, url, "lapsed", retry=FAST, keepalive_interval=None)
            async with kept, lapsed:
                assert await kept.append_chunk(0, "a") == 1
                assert await lapsed.append_chunk(0, "a") == 1
                await anyio.sleep(2.5)  # a long tool call: three writer timeouts of silence
                assert await kept.append_chunk(0, "b") == 2
            info = {sid: (await client.get(f"{url}/streams/{sid}/info")).json()
                    for sid in ("kept", "lapsed")}
        assert info["kept"]["status"] == "active"
        assert info["lapsed"]["status"] == "failed"  # its lease lapsed: WRITER_GONE
