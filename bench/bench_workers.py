"""``streamwire serve --workers N`` against one worker: deliveries per second for the same readers.

``streamwire serve --workers N`` (its own processes) over a shared log (SQLite file, Redis); the
client is this process: ``READERS`` SSE readers over ``STREAMS`` streams, on raw asyncio
connections (the kernel spreads them over the workers), and one writer that appends
``CHUNKS`` chunks to each stream in batches of ``BATCH``, then ends it. A round is timed from
the first append until every reader has its stream's ``end``; every reader must have read every
chunk (counted). Deliveries per second = readers * chunks / time; the ratio is N workers over one.

The client's own CPU is measured too (``time.process_time`` of this process over the round): on a
machine with fewer cores than workers plus client, the workers and the client share them, and
the ratio says so.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from typing import Final

import httpx

from bench._harness import machine_line, table
from bench._serve import AUTH, served

READERS: Final = 400
STREAMS: Final = 8
CHUNKS: Final = 500
BATCH: Final = 50
REDIS_URL: Final = os.environ.get("STREAMWIRE_TEST_REDIS", "redis://127.0.0.1:6379/0")
_CHUNK: Final = {"event": "chunk", "data": {"chunk": "word "}}


async def _reader(port: int, stream_id: str, ready: asyncio.Event, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /streams/{stream_id}/sse HTTP/1.1\r\nHost: bench\r\n"
                 f"Authorization: {AUTH['Authorization']}\r\n\r\n".encode())
    await writer.drain()
    seen = 0
    tail = b""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                raise RuntimeError(f"stream {stream_id}: the connection closed early")
            if not ready.is_set() and b"caught-up" in tail + data:
                ready.set()
            seen += data.count(b"event: chunk")
            if b"event: end" in tail + data:
                break
            tail = data[-16:]
    finally:
        writer.close()
    counts.append(seen)


async def _round(base: str) -> tuple[float, float]:
    port = int(base.rsplit(":", 1)[1])
    ids = [f"w-{uuid.uuid4().hex[:10]}" for _ in range(STREAMS)]
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=60) as client:
        for stream_id in ids:
            (await client.put(f"/streams/{stream_id}")).raise_for_status()
        counts: list[int] = []
        readies = [asyncio.Event() for _ in range(READERS)]
        tasks = [asyncio.create_task(_reader(port, ids[i % STREAMS], readies[i], counts))
                 for i in range(READERS)]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
        cpu, start = time.process_time(), time.perf_counter()
        batch = [{"step": 1, "chunk": _CHUNK}] * BATCH

        async def write(stream_id: str) -> None:
            for _ in range(CHUNKS // BATCH):
                (await client.post(f"/streams/{stream_id}/chunks", json=batch)).raise_for_status()
            (await client.post(f"/streams/{stream_id}/end",
                               json={"status": "completed"})).raise_for_status()

        await asyncio.gather(*(write(s) for s in ids))
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        took, client_cpu = time.perf_counter() - start, time.process_time() - cpu
    if sorted(set(counts)) != [CHUNKS]:
        raise RuntimeError(f"a reader missed chunks: {sorted(set(counts))}")
    return took, client_cpu


def _measure(log: str, workers: int, rounds: int) -> tuple[float, float]:
    prefix = f"bench-workers-{uuid.uuid4().hex[:8]}"
    try:
        with served("--workers", str(workers), "--log", log, "--redis-prefix", prefix,
                    "--max-connections", "100000", "--max-connections-per-stream",
                    "100000") as base:
            asyncio.run(_round(base))  # warm-up
            runs = [asyncio.run(_round(base)) for _ in range(rounds)]
    finally:
        if log.startswith("redis"):
            _purge(prefix)
    took = statistics.median(t for t, _ in runs)
    return READERS * CHUNKS / took, statistics.median(c for _, c in runs) / took


def _purge(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.unlink(key)
    finally:
        client.close()


def main(rounds: int) -> str:
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, log in (("SQLite", f"sqlite:{tmp}/w.db"),
                          ("Redis", REDIS_URL)):
            one, one_cpu = _measure(log, 1, rounds)
            two, two_cpu = _measure(log, 2, rounds)
            rows.append([name, f"{one:,.0f}", f"{two:,.0f}", f"{two / one:.2f}",
                         f"{one_cpu:.0%} / {two_cpu:.0%}"])
    header = ["log", "1 worker deliveries/s", "2 workers deliveries/s", "2 / 1",
              "client CPU (1 / 2 workers)"]
    note = (f"{READERS} SSE readers over {STREAMS} streams, {CHUNKS} chunks each (batches of "
            f"{BATCH}), every chunk counted at every reader; medians of {rounds} rounds; "
            f"{os.cpu_count()} cores shared by the workers and this client.")
    return (table("serve --workers 2 against one worker", header, rows) + "\n" + note + "\n\n"
            + machine_line(["redis", "uvicorn"]) + "\n")
