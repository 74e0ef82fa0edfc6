"""Server subprocesses for the command-line and integration tests: start one, read its output line
by line, wait until it answers, read its frames until the body closes, stop it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx

from streamwire.frames import StreamFrame, decode_stream_frame
from streamwire.sse import SSEDecoder


class Proc:
    """A server subprocess whose stderr is collected line by line."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.lines: list[str] = []
        self.popen = subprocess.Popen(argv, stderr=subprocess.STDOUT, stdout=subprocess.PIPE,
                                      text=True, env={**os.environ, **(env or {})})
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, pattern: str, limit: float = 15.0) -> re.Match[str]:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if self.popen.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(10)
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait()
            self._reader.join(5)
            if self.popen.stdout is not None:
                self.popen.stdout.close()


@contextmanager
def process(argv: list[str], env: dict[str, str] | None = None) -> Iterator[Proc]:
    proc = Proc(argv, env)
    try:
        yield proc
    finally:
        proc.stop()


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` for a child a test sends SIGINT (Ctrl-C): SIGINT as a command started at a
    terminal has it. A test run started in the background of a script ignores SIGINT (POSIX
    shells do that to background jobs without job control), and its children would inherit it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_up(base: str) -> None:
    with anyio.fail_after(15):
        while True:
            try:
                async with httpx.AsyncClient(base_url=base) as client:
                    await client.get("/openapi.json")
                return
            except httpx.TransportError:
                await anyio.sleep(0.05)


async def frames_until_close(resp: httpx.Response, out: list[StreamFrame | Any]) -> None:
    decoder = SSEDecoder()
    async for piece in resp.aiter_raw():
        out.extend(decode_stream_frame(e) for e in decoder.feed(piece))
    out.extend(decode_stream_frame(e) for e in decoder.flush())
