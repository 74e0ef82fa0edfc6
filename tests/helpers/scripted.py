"""A scripted HTTP/1.1 server on 127.0.0.1 for exact misbehaviour (bare closes mid-frame, malformed
frames, stalls, error statuses), shared by the client and command-line tests."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Reply:
    """One connection's answer. ``body`` is written, then the socket closes (a bare close unless
    the body ends with a terminal frame); ``stall`` seconds of silence come first when set."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/event-stream"
    chunked: bool = False
    stall_after: int | None = None  # bytes written before going silent (for idle_timeout)
    extra_headers: dict[str, str] = field(default_factory=dict)


class Scripted:
    """Serve ``replies`` in order, one per connection (the last one repeats). Records each
    request's headers and arrival time. Runs its own loop in a thread (sync and async clients)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.requests: list[dict[str, str]] = []
        self.lines: list[str] = []  # each request's first line ("POST /streams/s/chunks HTTP/1.1")
        self.times: list[float] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._main(),),
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/streams/s/sse"

    def __enter__(self) -> Scripted:
        self._thread.start()
        assert self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        for w in list(self._writers):
            w.transport.abort()
        # a handler stalled on purpose would outlive the loop (and be reported destroyed pending)
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            first, *lines = head.decode().split("\r\n")
            self.lines.append(first)
            headers = {k.strip().lower(): v.strip() for k, v in
                       (line.split(":", 1) for line in lines if ":" in line)}
            index = len(self.requests)
            self.requests.append(headers)
            self.times.append(time.monotonic())
            reply = self.replies[min(index, len(self.replies) - 1)]
            status_line = f"HTTP/1.1 {reply.status} X\r\ncontent-type: {reply.content_type}\r\n"
            for k, v in reply.extra_headers.items():
                status_line += f"{k}: {v}\r\n"
            body = reply.body[: reply.stall_after] if reply.stall_after is not None else reply.body
            if reply.chunked:
                writer.write(f"{status_line}transfer-encoding: chunked\r\n\r\n".encode())
                if body:
                    writer.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
                # no closing 0-chunk: a bare close mid-body is an incomplete chunked read
            else:
                writer.write(f"{status_line}connection: close\r\n\r\n".encode() + body)
            await writer.drain()
            if reply.stall_after is not None:
                await asyncio.sleep(30)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()
            self._writers.discard(writer)
            self._handlers.discard(task)
