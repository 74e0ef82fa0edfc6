"""Subprocess roles for the many-process Redis tests, and ``RedisCluster``: a private local
3-master Redis Cluster for the cluster tests (``redis_cluster()``).

``python tests/log/redis_proc.py write URL PREFIX STREAM COUNT DELAY``
    creates the stream (idempotent), appends COUNT chunks ``{"i": k}`` (step k // 10), sleeping
    DELAY seconds between appends, then ends it; prints ``{"head": N}``.
``python tests/log/redis_proc.py read URL PREFIX STREAM CURSOR STOP_AFTER``
    reads from CURSOR and prints one JSON line per frame: ``{"seq": n, "i": k}`` for a chunk,
    ``{"caught_up": head}``, ``{"end": status}``; with STOP_AFTER > 0 it leaves after that many
    chunks and prints ``{"left_at": cursor}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame

if TYPE_CHECKING:
    from streamwire.log.redis import RedisLog


def _out(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def _write(log: RedisLog, stream: str, count: int, delay: float) -> None:
    await log.create_stream(stream)
    for k in range(count):
        await log.append(stream, k // 10, msgspec.json.encode({"i": k}))
        if delay:
            await asyncio.sleep(delay)
    await log.end_stream(stream, "completed")
    _out({"head": (await log.info(stream)).head})


async def _read(log: RedisLog, stream: str, cursor: int, stop_after: int) -> None:
    taken = 0
    async for frame in log.read(stream, cursor):
        if isinstance(frame, ChunkFrame):
            _out({"seq": frame.sequence, "i": json.loads(bytes(frame.chunk))["i"]})
            cursor = frame.sequence
            taken += 1
            if taken == stop_after:
                _out({"left_at": cursor})
                return
        elif isinstance(frame, CaughtUpFrame):
            _out({"caught_up": frame.head})
        elif isinstance(frame, EndFrame):
            _out({"end": frame.status})
        else:
            _out({"other": repr(frame)})


class RedisCluster:
    """Three ``redis-server --cluster-enabled yes`` masters on free ports of 127.0.0.1, joined by
    ``redis-cli --cluster create`` (no replicas); ``url`` is the ``redis-cluster://`` seed list."""

    def __init__(self, directory: Path, masters: int = 3, password: str = "") -> None:
        from helpers.processes import free_port  # here: the subprocess roles run without it

        self.dir = directory
        self.password = password
        auth = ["--requirepass", password, "--masterauth", password] if password else []
        self._auth_flags = auth
        self.ports = [free_port() for _ in range(masters)]
        # the cluster bus port is port + 10,000 unless given: a free port of its own instead
        self.bus_ports = [free_port() for _ in range(masters)]
        self.url = "redis-cluster://" + (f":{password}@" if password else "") + ",".join(
            f"127.0.0.1:{p}" for p in self.ports)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for port, bus in zip(self.ports, self.bus_ports, strict=True):
            node_dir = self.dir / str(port)
            node_dir.mkdir(parents=True, exist_ok=True)
            self.procs.append(subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(node_dir), "--cluster-enabled", "yes",
                 "--cluster-config-file", str(node_dir / "nodes.conf"),
                 "--cluster-port", str(bus), "--cluster-node-timeout", "5000",
                 *self._auth_flags],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in self.ports:
            _wait(lambda port=port: self.cli(port, "PING").strip() == "PONG",
                  f"redis-server on port {port} did not start")
        created = subprocess.run(
            ["redis-cli", *self._cli_auth(), "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, timeout=60, check=False)
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout.decode()}"
                               f"{created.stderr.decode()}")
        for port in self.ports:
            _wait(lambda port=port: "cluster_state:ok" in self.cli(port, "CLUSTER", "INFO"),
                  f"the cluster node on port {port} never reported cluster_state:ok")

    def _cli_auth(self) -> list[str]:
        return ["-a", self.password, "--no-auth-warning"] if self.password else []

    def cli(self, port: int, *args: str) -> str:
        done = subprocess.run(["redis-cli", *self._cli_auth(), "-p", str(port), *args],
                              capture_output=True,
                              timeout=10, check=False)
        return done.stdout.decode()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.wait(timeout=10)


def cluster_problem() -> str | None:
    """Why a local cluster cannot be started here (``None``: it can)."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        return "redis-server / redis-cli not installed (apt-get install redis-server redis-tools)"
    return None


@contextlib.contextmanager
def redis_cluster(directory: Path, password: str = "") -> Iterator[RedisCluster]:
    """A started private cluster in ``directory`` (requiring ``password`` if given), killed at
    exit."""
    cluster = RedisCluster(directory, password=password)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _wait(ready: object, why: str, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(why)
        time.sleep(0.05)


async def main(argv: list[str]) -> None:
    from streamwire.log.redis import RedisLog  # here: the cluster helpers need no redis-py

    role, url, prefix, stream, *rest = argv
    log = RedisLog(url, prefix=prefix)
    try:
        if role == "write":
            await _write(log, stream, int(rest[0]), float(rest[1]))
        elif role == "read":
            await _read(log, stream, int(rest[0]), int(rest[1]))
        else:
            raise SystemExit(f"unknown role {role!r}")
    finally:
        await log.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
