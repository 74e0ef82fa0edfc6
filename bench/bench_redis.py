"""RedisLog: append throughput against ``redis-benchmark``'s XADD rate, and fan-out of one stream
to 1,000 readers in two processes, on the same Redis server in one run.

``python -m bench redis`` (Redis on 127.0.0.1:6379; ``STREAMWIRE_BENCH_REDIS`` overrides the
URL). Every key it writes lives under a fresh prefix and is deleted at the end.

The limit is ``redis-benchmark -q -n 100000 XADD <key> * f v``: 50 clients, one bare XADD per
request. One streamwire append does more in Redis (a Lua script: status check, HINCRBY, XADD,
retention check, PUBLISH), and its client is Python, so the ratio is what a user gets compared
with the server's raw speed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench._harness import machine_line, table

URL = os.environ.get("STREAMWIRE_BENCH_REDIS", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parent.parent
#: Chunks per append round and per fan-out run; readers per fan-out process.
APPENDS = 2000
FANOUT_CHUNKS = 1000
FANOUT_READERS = 500
CHUNK = b'{"type":"text-delta","delta":"hello "}'


def _host_port() -> tuple[str, int]:
    rest = URL.split("://", 1)[1].split("/", 1)[0]
    host, _, port = rest.rpartition(":")
    return host or "127.0.0.1", int(port or 6379)


def redis_benchmark_xadd(key: str) -> float | None:
    """requests/s of ``redis-benchmark ... XADD key * f v`` (None without the binary)."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return None
    host, port = _host_port()
    done = subprocess.run(
        [exe, "-h", host, "-p", str(port), "-q", "-n", "100000", "XADD", key, "*", "f", "v"],
        capture_output=True, timeout=300, check=True)
    # -q prints progress lines separated by \r, then "XADD ...: N requests per second, ..."
    rates = re.findall(r"([\d.]+) requests per second", done.stdout.decode())
    return float(rates[-1])


async def _median(fn: Callable[[], Awaitable[None]], rounds: int) -> float:
    await fn()  # warm-up (scripts loaded, connections open)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def append_rates(prefix: str, rounds: int) -> list[tuple[str, float]]:
    from streamwire.log.redis import RedisLog

    log = RedisLog(URL, prefix=prefix)
    run = 0

    async def fresh() -> str:
        nonlocal run
        run += 1
        await log.create_stream(f"a{run}")
        return f"a{run}"

    async def single() -> None:
        sid = await fresh()
        for _ in range(APPENDS):
            await log.append(sid, 0, CHUNK)

    def concurrent(writers: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:  # one writer per stream, as a server with that many runs
            sids = [await fresh() for _ in range(writers)]

            async def one(sid: str) -> None:
                for _ in range(APPENDS // writers):
                    await log.append(sid, 0, CHUNK)

            await asyncio.gather(*(one(s) for s in sids))

        return run

    async def batched() -> None:  # append_many: 20 chunks per script
        sid = await fresh()
        for _ in range(APPENDS // 20):
            await log.append_many(sid, [(0, CHUNK)] * 20)

    try:
        out = []
        for name, fn in (("append, one at a time", single),
                         ("append, 16 concurrent writers", concurrent(16)),
                         ("append, 50 concurrent writers (as redis-benchmark)", concurrent(50)),
                         ("append_many, 20 per call", batched)):
            out.append((name, APPENDS / await _median(fn, rounds)))
        return out
    finally:
        await log.purge()
        await log.aclose()


async def _worker_line(proc: asyncio.subprocess.Process, until: str) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = await proc.stdout.readline()
        if not line:
            err = await proc.stderr.read() if proc.stderr else b""
            raise RuntimeError(f"fan-out worker ended early: {err.decode()}")
        msg: dict[str, Any] = json.loads(line)
        if until in msg or "bad" in msg:
            return msg


async def fanout(prefix: str) -> tuple[float, int, bool]:
    """Seconds from the first append until both processes' 1,000 readers had every chunk."""
    from streamwire.log.redis import RedisLog

    log = RedisLog(URL, prefix=prefix)
    try:
        await log.create_stream("fan")
        procs = [await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.bench_redis", "worker", prefix, str(FANOUT_READERS),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        try:
            for proc in procs:
                await _worker_line(proc, "ready")
            start = time.perf_counter()
            for _ in range(FANOUT_CHUNKS):
                await log.append("fan", 0, CHUNK)
            await log.end_stream("fan")
            results = [await _worker_line(p, "ok") for p in procs]
            seconds = time.perf_counter() - start
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()
        ok = all(r.get("ok") == FANOUT_READERS for r in results)
        return seconds, sum(int(r.get("ok", 0)) for r in results), ok
    finally:
        await log.purge()
        await log.aclose()


async def _worker(prefix: str, readers: int) -> None:
    """One fan-out process: ``readers`` readers of one stream (one Redis subscription)."""
    from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame
    from streamwire.log.redis import RedisLog

    log = RedisLog(URL, prefix=prefix)
    attached = 0
    ready = asyncio.Event()

    async def one() -> bool:
        nonlocal attached
        want = 1
        async for frame in log.read("fan", 0):
            if isinstance(frame, ChunkFrame):
                if frame.sequence != want or bytes(frame.chunk) != CHUNK:
                    return False
                want += 1
            elif isinstance(frame, CaughtUpFrame):
                attached += 1
                if attached == readers:
                    ready.set()
            elif isinstance(frame, EndFrame):
                return want == FANOUT_CHUNKS + 1
        return False

    try:
        tasks = [asyncio.ensure_future(one()) for _ in range(readers)]
        await ready.wait()
        print(json.dumps({"ready": readers}), flush=True)
        results = await asyncio.gather(*tasks)
        good = sum(results)
        print(json.dumps({"ok": good} if good == readers else {"bad": readers - good}),
              flush=True)
    finally:
        await log.aclose()


async def _amain(rounds: int) -> str:
    prefix = f"swbench:{uuid.uuid4().hex}"
    xadd_key = f"{prefix}:redis-benchmark"
    try:
        limit = await asyncio.to_thread(redis_benchmark_xadd, xadd_key)
        rates = await append_rates(prefix, rounds)
        seconds, readers, ok = await fanout(prefix)
    finally:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(URL)
        try:
            await client.unlink(xadd_key)
        finally:
            await client.aclose()
    rows: list[list[object]] = []
    if limit is not None:
        rows.append(["redis-benchmark XADD (50 clients, the limit)", limit, "1.00"])
    for name, rate in rates:
        rows.append([name, rate, f"{rate / limit:.2f}" if limit else "n/a"])
    # like for like: 50 concurrent clients, one chunk per request, as redis-benchmark runs
    same = dict(rates)["append, 50 concurrent writers (as redis-benchmark)"]
    verdict = ("n/a (redis-benchmark not installed)" if limit is None
               else f"{same / limit:.2f}x the XADD rate with 50 concurrent writers, one chunk "
                    f"per append ({'meets' if same >= 0.3 * limit else 'below'} the 0.3x bar)")
    delivered = readers * FANOUT_CHUNKS
    fan_rows = [[f"{FANOUT_CHUNKS} chunks to 2 x {FANOUT_READERS} readers",
                 "every chunk to every reader, in order" if ok else "MISSING OR OUT OF ORDER",
                 seconds, delivered / seconds]]
    return "\n".join([
        "## Redis log", "",
        f"{machine_line(['redis', 'msgspec'])}; Redis at {URL}; median of {rounds} rounds of "
        f"{APPENDS} appends of {len(CHUNK)} B chunks.", "",
        table("Append throughput (appends/s)", ["what", "appends/s", "x limit"], rows),
        f"Append: {verdict}.", "",
        table("Fan-out of one stream, two processes", ["run", "verified", "seconds",
                                                        "deliveries/s"], fan_rows),
    ])


def main(rounds: int) -> str:
    return asyncio.run(_amain(rounds))


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(_worker(sys.argv[2], int(sys.argv[3])))
    else:
        print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
