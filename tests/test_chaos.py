"""Chaos: the resumable client behind a proxy that cuts, splits and stalls, and across a server
restart, still delivers exactly the writer's sequence (nothing lost, nothing twice, in order).

Seeded: ``STREAMWIRE_CHAOS_SEED=<n>`` replays a run's proxy decisions (the seed of a failing run is
in its failure message). Each test is bounded (``fail_after``) well under the per-test timeout.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from helpers.chaos_proxy import ChaosProxy, ServerThread
from streamwire.client import AsyncResumableStream, RetryPolicy
from streamwire.frames import ChunkFrame

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CHUNKS = 10_000
MIN_CUTS = 200
# The writer appends BATCH chunks every PAUSE seconds (~10 s for the stream), so the reader meets
# both paths: a replay after every re-attach and live chunks once caught up.
BATCH = 50
PAUSE = 0.04
TIME_LIMIT = 60.0
TOKEN = "chaos-token"
POLICY = RetryPolicy(max_attempts=None, max_elapsed=30, backoff_initial=0.002, backoff_max=0.05)


@pytest.fixture
def seed() -> int:
    env = os.environ.get("STREAMWIRE_CHAOS_SEED")
    return int(env) if env else random.SystemRandom().randrange(2**32)


def _payload(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"token {i} "}


class Writer:
    """Writes the chunks over the HTTP write API and records the sequences the server assigned."""

    def __init__(self, client: httpx.AsyncClient, base: str, stream_id: str) -> None:
        self.client, self.base, self.sid = client, base, stream_id
        self.written: list[tuple[int, dict[str, Any]]] = []
        self.auth = {"Authorization": f"Bearer {TOKEN}"}

    async def create(self) -> None:
        r = await self.client.put(f"{self.base}/streams/{self.sid}", headers=self.auth)
        assert r.status_code < 300, r.text

    async def write(self, first: int, last: int, pause: float = PAUSE) -> None:
        for start in range(first, last, BATCH):
            items = [_payload(i) for i in range(start, min(start + BATCH, last))]
            r = await self.client.post(f"{self.base}/streams/{self.sid}/chunks", headers=self.auth,
                                       json=[{"step": 1, "chunk": c} for c in items])
            assert r.status_code == 200, r.text
            self.written.extend(zip(r.json()["sequences"], items, strict=True))
            await anyio.sleep(pause)

    async def end(self) -> None:
        r = await self.client.post(f"{self.base}/streams/{self.sid}/end", headers=self.auth,
                                   json={"status": "completed"})
        assert r.status_code < 300, r.text


async def _read(url: str, got: list[tuple[int, Any]], *, halfway: anyio.Event | None = None,
                ) -> AsyncResumableStream[ChunkFrame]:
    """Read to the end into ``got`` (kept on a failure); set ``halfway`` at CHUNKS // 4."""
    async with httpx.AsyncClient() as client, AsyncResumableStream(
            client, url, retry=POLICY, idle_timeout=5.0) as stream:
        async for c in stream:
            got.append((c.sequence, msgspec.json.decode(c.chunk)))
            if halfway is not None and len(got) == CHUNKS // 4:
                halfway.set()
    return stream


def _check(seed: int, writer: Writer, got: list[tuple[int, Any]],
           stream: AsyncResumableStream[ChunkFrame], proxy: ChaosProxy) -> None:
    why = f"seed={seed} (replay: STREAMWIRE_CHAOS_SEED={seed}); cuts={proxy.cuts}"
    assert len(writer.written) == CHUNKS, why
    seqs = [s for s, _ in got]
    assert len(seqs) == len(set(seqs)), f"a chunk was delivered twice; {why}"
    assert seqs == sorted(seqs), f"chunks out of order; {why}"
    assert got == writer.written, f"the client's chunks differ from the writer's; {why}"
    assert stream.end_frame is not None, why
    assert stream.end_frame.status == "completed", why
    assert proxy.cuts >= MIN_CUTS, f"only {proxy.cuts} cuts; {why}"


async def test_cutting_splitting_stalling_proxy_loses_nothing_and_repeats_nothing(
        seed: int) -> None:
    from streamwire.log.memory import MemoryLog
    from streamwire.server import bearer_token, create_app

    app = create_app(MemoryLog(), authorize=bearer_token(TOKEN))
    got: list[tuple[int, Any]] = []
    started = time.monotonic()
    with ServerThread(app) as server:
        async with (ChaosProxy(server.port, seed=seed) as proxy,
                    httpx.AsyncClient(timeout=10) as client):
            writer = Writer(client, server.url, "chaos")
            await writer.create()
            result: list[AsyncResumableStream[ChunkFrame]] = []

            async def read() -> None:
                result.append(await _read(f"http://127.0.0.1:{proxy.port}/streams/chaos/sse", got))

            with anyio.fail_after(TIME_LIMIT):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    await writer.write(0, 1000, pause=0)  # a backlog to replay at once
                    await writer.write(1000, CHUNKS)
                    await writer.end()
            _check(seed, writer, got, result[0], proxy)
    print(f"chaos: seed={seed} cuts={proxy.cuts} connections={proxy.connections} "
          f"reattaches={result[0].stats.reattaches} duplicates={result[0].stats.duplicates} "
          f"in {time.monotonic() - started:.1f}s")


# -- a server restart on SQLite ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ServerProcess:
    """``streamwire serve`` on a SQLite file, as a subprocess that can be killed and restarted."""

    def __init__(self, db: Path, port: int) -> None:
        self.db, self.port = db, port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [sys.executable, "-m", "streamwire.cli", "serve", "--log", f"sqlite:{self.db}",
               "--port", str(self.port), "--token", TOKEN]
        # stderr to a file, not a pipe nobody reads: the server logs a line per connection (and
        # per failed send to a cut socket), and a full pipe would block it mid-test
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 (closed in kill())
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.err.seek(0)
                raise RuntimeError(f"streamwire serve exited: {self.err.read().decode()}")
            try:
                httpx.get(f"{self.url}/openapi.json", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("streamwire serve did not start in 20 s")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)  # a crash: no drain, no terminal frame
        self.proc.wait(10)
        self.err.close()


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[ServerProcess]:
    pytest.importorskip("streamwire.log.sqlite")
    server = ServerProcess(tmp_path / "streams.db", _free_port())
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


async def test_server_killed_and_restarted_mid_stream_on_sqlite(
        seed: int, sqlite_server: ServerProcess) -> None:
    server = sqlite_server
    got: list[tuple[int, Any]] = []
    async with (ChaosProxy(server.port, seed=seed) as proxy,
                httpx.AsyncClient(timeout=10) as client):
        writer = Writer(client, server.url, "restart")
        await writer.create()
        result: list[AsyncResumableStream[ChunkFrame]] = []
        halfway = anyio.Event()

        async def read() -> None:
            url = f"http://127.0.0.1:{proxy.port}/streams/restart/sse"
            result.append(await _read(url, got, halfway=halfway))

        with anyio.fail_after(TIME_LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await writer.write(0, CHUNKS // 2)
                await halfway.wait()  # the reader is mid-stream when the server dies
                await anyio.to_thread.run_sync(server.kill)
                await anyio.sleep(0.3)  # the reader meets refused connections meanwhile
                await anyio.to_thread.run_sync(server.start)
                # The restart is invisible to the writer: the stream belongs to its lease
                # (writer_timeout), not to the killed server process, so it just carries on.
                await writer.write(CHUNKS // 2, CHUNKS)
                await writer.end()
        _check(seed, writer, got, result[0], proxy)
    print(f"chaos restart: seed={seed} cuts={proxy.cuts} stats={result[0].stats}")
