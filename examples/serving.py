"""What the multi-process examples share: a free port, ``streamwire serve`` in a subprocess, and a
resumable reader that prints a chat reply as it arrives."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from streamwire import AsyncResumableStream, ChunkCodec, is_event
from streamwire.chat import Chat


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def stream_server(log: str, token: str, port: int, *, redis_prefix: str | None = None
                  ) -> Iterator[str]:
    """``streamwire serve`` in a subprocess; its URL once it answers. SIGTERM on the way out."""
    extra = ["--redis-prefix", redis_prefix] if redis_prefix else []
    server = subprocess.Popen(
        [sys.executable, "-m", "streamwire.cli", "serve", "--log", log, "--port", str(port),
         "--log-level", "warning", *extra], env={**os.environ, "STREAMWIRE_TOKEN": token})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{url}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamwire serve --log {log} did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(20)


async def read(url: str, stream_id: str, producer: subprocess.Popen[bytes]) -> str:
    """Follow a chat reply on ``url`` to its end, printing it; return its text. Gives up (with
    ``RuntimeError``) if ``producer`` exits with an error first, or after 60 s."""
    async with asyncio.timeout(60), asyncio.TaskGroup() as tasks:
        reading = tasks.create_task(_follow(url, stream_id))
        while not reading.done():
            if producer.poll():  # exited with an error: nobody will end the stream
                reading.cancel()
                raise RuntimeError(f"the producer failed (exit status {producer.returncode})")
            await asyncio.sleep(0.1)
    return reading.result()


async def _follow(url: str, stream_id: str) -> str:
    codec = ChunkCodec(Chat)
    text: list[str] = []
    async with httpx.AsyncClient(timeout=30) as client:
        async with AsyncResumableStream(client, f"{url}/streams/{stream_id}/sse",
                                        decode=codec.decode) as stream:
            async for message in stream:
                if message is not None and is_event(message, Chat.chunk):
                    print(message.data["chunk"], end="", flush=True)
                    text.append(message.data["chunk"])
        assert stream.end_frame is not None
        print(f"\n[{stream.end_frame.status}]")
    return "".join(text)
