"""RedisLog on one Redis against RedisLog on a 3-master Redis Cluster, same workloads, taking turns.

``python -m bench cluster``: one Redis on 127.0.0.1:6379 (``STREAMWIRE_BENCH_REDIS`` overrides
it) and a private local cluster this benchmark starts (three ``redis-server --cluster-enabled``
on free ports, as the tests do: ``tests/log/redis_proc.py``), or ``STREAMWIRE_BENCH_CLUSTER``
(a ``redis-cluster://`` URL). Every key lives under a fresh prefix and is deleted at the end.

On one machine the cluster's three servers share its cores, so this shows the client's cost of
routing by slot and of sharded pub/sub, not what three machines would add.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from bench._harness import machine_line, table

URL = os.environ.get("STREAMWIRE_BENCH_REDIS", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parent.parent
CHUNK = b'{"type":"text-delta","delta":"hello "}'
SEQUENTIAL = 1000
WRITERS, PER_WRITER = 50, 100
READERS, FAN_CHUNKS = 200, 500


@contextlib.contextmanager
def _cluster() -> Iterator[str]:
    given = os.environ.get("STREAMWIRE_BENCH_CLUSTER")
    if given:
        yield given
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from log.redis_proc import redis_cluster

    with tempfile.TemporaryDirectory() as tmp, redis_cluster(Path(tmp)) as cluster:
        yield cluster.url


async def _measure(url: str) -> dict[str, float]:
    """One round of the three workloads on a fresh ``RedisLog`` at ``url``."""
    from streamwire.frames import EndFrame
    from streamwire.log.redis import RedisLog

    log = RedisLog(url, prefix=f"swbench:{uuid.uuid4().hex[:12]}")
    out: dict[str, float] = {}
    try:
        await log.create_stream("seq")
        start = time.perf_counter()
        for _ in range(SEQUENTIAL):
            await log.append("seq", 0, CHUNK)
        out["sequential"] = SEQUENTIAL / (time.perf_counter() - start)

        ids = [f"w{i}" for i in range(WRITERS)]
        await asyncio.gather(*[log.create_stream(i) for i in ids])

        async def write(sid: str) -> None:
            for _ in range(PER_WRITER):
                await log.append(sid, 0, CHUNK)

        start = time.perf_counter()
        await asyncio.gather(*[write(i) for i in ids])
        out["concurrent"] = WRITERS * PER_WRITER / (time.perf_counter() - start)

        await log.create_stream("fan")

        async def read() -> int:
            async for frame in log.read("fan"):
                if isinstance(frame, EndFrame):
                    return 1
            return 0

        readers = [asyncio.create_task(read()) for _ in range(READERS)]
        await asyncio.sleep(0.5)  # every reader subscribed and caught up
        start = time.perf_counter()
        for _ in range(FAN_CHUNKS):
            await log.append("fan", 0, CHUNK)
        await log.end_stream("fan")
        ended = sum(await asyncio.gather(*readers))
        out["fanout"] = time.perf_counter() - start
        out["ended"] = ended
    finally:
        await log.purge()
        await log.aclose()
    return out


async def _amain(rounds: int, cluster_url: str) -> str:
    await _measure(URL)  # warm-up: scripts loaded, imports done
    await _measure(cluster_url)
    runs: dict[str, list[dict[str, float]]] = {"one Redis": [], "3-master cluster": []}
    for n in range(rounds):  # taking turns, the order flipped each round
        order = [("one Redis", URL), ("3-master cluster", cluster_url)]
        for name, url in order if n % 2 == 0 else order[::-1]:
            runs[name].append(await _measure(url))
    rows = []
    for name, results in runs.items():
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        every = all(r["ended"] == READERS for r in results)
        rows.append([name, med["sequential"], med["concurrent"], med["fanout"],
                     "all" if every else "SOME READERS DID NOT END"])
    return "\n".join([
        "## Redis log: one server vs a Redis Cluster", "",
        f"{machine_line(['redis', 'msgspec'])}; Redis at {URL}; the cluster's three masters on "
        f"this machine; median of {rounds} rounds.", "",
        table("One Redis vs a 3-master cluster",
              ["log", f"appends/s, 1 writer ({SEQUENTIAL})",
               f"appends/s, {WRITERS} writers x {WRITERS} streams",
               f"s: {FAN_CHUNKS} chunks to {READERS} readers", "readers ended"], rows),
    ])


def main(rounds: int) -> str:
    with _cluster() as cluster_url:
        return asyncio.run(_amain(rounds, cluster_url))


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
