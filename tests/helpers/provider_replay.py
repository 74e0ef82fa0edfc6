"""A model provider stand-in on 127.0.0.1: replays recorded SSE streams (``*.sse`` files in each
provider's wire format) to the official SDKs pointed at it with ``base_url=``, and records what
they sent.

The first path segment names the fixture (``/chat_text/chat/completions`` serves
``chat_text.sse``): ``base_url=f"{server.base}/chat_text"`` for ``openai``, the same for
``anthropic`` (it appends ``/v1/messages``). ``/slow/<fixture>/...`` waits ``SLOW_DELAY``
seconds between events. ``/then/<first>/<second>/...`` answers a Chat Completions request with
``<first>`` until the request carries tool results, then with ``<second>`` (a model's tool round,
then its answer). A response ends by closing the connection (``Connection: close``).

A ``<fixture>.json`` instead (``{"status": 429, "body": {...}}``) answers with that status and
JSON body: a request the provider refuses.

``server.requests`` holds each request's path and JSON body; ``server.cut`` the fixtures whose
client closed the connection before the stream's end (what a stopped relay must do).

In a thread (the tests): ``with ReplayServer(FIXTURES) as server: ...``; as its own process (the
bench): ``python tests/helpers/provider_replay.py DIR`` prints ``PORT <n>`` and serves until its
standard input closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Seconds between two events of a ``/slow/`` replay.
SLOW_DELAY = 0.05
_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
         b"cache-control: no-cache\r\nrequest-id: req_replay\r\nconnection: close\r\n\r\n")


@dataclass
class Recorded:
    path: str
    body: Any


@dataclass
class ReplayServer:
    fixtures: Path
    port: int = 0
    requests: list[Recorded] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)
    _events: dict[str, list[bytes]] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop | None = None
    _stop: asyncio.Event | None = None
    _thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self, name: str) -> list[bytes]:
        """The fixture's events, each with its closing blank line."""
        if name not in self._events:
            text = (self.fixtures / f"{name}.sse").read_bytes()
            self._events[name] = [e + b"\n\n" for e in text.split(b"\n\n") if e.strip()]
        return self._events[name]

    async def serve(self, ready: threading.Event | None = None) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = server.sockets[0].getsockname()[1]
        if ready is not None:
            ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                           if line.lower().startswith("content-length:")), 0)
            body = await reader.readexactly(length) if length else b""
            self.requests.append(Recorded(path, json.loads(body) if body else None))
            segments = path.strip("/").split("/")
            slow = segments[0] == "slow"
            name = segments[1] if slow else segments[0]
            if name == "then":  # /then/<first>/<after tool results>/...: a model's two rounds
                name = segments[1] if not _has_tool_results(self.requests[-1].body) \
                    else segments[2]
            refusal = self.fixtures / f"{name}.json"
            if refusal.exists():
                answer = json.loads(refusal.read_text())
                body = json.dumps(answer["body"]).encode()
                writer.write(b"HTTP/1.1 %d Refused\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                             % (answer["status"], len(body), body))
                await writer.drain()
                return
            writer.write(_HEAD)
            await self._replay(name, reader, writer, SLOW_DELAY if slow else 0.0)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _replay(self, name: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, delay: float) -> None:
        events = self.events(name)
        if not delay:
            writer.write(b"".join(events))
            await writer.drain()
            return
        closed = asyncio.ensure_future(reader.read(1))  # b"": the client hung up
        try:
            for event in events:
                writer.write(event)
                await writer.drain()
                await asyncio.wait([closed], timeout=delay)
                if closed.done():
                    self.cut.append(name)
                    return
        finally:
            closed.cancel()

    # -- in a thread -----------------------------------------------------------------------------

    def __enter__(self) -> ReplayServer:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.serve(ready))
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the replay server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        assert self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _has_tool_results(body: Any) -> bool:
    """Whether a Chat Completions request carries tool results (a ``tool`` message)."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    return any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)


async def _main(fixtures: Path) -> None:
    server = ReplayServer(fixtures)
    ready = threading.Event()
    task = asyncio.ensure_future(server.serve(ready))
    await asyncio.get_running_loop().run_in_executor(None, ready.wait)
    print(f"PORT {server.port}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    assert server._stop is not None
    server._stop.set()
    await task


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1])))
