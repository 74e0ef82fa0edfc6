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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE
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
def serve_cli(*args: str, port: int, env: Mapping[str, str] | None = None, stderr: Any = PIPE,
              stop: signal.Signals = signal.SIGTERM) -> Iterator[subprocess.Popen[bytes]]:
    """``streamwire serve --port PORT ARGS`` as a subprocess of this checkout's code (``env``:
    its whole environment; default this one with ``PYTHONPATH`` set), ready once it answers;
    at exit sent ``stop`` if still running (SIGKILL: at once; else waited 15 s, then killed)."""
    env = env if env is not None else {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
    cmd = [sys.executable, "-m", "streamwire.cli", "serve", "--port", str(port), *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, (
                proc.stderr.read() if proc.stderr else b"streamwire serve exited").decode()
            try:
                httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "streamwire serve did not start"
                time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(stop)
            try:
                proc.wait(0 if stop == signal.SIGKILL else 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def backend_flags(backend: Backend) -> list[str]:
    """``serve``'s flags for ``backend``'s log, with the tests' token."""
    return ["--log", backend.spec, "--redis-prefix", backend.prefix, "--token", "t0ken"]


@contextlib.contextmanager
def serve_process(backend: Backend, agents: list[str], *, port: int, lease: float = 30.0,
                  calls: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``streamwire serve`` with ``agents`` as a subprocess on ``port``."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
    if calls is not None:
        env["RUNS_TEST_CALLS"] = str(calls)
    flags = [*backend_flags(backend), "--run-lease", str(lease), "--log-level", "warning",
             "--heartbeat", "1"]
    for agent in agents:
        flags += ["--agent", agent]
    with serve_cli(*flags, port=port, env=env) as proc:
        yield proc


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
