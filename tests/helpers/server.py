"""A stream server for tests: uvicorn on 127.0.0.1 in a thread over any backend (memory, SQLite, a
real Redis), and small httpx helpers to read its SSE frames."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from conftest import REDIS_URL, purge_redis_keys, require, require_redis
from streamwire.frames import ChunkFrame, StreamFrame, UnknownFrame, decode_stream_frame
from streamwire.log import StreamLog
from streamwire.log.memory import MemoryLog
from streamwire.server import DrainingServer, StreamApp, create_app, uvicorn_server
from streamwire.sse import SSEDecoder

LogFactory = Callable[[], StreamLog]


@dataclass
class Backend:
    kind: str
    factory: LogFactory
    #: ``streamwire serve --log`` for the same backend (memory: each process its own).
    spec: str
    prefix: str = "streamwire"


@contextlib.contextmanager
def log_backend(kind: str, tmp_path: Path, name: str) -> Iterator[Backend]:
    """A log factory for ``kind`` (memory, sqlite, redis); a Redis prefix of its own, purged after."""
    if kind == "memory":
        yield Backend(kind, MemoryLog, "memory")
    elif kind == "sqlite":
        from streamwire.log.sqlite import SQLiteLog

        path = tmp_path / "streams.db"
        yield Backend(kind, lambda: SQLiteLog(path), f"sqlite:{path}")
    else:
        require_redis()
        from streamwire.log.redis import RedisLog

        prefix = f"swtest-{name}-{uuid.uuid4().hex[:12]}"
        yield Backend(kind, lambda: RedisLog(REDIS_URL, prefix=prefix), REDIS_URL, prefix)
        purge_redis_keys(f"{prefix}:")


@pytest.fixture(params=["memory", "sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogFactory]:
    with log_backend(request.param, tmp_path, "server") as made:
        yield made.factory


@dataclass
class Running:
    base: str
    app: StreamApp
    server: DrainingServer
    thread: threading.Thread

    def stop(self) -> None:
        self.server.handle_exit(signal.SIGTERM, None)
        self.thread.join(15)
        assert not self.thread.is_alive(), "the server did not exit"


@contextlib.contextmanager
def serving(log_factory: LogFactory, *, make_app: Callable[[StreamLog], StreamApp] | None = None,
            **app_options: Any) -> Iterator[Running]:
    """uvicorn on 127.0.0.1:<free port> in a thread, serving ``create_app(log_factory(), ...)``
    (or ``make_app(log)``, for an app that needs the log to build more than the routes)."""
    # IPPROTO_TCP, not a bare socket.socket() (proto 0): asyncio sets TCP_NODELAY only on the
    # connections of a socket that says TCP; without it every two-write answer waits ~40 ms for
    # the client's delayed ACK (docs/concepts/bench-runs.md)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    made: dict[str, Any] = {}
    ready = threading.Event()

    async def main() -> None:
        log = log_factory()
        if "authorize" not in app_options and "token" not in app_options:
            app_options.setdefault("allow_anonymous_writes", True)
        app = create_app(log, **app_options) if make_app is None else make_app(log)
        server = uvicorn_server(app, log_level="warning")
        made.update(app=app, server=server)
        ready.set()
        try:
            await server.serve(sockets=[sock])
        finally:
            await log.aclose()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    deadline = time.monotonic() + 10
    while not made["server"].started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    running = Running(f"http://127.0.0.1:{port}", made["app"], made["server"], thread)
    try:
        yield running
    finally:
        if thread.is_alive():
            running.stop()
        sock.close()


Item = StreamFrame | UnknownFrame | str  # a str is a comment


@contextlib.asynccontextmanager
async def sse(client: httpx.AsyncClient, stream_id: str, *, cursor: int | None = None,
              headers: dict[str, str] | None = None,
              ) -> AsyncIterator[tuple[httpx.Response, AsyncIterator[Item]]]:
    """Open ``/sse``; yields the response and an iterator of frames and comments (in order)."""
    params = {"cursor": str(cursor)} if cursor is not None else None
    async with client.stream("GET", f"/streams/{stream_id}/sse", params=params,
                             headers=headers) as resp:
        yield resp, _items(resp)


async def _items(resp: httpx.Response) -> AsyncIterator[Item]:
    comments: list[str] = []
    decoder = SSEDecoder(on_comment=comments.append)
    async for piece in resp.aiter_raw():
        events = decoder.feed(piece)
        for text in comments:
            yield text
        comments.clear()
        for event in events:
            yield decode_stream_frame(event)
    for event in decoder.flush():
        yield decode_stream_frame(event)


async def read_all(client: httpx.AsyncClient, stream_id: str, cursor: int | None = None,
                   **kw: Any) -> list[StreamFrame | UnknownFrame]:
    """Every frame of one connection until the body closes."""
    with anyio.fail_after(10):
        async with sse(client, stream_id, cursor=cursor, **kw) as (resp, items):
            assert resp.status_code == 200, resp.read()
            return [item async for item in items if not isinstance(item, str)]


async def next_frame(items: AsyncIterator[Item]) -> StreamFrame | UnknownFrame:
    with anyio.fail_after(10):
        async for item in items:
            if not isinstance(item, str):
                return item
    raise AssertionError("the body closed")


def chunks_of(frames: list[Any]) -> list[tuple[int, bytes]]:
    return [(f.sequence, bytes(f.chunk)) for f in frames if isinstance(f, ChunkFrame)]


async def append(client: httpx.AsyncClient, stream_id: str, *chunks: Any, step: int = 1,
                 headers: dict[str, str] | None = None) -> list[int]:
    resp = await client.post(f"/streams/{stream_id}/chunks", headers=headers,
                             json=[{"step": step, "chunk": c} for c in chunks])
    assert resp.status_code == 200, resp.text
    sequences: list[int] = resp.json()["sequences"]
    return sequences


async def wait_for(predicate: Callable[[], bool], limit: float = 5.0) -> None:
    """Poll a condition on the server's thread (no event crosses the two loops)."""
    with anyio.fail_after(limit):
        while not predicate():  # noqa: ASYNC110
            await anyio.sleep(0.01)


@dataclass
class PrivateRedis:
    url: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def private_redis(tmp_path: Any) -> Iterator[PrivateRedis]:
    """A redis-server of this test's own (so killing it disturbs nobody else)."""
    require(importlib.util.find_spec("streamwire.log.redis") is not None
            and shutil.which("redis-server") is not None,
            "needs streamwire.log.redis and redis-server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    server = PrivateRedis(f"redis://127.0.0.1:{port}/0", process)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)
        yield server
    finally:
        server.kill()


class ServeProcess:
    """``streamwire serve`` as a subprocess on a fixed port (a restart keeps the address)."""

    def __init__(self, *options: str, token: str = "test-token") -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", str(self.port),
                     "--token", token, "--log-level", "warning", *options]
        self.auth = {"Authorization": f"Bearer {token}"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{self.base}/openapi.json", timeout=1)
                return
            except httpx.TransportError:
                assert self.proc.poll() is None, "streamwire serve exited"
                assert time.monotonic() < deadline, "streamwire serve did not start"
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no drain, no cleanup, as a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
