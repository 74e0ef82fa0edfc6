"""``streamwire demo``: a run of an agent, cut mid-reply and recovered, end to end, in seconds.

An embedded server (``MemoryLog`` behind ``create_app(agents=[reply])``, real uvicorn on 127.0.0.1,
any free port) serves the runs API. An ``AsyncDispatcher`` starts a run of the ``reply`` agent
(``POST /runs``), which writes a simulated LLM reply word by word as chat ``chunk`` messages into
the run's stream, and prints it as it arrives from ``/runs/{id}/sse``; midway the demo cuts its
own connection and takes the network down for a moment while the agent keeps writing. The
dispatcher re-attaches with ``Last-Event-ID``, the server replays what was missed, and the demo
checks that every chunk arrived exactly once, in order, says how many were replayed, and prints
the run's outcome and its ``/status``. Exit status: 0 when every chunk arrived exactly once, in
order; 1 otherwise; 2 usage error; 130 Ctrl-C (the demo stops following, then shuts its server
down the ordinary way).
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import httpx
import uvicorn
from anyio.from_thread import start_blocking_portal

from ..chat import Chat
from ..client import AsyncDispatcher, AsyncRun, RetryPolicy
from ..client._http import bearer_headers
from ..contract import Message, is_event
from ..errors import StreamwireError
from ..frames import ChunkCodec, RemoteOutcomeKind
from ..log.memory import MemoryLog
from ..runs import Completed, RunContext
from ..server import create_app
from ._options import CommandLineError, seconds, whole_number

__all__ = ["REPLY", "configure", "run"]

REPLY = (
    "Server-Sent Events are a plain HTTP response that never ends, which is exactly why they "
    "break: a proxy times out, a laptop changes networks, a deploy restarts the server. "
    "streamwire writes every chunk of a reply to a log with a sequence number, so a reader that "
    "loses its connection comes back with Last-Event-ID and gets what it missed from the log, "
    "then the live tail, each chunk exactly once and in order. The reply you are reading was cut "
    "halfway through and resumed; the line below counts what was replayed."
)


class _Cuttable(httpx.AsyncBaseTransport):
    """An httpx transport whose current connection the demo can cut, with an outage after it."""

    def __init__(self, log: MemoryLog) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._current: _CutStream | None = None
        self._down_until = 0.0
        self._log = log
        #: Chunks the agent wrote while the reader was away: the log replays them on re-attach.
        self.replayed = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if time.monotonic() < self._down_until:
            raise httpx.ConnectError("the network is down (demo)", request=request)
        cursor = request.headers.get("last-event-id")
        if cursor is not None and request.url.path.endswith("/sse"):
            run_id = request.url.path.split("/")[2]
            self.replayed = (await self._log.info(run_id)).head - int(cursor)
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


async def reply(run: RunContext[Chat]) -> Completed:
    """The demo's agent: the reply word by word, ``input.delay`` seconds apart."""
    words = [w + " " for w in REPLY.split(" ")]
    words[-1] = words[-1].rstrip()
    for word in words:
        await run.emit(Chat.chunk({"chunk": word}))
        await anyio.sleep(float(run.input["delay"]))
    return Completed(output={"words": len(words)},
                     usage={"inputTokens": 42, "outputTokens": len(words)})


class _Interrupt:
    """Ctrl-C, handed by the main thread to the demo's event loop (``portal.call(.now)``): it
    stops the whole demo (exit 130, as everywhere in the CLI), not only its server while the
    client goes on retrying it."""

    def __init__(self) -> None:
        self.asked = False
        self._scope: anyio.CancelScope | None = None

    def now(self) -> None:
        self.asked = True
        if self._scope is not None:
            self._scope.cancel()

    def scope(self) -> anyio.CancelScope:
        """The scope Ctrl-C cancels (already cancelled if Ctrl-C came first)."""
        self._scope = anyio.CancelScope()
        if self.asked:
            self._scope.cancel()
        return self._scope


async def _run(args: argparse.Namespace, out: _Printer, interrupt: _Interrupt) -> int:
    words = [w + " " for w in REPLY.split(" ")]
    words[-1] = words[-1].rstrip()
    log = MemoryLog()
    token = secrets.token_urlsafe(16)  # the demo's own dispatcher is the only writer
    app = create_app(log, token=token, agents=[reply])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           access_log=False, lifespan="on"))
    # Bound and listening before uvicorn starts: the port is known at once and a connection
    # made while uvicorn starts up waits in the backlog.
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    transport = _Cuttable(log)
    client = httpx.AsyncClient(transport=transport)
    dispatcher = AsyncDispatcher(client, base, decode=ChunkCodec(Chat).decode,
                                 headers=bearer_headers(token),
                                 retry=RetryPolicy(backoff_initial=0.15, backoff_max=0.3))
    received: list[tuple[int, str]] = []
    failure: StreamwireError | None = None
    gone: BrokenPipeError | None = None
    run: AsyncRun[Message[Chat, Any] | None] | None = None
    status: dict[str, Any] = {}

    async def follow() -> None:
        nonlocal run, status
        async with client:
            run = await dispatcher.start("reply", {"delay": args.delay})
            out.note(f"POST /runs started run {run.run_id}; reading /runs/{run.run_id}/sse")
            connections = 1
            async for msg in run:
                if run.connections != connections:
                    connections = run.connections
                    out.note(f"re-attached with Last-Event-ID: {received[-1][0]}")
                text = _text(msg)
                received.append((run.cursor, text))
                out.text(text)
                if len(received) == args.cut_after:
                    out.note(f"cutting our own connection after {len(received)} chunks; "
                             f"network down for {args.outage}s while the agent keeps writing")
                    transport.cut(args.outage)
            status = await dispatcher.status(run.run_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            # Ctrl-C ends the demo, not only its server: stop following, then shut the server
            # down the ordinary way (its lifespan included), and exit 130. So does the reader
            # of stdout going away (`| head`), then the demo exits as main says.
            with interrupt.scope():
                out.note(f"embedded server on 127.0.0.1:{port} serving the agent 'reply'")
                await follow()
        except StreamwireError as exc:
            failure = exc
        except BrokenPipeError as exc:
            gone = exc
        finally:
            server.should_exit = True
    if gone is not None:
        raise gone
    if interrupt.asked:
        out.note("interrupted")
        return 130
    if failure is not None or run is None:
        out.note(f"FAILED: {type(failure).__name__}: {failure}")
        return 1
    code = _summary(out, received, words, run, transport.replayed)
    out.note(f"outcome: {run.outcome.describe() if run.outcome else 'none'}; "
             f"GET /runs/{run.run_id}/status: {json.dumps(status)}")
    return code


def _text(msg: Message[Chat, Any] | None) -> str:
    if msg is not None and is_event(msg, Chat.chunk):
        return msg.data["chunk"]
    return ""


def _summary(out: _Printer, received: list[tuple[int, str]], words: list[str],
             run: AsyncRun[Any], replayed: int) -> int:
    sequences = [seq for seq, _ in received]
    in_order = sequences == list(range(1, len(words) + 1))
    same_text = [t for _, t in received] == words
    outcome = run.outcome
    out.text("\n" if out.line_start else "\n\n")
    if not (in_order and same_text and outcome is not None
            and outcome.kind is RemoteOutcomeKind.COMPLETED):
        lost = len(set(range(1, len(words) + 1)) - set(sequences))
        repeated = len(sequences) - len(set(sequences))
        out.text(f"FAILED: {lost} chunks lost, {repeated} repeated, in order: {in_order}, "
                 f"outcome: {outcome}\n")
        return 1
    out.text(f"{replayed} chunks replayed after the cut; none lost, none repeated "
             f"({len(received)} chunks in order, stream {outcome.status}, "
             f"{run.connections - 1} re-attach attempts).\n")
    return 0


def configure(p: argparse.ArgumentParser) -> None:
    """``demo``'s options."""
    p.add_argument("--delay", type=seconds, default=0.03, metavar="SECONDS",
                   help="seconds between the simulated model's words (default 0.03)")
    p.add_argument("--cut-after", type=whole_number(1), default=25, metavar="N",
                   help="cut the connection after this many chunks (default 25)")
    p.add_argument("--outage", type=seconds, default=0.6, metavar="SECONDS",
                   help="seconds the network stays down after the cut (default 0.6)")


def run(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every chunk arrived exactly once, in order.

    Raises:
        CommandLineError: ``--cut-after`` is not inside the reply.
    """
    words = len(REPLY.split(" "))
    if not 0 < args.cut_after < words:
        raise CommandLineError(f"--cut-after must be between 1 and {words - 1} "
                               f"(the reply has {words} words)")
    out, interrupt = _Printer(sys.stdout), _Interrupt()
    # The demo's event loop runs in a thread of its own, so Ctrl-C stays with the main thread
    # (uvicorn, like Python, handles signals on the main thread only): the main thread hands it
    # to the demo, which stops following, shuts its server down and says so.
    with start_blocking_portal() as portal:
        done = portal.start_task_soon(_run, args, out, interrupt)
        try:
            return done.result()
        except KeyboardInterrupt:
            portal.call(interrupt.now)
            return done.result()
