"""Servers for the runs tests: the backends (memory, SQLite, Redis) as a fixture, uvicorn in a
thread over a real socket, and ``streamwire serve`` as a real subprocess (for SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.server import Backend, log_backend
from helpers.server import serving as serving_app
from streamwire.log import StreamLog
from streamwire.runs import Runs
from streamwire.server import StreamApp, create_app

LogFactory = Callable[[], StreamLog]
SRC = Path(__file__).resolve().parents[2] / "src"
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with log_backend(request.param, tmp_path, "runs") as made:
        yield made


@dataclass
class Served:
    base: str
    app: StreamApp
    runs: Runs


@contextlib.contextmanager
def serving(factory: LogFactory, agents: list[Any], *, app_options: dict[str, Any] | None = None,
            **runs_options: Any) -> Iterator[Served]:
    """uvicorn on 127.0.0.1:<free port> in a thread serving the runs API for ``agents``
    (writes open unless ``app_options`` names an ``authorize`` hook)."""
    made: dict[str, Runs] = {}

    def make_app(log: StreamLog) -> StreamApp:
        made["runs"] = runs = Runs(log, agents, **runs_options)
        return create_app(log, agents=runs, **(app_options or {"allow_anonymous_writes": True}))

    with serving_app(factory, make_app=make_app) as running:
        yield Served(running.base, running.app, made["runs"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_process(backend: Backend, agents: list[str], *, port: int, lease: float = 30.0,
                  calls: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``streamwire serve`` as a subprocess on ``port`` (killed at exit if still running)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
    if calls is not None:
        env["RUNS_TEST_CALLS"] = str(calls)
    cmd = [sys.executable, "-m", "streamwire.cli", "serve", "--log", backend.spec,
           "--redis-prefix", backend.prefix, "--port", str(port), "--token", "t0ken",
           "--run-lease", str(lease), "--log-level", "warning", "--heartbeat", "1"]
    for agent in agents:
        cmd += ["--agent", agent]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, (proc.stderr.read() if proc.stderr else b"").decode()
            try:
                httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "streamwire serve did not start"
                time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


AUTH = {"Authorization": "Bearer t0ken"}


class LossyProxy:
    """A TCP proxy on 127.0.0.1 (in its own thread) that loses the answer to the first request
    starting with ``prefix``: ``after_server`` forwards the request, waits until the server has
    answered (so the server accepted it) and closes the client's connection without a byte;
    otherwise it closes before forwarding (the request never arrived). Later requests pass."""

    def __init__(self, upstream_port: int, prefix: bytes, *, after_server: bool = True) -> None:
        self.upstream_port = upstream_port
        self.prefix = prefix
        self.after_server = after_server
        self.lost = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> LossyProxy:
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            async with server:
                await self._stop.wait()
                for w in list(self._writers):  # every socket closed before the loop ends
                    w.transport.abort()
                await asyncio.sleep(0.05)

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        assert ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        assert self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            first = await reader.read(65536)
            lose = self.lost == 0 and first.startswith(self.prefix)
            if lose:  # the whole request: headers, then Content-Length bytes of body
                while b"\r\n\r\n" not in first:
                    first += await reader.read(65536)
                head, _, body = first.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += await reader.read(65536)
                    first = head + b"\r\n\r\n" + body
            if lose:
                self.lost += 1
                if self.after_server:
                    up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
                    up_w.write(first)
                    await up_w.drain()
                    await up_r.read(65536)  # the server answered: it accepted the request
                    up_w.transport.abort()
                writer.transport.abort()
                return
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            self._writers.add(up_w)
            up_w.write(first)

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                with contextlib.suppress(OSError):
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                with contextlib.suppress(OSError):
                    dst.close()

            await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))
        except OSError:
            writer.transport.abort()
        finally:
            self._writers.discard(writer)
