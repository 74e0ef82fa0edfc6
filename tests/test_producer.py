"""The idempotent producer client over real sockets: real uvicorn on 127.0.0.1 serving a real
MemoryLog's idempotent appends (``helpers.producer_app`` answers the producer routes until the
server side is on main), a chaos proxy that cuts answers after the server stored the write, and
the scripted server for exact answers. Every stream is read back with the resumable reader."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from helpers.chaos_proxy import ChaosConfig, ChaosProxy, ServerThread
from helpers.producer_app import ProducerApp
from helpers.scripted import Reply, Scripted
from streamwire.client import AsyncProducer, AsyncResumableStream, Producer, RetryPolicy
from streamwire.errors import (
    ProducerEpochError,
    ProducerSequenceError,
    ResponseStatusError,
    RetriesExhaustedError,
)

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=8, backoff_initial=0.01, backoff_max=0.05, jitter=0.1)


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, ProducerApp]]:
    from streamwire.log.memory import MemoryLog

    app = ProducerApp(MemoryLog())
    with ServerThread(app) as thread:
        yield thread.url, app


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


async def test_append_end_and_the_sequences_come_back(
        server: tuple[str, ProducerApp]) -> None:
    url, app = server
    await create(url, "s")
    async with httpx.AsyncClient() as client, AsyncProducer(client, url, "s", retry=FAST,
                                                            producer_id="p1") as producer:
        assert await producer.append([(0, {"n": 0}), (0, {"n": 1})]) == [1, 2]
        assert await producer.append_chunk(1, "x") == 3
        await producer.end("completed", usage={"tokens": 3})
        assert producer.seq == 3
    assert await read_back(url, "s") == ([{"n": 0}, {"n": 1}, "x"], "completed")
    assert [(route, h["producer-seq"]) for route, h in app.requests] == [
        ("chunks", "0"), ("chunks", "1"), ("end", "2")]
    assert all(h["producer-id"] == "p1" and h["producer-epoch"] == "0" for _, h in app.requests)


async def test_a_lost_or_unknown_answer_is_retried_with_the_same_seq_and_stored_once(
        server: tuple[str, ProducerApp]) -> None:
    url, app = server
    await create(url, "lost")
    app.faults = ["unknown", "not-stored", "unknown"]  # 504 after storing, 503, 504 again
    # and the proxy cuts the first two answers mid-header, after the server stored the write
    config = ChaosConfig(min_budget=20, max_budget=20, max_cuts=2)
    async with ChaosProxy(int(url.rsplit(":", 1)[1]), seed=3, config=config) as proxy:
        base = f"http://127.0.0.1:{proxy.port}"
        async with httpx.AsyncClient() as client, AsyncProducer(
                client, base, "lost", retry=FAST, keepalive_interval=None) as producer:
            first = await producer.append([(0, i) for i in range(3)])
            second = await producer.append([(0, i) for i in range(3, 5)])
            await producer.end()
    assert proxy.cuts == 2
    assert (first, second) == ([1, 2, 3], [4, 5])  # the original sequences, each time
    assert await read_back(url, "lost") == ([0, 1, 2, 3, 4], "completed")
    seqs = [h["producer-seq"] for route, h in app.requests if route == "chunks"]
    assert seqs[0] == "0"
    assert seqs[-1] == "1"
    assert len(seqs) > 3  # retried, always with the batch's own seq
    assert sorted(set(seqs)) == ["0", "1"]


async def test_the_sync_producer_retries_the_same_way(server: tuple[str, ProducerApp]) -> None:
    url, app = server
    await create(url, "sync")
    app.faults = ["unknown", "not-stored"]

    def produce() -> list[int]:
        with httpx.Client() as client, Producer(client, url, "sync", retry=FAST,
                                                keepalive_interval=None) as producer:
            sequences = producer.append([(0, "a"), (0, "b")])
            producer.fail("tool crashed", recoverable=False, error_detail={"code": "TOOL"})
            return sequences

    assert await anyio.to_thread.run_sync(produce) == [1, 2]
    async with httpx.AsyncClient() as client:
        info = (await client.get(f"{url}/streams/sync/info")).json()
    assert (info["head"], info["status"]) == (2, "failed")


async def test_a_seq_gap_is_a_final_typed_error(server: tuple[str, ProducerApp]) -> None:
    url, _ = server
    await create(url, "gap")
    async with httpx.AsyncClient() as client:
        producer = AsyncProducer(client, url, "gap", retry=FAST, seq=4, keepalive_interval=None)
        with pytest.raises(ProducerSequenceError) as info:
            await producer.append_chunk(0, "x")
        assert (info.value.expected, info.value.received) == (0, 4)
        with pytest.raises(ProducerSequenceError) as again:
            await producer.append_chunk(0, "y")
        assert again.value is info.value  # final: the producer refuses every later call


async def test_an_older_epoch_is_fenced(server: tuple[str, ProducerApp]) -> None:
    url, app = server
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
        requests = len(app.requests)
        with pytest.raises(ProducerEpochError):
            await old.end()
        assert len(app.requests) == requests  # refused without a request


async def test_a_refusal_is_not_retried_and_does_not_use_up_the_seq(
        server: tuple[str, ProducerApp]) -> None:
    url, app = server
    await create(url, "bad")
    async with httpx.AsyncClient() as client:
        producer = AsyncProducer(client, url, "bad", retry=FAST, keepalive_interval=None)
        with pytest.raises(ResponseStatusError) as info:
            await producer.end("finished")  # type: ignore[arg-type]  # not an end status
        assert info.value.status_code in (400, 409, 422)
        assert not info.value.retryable
        assert producer.seq == 0
        assert await producer.append_chunk(0, "ok") == 1  # seq 0 is still the next one
    assert len(app.requests) == 2


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


async def test_an_idle_producer_sends_keepalives_and_a_busy_one_does_not(
        server: tuple[str, ProducerApp]) -> None:
    url, app = server
    await create(url, "idle")
    async with httpx.AsyncClient() as client, AsyncProducer(
            client, url, "idle", retry=FAST, keepalive_interval=0.2) as producer:
        for i in range(10):
            await producer.append_chunk(0, i)
            await anyio.sleep(0.05)
        assert app.keepalives == 0  # writing keeps the lease: no keepalive needed
        await anyio.sleep(1.1)
        assert 3 <= app.keepalives <= 7
    stopped = app.keepalives
    await anyio.sleep(0.5)
    assert app.keepalives == stopped  # none after the producer closed

    def sync_idle() -> None:
        with httpx.Client() as sync_client, Producer(sync_client, url, "idle",
                                                     keepalive_interval=0.2):
            import time

            time.sleep(1.1)

    await anyio.to_thread.run_sync(sync_idle)
    assert app.keepalives - stopped >= 3
    assert all(not h for route, h in app.requests if route == "keepalive")
