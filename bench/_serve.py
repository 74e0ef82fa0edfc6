"""``streamwire serve`` in a process of its own, for the benchmarks that measure a server: the
client's event loop and the server's then share no process and no GIL, as in production."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
#: The bearer token the served process is started with (writes need it).
TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def served(*args: str) -> Iterator[str]:
    """``streamwire serve ARGS`` of this checkout on a free port (this checkout's ``bench``
    importable, for ``--agent bench.MODULE:NAME``); its base URL once ``/healthz`` answers; SIGTERM
    at exit (SIGKILL after 15 s)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamwire.cli", "serve", "--port", str(port), "--token", TOKEN,
         "--log-level", "warning", *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamwire serve {' '.join(args)} exited ({proc.returncode})")
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("streamwire serve did not start") from None
                time.sleep(0.05)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
