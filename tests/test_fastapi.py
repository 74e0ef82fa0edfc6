"""The FastAPI host app of docs/guides/fastapi.md, exactly as written there, as a real server
process: uvicorn and granian, a real reader attached, a real SIGINT / SIGTERM; its OpenAPI
document and routing errors."""

from __future__ import annotations

import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from helpers.processes import Proc, frames_until_close, free_port
from streamwire.frames import CaughtUpFrame, ChunkFrame, FailFrame

pytestmark = pytest.mark.anyio

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "fastapi.md"
HOST_APP = re.search(r"<!-- fastapi-host[^>]*-->\n```python\n(.*?)```", GUIDE.read_text(), re.S)
BIN = Path(sys.executable).parent
TOKEN = "fastapi-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GRACE = 5.0  # create_app's default shutdown_grace_period


@pytest.fixture
def host(tmp_path: Path) -> Path:
    assert HOST_APP is not None, "docs/guides/fastapi.md lost its FastAPI host app block"
    (tmp_path / "host.py").write_text(HOST_APP.group(1))
    return tmp_path


def start(server: str, host_dir: Path, port: int) -> Proc:
    argv = {"uvicorn": [str(BIN / "uvicorn"), "host:app", "--host", "127.0.0.1",
                        "--port", str(port), "--app-dir", str(host_dir)],
            "granian": [str(BIN / "granian"), "--interface", "asgi", "--host", "127.0.0.1",
                        "--port", str(port), "--workers", "1", "--working-dir", str(host_dir),
                        "host:app"]}[server]
    return Proc(argv, {"STREAMWIRE_TOKEN": TOKEN})


async def wait_up(base: str) -> None:
    with anyio.fail_after(20):
        while True:
            try:
                async with httpx.AsyncClient(base_url=base) as client:
                    if (await client.get("/health")).status_code == 200:
                        return
            except httpx.TransportError:
                pass
            await anyio.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("server", ["uvicorn", "granian"])
async def test_a_signal_ends_open_streams_and_the_server_exits(
        server: str, sig: signal.Signals, host: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(server, host, port)
    try:
        await wait_up(base)
        async with httpx.AsyncClient(base_url=base, timeout=15) as client:
            assert (await client.put("/streams/live", headers=AUTH)).status_code == 200
            assert (await client.post("/streams/live/chunks", headers=AUTH,
                                      json=[{"step": 0, "chunk": "hi"}])).status_code == 200
            frames: list[Any] = []
            async with client.stream("GET", "/streams/live/sse") as resp:
                assert resp.status_code == 200
                with anyio.fail_after(GRACE + 5):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(frames_until_close, resp, frames)
                        while len(frames) < 2:  # noqa: ASYNC110 (chunk and caught-up: live)
                            await anyio.sleep(0.01)
                        started = time.monotonic()
                        proc.popen.send_signal(sig)
        code = await anyio.to_thread.run_sync(proc.popen.wait, GRACE + 5)
        elapsed = time.monotonic() - started
    finally:
        proc.stop()
    assert isinstance(frames[0], ChunkFrame)
    assert frames[1] == CaughtUpFrame(head=1)
    assert len(frames) == 3, frames
    assert isinstance(frames[2], FailFrame)
    assert (frames[2].recoverable, frames[2].error_detail) == (True, {"code": "SERVER_SHUTDOWN"})
    assert elapsed < GRACE
    assert code in (0, -sig)  # uvicorn re-raises the signal it stopped on to die of it
    assert not [line for line in proc.lines if "Traceback" in line], "\n".join(proc.lines)


async def test_the_host_documents_the_stream_routes_and_answers_405(host: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start("uvicorn", host, port)
    try:
        await wait_up(base)
        async with httpx.AsyncClient(base_url=base) as client:
            doc = (await client.get("/openapi.json")).json()
            docs = await client.get("/docs")
            wrong = await client.post("/streams/x/sse")
            put_only = await client.get("/streams/x")
            unknown = await client.get("/nothing/here/at/all")
    finally:
        proc.stop()
    assert "/health" in doc["paths"]  # the host's own routes stay
    assert set(doc["paths"]["/streams/{stream_id}/sse"]) == {"get"}
    assert "post" in doc["paths"]["/streams/{stream_id}/chunks"]
    schemas = doc["components"]["schemas"]
    assert "streamwire.StreamInfo" in schemas
    refs = re.findall(r'"\$ref":\s*"#/components/(\w+)/([^"]+)"', str(doc).replace("'", '"'))
    assert refs
    assert all(name in doc["components"][kind] for kind, name in refs)
    assert docs.status_code == 200
    assert "/openapi.json" in docs.text
    assert wrong.status_code == 405
    assert set(wrong.headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}
    assert wrong.json() == {"status": 405, "error": wrong.json()["error"]}
    assert "POST /streams/x/sse" in wrong.json()["error"]
    assert put_only.status_code == 405
    assert put_only.headers["allow"] == "PUT"
    assert unknown.status_code == 404
    assert unknown.json()["status"] == 404
