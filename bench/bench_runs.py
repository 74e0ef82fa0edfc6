"""Runs: what a run adds over a bare stream, and how many trivial runs a server completes.

* **Latency** (p50 / p99, ms): a run, ``AsyncDispatcher.start()`` -> its first chunk at the
  dispatcher (``POST /runs``, the record inserted, the stream created, the agent scheduled and its
  first ``emit``, then ``GET /runs/{id}/sse``), against a bare stream whose first chunk is
  already written: ``GET /streams/{id}/sse`` -> that chunk at an ``AsyncResumableStream`` (the
  floor of any read). The difference is what a run adds. Sequential, one at a time.
* **Throughput** (runs/s): trivial runs (one chunk, then return) started and followed to their
  outcome by 16 concurrent dispatcher tasks, each run ends ``completed``.
* **A keep-alive request** (p50, ms): ``GET /healthz`` on the dispatcher's open connection, the
  floor under every figure above.

Server: ``streamwire serve --agent bench.bench_runs:trivial`` in a process of its own
(``bench._serve``; its default event loop: uvloop when installed), on each backend. It used to be
uvicorn in a thread of this process, where the client's loop and the server's took turns at one
GIL. Everything runs on this 2-core machine, so the figures are ratios, not capacities.
"""

from __future__ import annotations

import socket
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import httpx

from bench._harness import machine_line, table
from bench._serve import AUTH, served
from streamwire.chat import Chat
from streamwire.client import AsyncDispatcher, AsyncResumableStream, RetryPolicy
from streamwire.frames import RemoteOutcomeKind
from streamwire.runs import Completed, RunContext

CONCURRENCY = 16


async def trivial(run: RunContext[Chat]) -> Completed:
    """One chunk, then done."""
    await run.emit(Chat.chunk({"chunk": "hi"}))
    return Completed(output="ok")


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (statistics.median(ordered) * 1000,
            ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000)


async def _latencies(base: str, n: int) -> tuple[list[float], list[float], list[float]]:
    runs: list[float] = []
    bare: list[float] = []
    plain: list[float] = []
    async with httpx.AsyncClient(base_url=base, headers=AUTH) as client:
        d = AsyncDispatcher(client, base, retry=RetryPolicy(backoff_initial=0.01))
        chunk = [{"step": 0, "chunk": {"event": "chunk", "data": {"chunk": "hi"}}}]
        for _ in range(n):
            start = time.perf_counter()
            run = await d.start("trivial")
            async for _ in run:
                runs.append(time.perf_counter() - start)
                break
            await run.result()
            sid = uuid.uuid4().hex
            await client.put(f"/streams/{sid}")
            await client.post(f"/streams/{sid}/chunks", json=chunk)
            start = time.perf_counter()
            async with AsyncResumableStream(client, f"{base}/streams/{sid}/sse") as stream:
                async for _ in stream:
                    bare.append(time.perf_counter() - start)
                    break
            await client.post(f"/streams/{sid}/end", json={"status": "completed"})
            start = time.perf_counter()
            await client.get("/healthz")
            plain.append(time.perf_counter() - start)
    return runs, bare, plain


async def _throughput(base: str, total: int) -> float:
    done = 0
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=CONCURRENCY * 2),
                                 headers=AUTH) as client:
        d = AsyncDispatcher(client, base)

        async def worker(count: int) -> None:
            nonlocal done
            for _ in range(count):
                outcome = await (await d.start("trivial")).result()
                assert outcome.kind is RemoteOutcomeKind.COMPLETED
                done += 1

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(CONCURRENCY):
                tg.start_soon(worker, total // CONCURRENCY)
        elapsed = time.perf_counter() - start
    return done / elapsed


def _backends(tmp: Path) -> list[tuple[str, list[str]]]:
    """Each backend's ``serve`` flags: memory, SQLite, and Redis when one answers on 6379."""
    backends = [("memory", ["--log", "memory"]), ("sqlite", ["--log", f"sqlite:{tmp}/runs.db"])]
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            backends.append(("redis", ["--log", "redis://127.0.0.1:6379/0", "--redis-prefix",
                                       f"bench-runs-{uuid.uuid4().hex[:8]}"]))
    except OSError:
        pass
    return backends


def main(rounds: int = 7) -> str:
    """The markdown report (``python -m bench runs``); ``rounds`` scales the sample counts."""
    n = max(40, rounds * 15)
    total = CONCURRENCY * max(8, rounds * 3)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in _backends(Path(tmp)):
            with served(*flags, "--agent", "bench.bench_runs:trivial") as base:
                runs, bare, plain = anyio.run(_latencies, base, n)
                rate = anyio.run(_throughput, base, total)
            run_p50, run_p99 = _ms(runs)
            bare_p50, bare_p99 = _ms(bare)
            rows.append([name, _ms(plain)[0], bare_p50, bare_p99, run_p50, run_p99,
                         run_p50 - bare_p50, rate])
    return table(
        f"Runs: start -> first chunk at the dispatcher vs a bare stream ({n} sequential each), "
        f"and trivial runs completed per second ({total} runs, {CONCURRENCY} concurrent "
        f"dispatchers)",
        ["backend", "request p50 ms", "bare p50 ms", "bare p99 ms", "run p50 ms", "run p99 ms",
         "added p50 ms", "runs/s"], rows) + (
        f"\nServer: streamwire serve in its own process. "
        f"{machine_line(['httpx', 'uvicorn', 'uvloop', 'redis'])}\n")


if __name__ == "__main__":
    print(main())
