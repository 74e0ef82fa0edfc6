"""Streams belong to their writer's lease, not to the server process: ``streamwire serve`` killed
and restarted mid-stream (SIGKILL) keeps the stream active for its producer, a producer that never
comes back ends it with ``fail{recoverable, WRITER_GONE}`` within the writer timeout, and
``POST /keepalive`` keeps a quiet producer's lease."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from conftest import require
from helpers.server import ServeProcess, read_all
from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame, FailFrame

pytestmark = pytest.mark.anyio


@pytest.fixture
def sqlite_serve(tmp_path: Path) -> Iterator[ServeProcess]:
    require(importlib.util.find_spec("streamwire.log.sqlite") is not None, "needs SQLiteLog")
    server = ServeProcess("--log", f"sqlite:{tmp_path / 'streams.db'}", "--writer-timeout", "3")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_a_server_restart_is_invisible_to_a_producer_that_comes_back(
        sqlite_serve: ServeProcess) -> None:
    srv = sqlite_serve
    async with httpx.AsyncClient(base_url=srv.base, headers=srv.auth, timeout=10) as client:
        await client.put("/streams/r")
        first = await client.post("/streams/r/chunks",
                                  json=[{"step": 0, "chunk": i} for i in range(5)])
        assert first.json() == {"sequences": [1, 2, 3, 4, 5]}
        await anyio.to_thread.run_sync(srv.kill)  # mid-stream, no drain
        await anyio.to_thread.run_sync(srv.start)
        nxt = await client.post("/streams/r/chunks", json=[{"step": 0, "chunk": 5}])
        assert nxt.status_code == 200, nxt.text  # not 409 WRITER_GONE
        assert nxt.json() == {"sequences": [6]}
        # a reader re-attaching from its cursor resumes, and sees the end
        async with anyio.create_task_group() as tg:
            got: list[object] = []

            async def read() -> None:
                got.extend(await read_all(client, "r", cursor=3))

            tg.start_soon(read)
            await anyio.sleep(0.3)
            assert (await client.post("/streams/r/end",
                                      json={"status": "completed"})).status_code == 200
        chunks = [f.sequence for f in got if isinstance(f, ChunkFrame)]
        assert chunks == [4, 5, 6]
        assert got[-1] == EndFrame(status="completed")


async def test_a_producer_that_never_comes_back_fails_the_stream_writer_gone(
        sqlite_serve: ServeProcess) -> None:
    srv = sqlite_serve
    async with httpx.AsyncClient(base_url=srv.base, headers=srv.auth, timeout=30) as client:
        await client.put("/streams/gone")
        await client.post("/streams/gone/chunks", json=[{"step": 0, "chunk": 1}])
        started = time.monotonic()
        frames = await read_all(client, "gone")  # attached: no one writes any more
        took = time.monotonic() - started
    assert isinstance(frames[0], ChunkFrame)
    assert frames[1] == CaughtUpFrame(head=1)
    assert isinstance(frames[-1], FailFrame)
    assert frames[-1].recoverable is True
    assert (frames[-1].error_detail or {}).get("code") == "WRITER_GONE"
    assert took < 3 + 3, f"WRITER_GONE after {took:.1f} s (writer timeout 3 s)"


async def test_keepalive_keeps_a_quiet_producers_lease(sqlite_serve: ServeProcess) -> None:
    srv = sqlite_serve
    async with httpx.AsyncClient(base_url=srv.base, headers=srv.auth, timeout=10) as client:
        await client.put("/streams/quiet")
        for _ in range(8):  # 4 s of silence, past the 3 s writer timeout
            alive = await client.post("/streams/quiet/keepalive")
            assert alive.status_code == 200, alive.text
            assert alive.json()["status"] == "active"
            await anyio.sleep(0.5)
        resp = await client.post("/streams/quiet/chunks", json=[{"step": 0, "chunk": 1}])
        assert resp.json() == {"sequences": [1]}
        refused = await client.post("/streams/nope/keepalive")
        assert refused.status_code == 404
        anonymous = await client.post("/streams/quiet/keepalive", headers={"Authorization": ""})
        assert anonymous.status_code == 401
