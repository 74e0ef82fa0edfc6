"""``streamwire serve --agent demo`` as a subprocess on 127.0.0.1 that a test can kill (SIGKILL),
stop (SIGTERM) and start again on the same port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent.parent
TOKEN = "demo-server-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class DemoServer:
    """``streamwire serve --agent demo`` as a subprocess that can be killed and started again."""

    def __init__(self, *extra: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get(
            "PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamwire.cli", "serve", "--agent", "demo", "--port",
             str(self.port), "--token", TOKEN, *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("streamwire serve exited")
            try:
                httpx.get(f"{self.url}/openapi.json", timeout=1)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)  # a crash: nothing more is written
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


