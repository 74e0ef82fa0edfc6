"""``streamwire demo``: a resumed LLM reply, end to end, in a few seconds.

An embedded server (``MemoryLog`` behind ``create_app``, real uvicorn on 127.0.0.1, any free port)
streams a simulated LLM reply word by word as chat ``chunk`` messages. An ``AsyncResumableStream``
reads it and prints it as it arrives; midway the demo cuts its own connection and takes the network
down for a moment while the "model" keeps writing. The stream re-attaches with ``Last-Event-ID``,
the server replays what was missed, and the demo checks that every chunk arrived exactly once, in
order, and says how many were replayed.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import httpx
import uvicorn

from .chat import Chat
from .client import AsyncResumableStream, RetryPolicy
from .contract import Message, is_event
from .errors import StreamwireError
from .frames import ChunkCodec, encode_message_chunk
from .log.memory import MemoryLog
from .server import create_app

__all__ = ["main"]

REPLY = (
    "Server-Sent Events are a plain HTTP response that never ends, which is exactly why they "
    "break: a proxy times out, a laptop changes networks, a deploy restarts the server. "
    "streamwire writes every chunk of a reply to a log with a sequence number, so a reader that "
    "loses its connection comes back with Last-Event-ID and gets what it missed from the log, "
    "then the live tail, each chunk exactly once and in order. The reply you are reading was cut "
    "halfway through and resumed; the line below counts what was replayed."
)
STREAM_ID = "demo-reply"


class _Cuttable(httpx.AsyncBaseTransport):
    """An httpx transport whose current connection the demo can cut, with an outage after it."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._current: _CutStream | None = None
        self._down_until = 0.0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if time.monotonic() < self._down_until:
            raise httpx.ConnectError("the network is down (demo)", request=request)
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        self._current = _CutStream(response.stream)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=self._current, extensions=response.extensions)

    def cut(self, outage: float) -> None:
        """Break the open connection now and refuse new ones for ``outage`` seconds."""
        self._down_until = time.monotonic() + outage
        if self._current is not None:
            self._current.cut = True

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CutStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner
        self.cut = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            if self.cut:
                raise httpx.ReadError("connection cut (demo)")
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Printer:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.colour = out.isatty()
        self.line_start = True

    def text(self, s: str) -> None:
        if s:
            self.out.write(s)
            self.out.flush()
            self.line_start = s.endswith("\n")

    def note(self, s: str) -> None:
        """A status line of its own (dim on a terminal), between the words of the reply."""
        lead = "" if self.line_start else "\n"
        self.text(f"{lead}\x1b[2m  [{s}]\x1b[0m\n" if self.colour else f"{lead}  [{s}]\n")


async def _writer(log: MemoryLog, words: list[str], delay: float) -> None:
    for word in words:
        await log.append(STREAM_ID, 1, encode_message_chunk(Chat.chunk({"chunk": word})))
        await anyio.sleep(delay)
    await log.end_stream(STREAM_ID, "completed",
                         usage={"inputTokens": 42, "outputTokens": len(words)})


async def _run(args: argparse.Namespace, out: _Printer) -> int:
    words = [w + " " for w in REPLY.split(" ")]
    words[-1] = words[-1].rstrip()
    log = MemoryLog()
    await log.create_stream(STREAM_ID)
    # the demo writes to the log in-process: over HTTP it only reads, so writes get a throwaway token
    app = create_app(log, token=secrets.token_urlsafe(16))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0,
                                           log_level="warning", lifespan="on"))
    # Bound and listening before uvicorn starts: the port is known at once and a connection
    # made while uvicorn starts up waits in the backlog.
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/streams/{STREAM_ID}/sse"

    def on_reattach(error: StreamwireError, delay: float) -> None:
        cause = error.__cause__ or error
        out.note(f"{type(cause).__name__}: {cause} -- re-attaching in {delay:.2f}s")

    transport = _Cuttable()
    client = httpx.AsyncClient(transport=transport)
    stream = AsyncResumableStream(client, url, decode=ChunkCodec(Chat).decode,
                                  retry=RetryPolicy(backoff_initial=0.15, backoff_max=0.3),
                                  on_reattach=on_reattach)
    received: list[tuple[int, str]] = []
    failure: StreamwireError | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        out.note(f"embedded server on 127.0.0.1:{port}; reading {url}")
        tg.start_soon(_writer, log, words, args.delay)
        connections = 1
        try:
            async with client, stream:
                async for msg in stream:
                    if stream.stats.connections != connections:
                        connections = stream.stats.connections
                        out.note(f"re-attached with Last-Event-ID: {received[-1][0]}")
                    text = _text(msg)
                    received.append((stream.cursor, text))
                    out.text(text)
                    if len(received) == args.cut_after:
                        out.note(f"cutting our own connection after {len(received)} chunks; "
                                 f"network down for {args.outage}s while the model keeps writing")
                        transport.cut(args.outage)
        except StreamwireError as exc:
            failure = exc
        finally:
            server.should_exit = True
    if failure is not None:
        out.note(f"FAILED: {type(failure).__name__}: {failure}")
        return 1
    return _summary(out, received, words, stream)


def _text(msg: Message[Chat, Any] | None) -> str:
    if msg is not None and is_event(msg, Chat.chunk):
        return msg.data["chunk"]
    return ""


def _summary(out: _Printer, received: list[tuple[int, str]], words: list[str],
             stream: AsyncResumableStream[Any]) -> int:
    sequences = [seq for seq, _ in received]
    in_order = sequences == list(range(1, len(words) + 1))
    same_text = [t for _, t in received] == words
    end = stream.end_frame
    out.text("\n" if out.line_start else "\n\n")
    if not (in_order and same_text and end is not None):
        lost = len(set(range(1, len(words) + 1)) - set(sequences))
        repeated = len(sequences) - len(set(sequences))
        out.text(f"FAILED: {lost} chunks lost, {repeated} repeated, in order: {in_order}, "
                 f"end: {end}\n")
        return 1
    out.text(f"{stream.stats.replayed} chunks replayed after the cut; none lost, none repeated "
             f"({len(received)} chunks in order, stream {end.status}, "
             f"{stream.stats.reattaches} re-attach attempts).\n")
    return 0


def main(argv: list[str]) -> int:
    """Run the demo; 0 when every chunk arrived exactly once, in order."""
    parser = argparse.ArgumentParser(prog="streamwire demo", description="A resumed LLM reply, end to end.")
    parser.add_argument("--delay", type=float, default=0.03,
                        help="seconds between the simulated model's words (default 0.03)")
    parser.add_argument("--cut-after", type=int, default=25,
                        help="cut the connection after this many chunks (default 25)")
    parser.add_argument("--outage", type=float, default=0.6,
                        help="seconds the network stays down after the cut (default 0.6)")
    args = parser.parse_args(argv)
    words = len(REPLY.split(" "))
    if not 0 < args.cut_after < words:
        parser.error(f"--cut-after must be between 1 and {words - 1} (the reply has {words} words)")
    if args.delay < 0 or args.outage < 0:
        parser.error("--delay and --outage must be >= 0")
    return anyio.run(_run, args, _Printer(sys.stdout))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
