"""The connection engine over real uvicorn and real sockets: every route that streams --
``/streams/{id}/sse``, ``/runs/{id}/sse``, ``POST /api/chat``, ``GET /api/chat/{id}/stream`` and a
direct-profile ``SSEResponse`` given the app's engine -- counts against both caps (429 per stream,
503 in all, with the configured ``Retry-After``) and evicts a reader that never reads after
``send_timeout`` (its socket reset); every 503 of the stream, runs and chat routes carries
``create_app(retry_after=N)``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.lowlevel
import httpx
import pytest
import uvicorn

from helpers.server import wait_for
from streamwire.chat import Chat
from streamwire.errors import LogError
from streamwire.log.memory import MemoryLog
from streamwire.runs import MemoryRunStore, RunContext, Runs
from streamwire.server import DrainingServer, SSEResponse, StreamApp, create_app
from streamwire.transport import AbortSignal, SSEWritable

pytestmark = pytest.mark.anyio

RETRY_AFTER: Final = 7
PAYLOAD: Final = "x" * 8192
KINDS: Final = ["sse", "runs", "chat-resume", "chat-post", "direct"]
ASGIApp = Callable[[Any, Any, Any], Any]


async def work(run: RunContext[Chat]) -> None:
    """A chat agent: ``flood`` writes 8 KiB chunks until it is stopped (32 MiB at most), anything
    else says one word and holds its run open until it is stopped."""
    data: dict[str, Any] = run.input or {}
    if data.get("flood"):
        for _ in range(4096):
            await run.emit(Chat.chunk({"chunk": PAYLOAD}))
            await anyio.sleep(0.001)
    await run.emit(Chat.chunk({"chunk": "hi"}))
    await anyio.sleep(120)


async def direct(writable: SSEWritable, signal: AbortSignal) -> None:
    """A direct-profile producer that writes 8 KiB frames as fast as its client takes them."""
    while not signal.aborted:
        writable.write("chunk", json.dumps({"chunk": PAYLOAD}))
        await writable.drain()
        await anyio.lowlevel.checkpoint()


class FlakyLog(MemoryLog):
    """A memory log whose ``info`` fails (a backend outage) while ``down`` is set."""

    down = False

    async def info(self, stream_id: str) -> Any:
        if self.down:
            raise LogError("the backend is down")
        return await super().info(stream_id)


@dataclass
class Served:
    port: int
    app: StreamApp
    log: FlakyLog

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def with_direct(stream_app: StreamApp) -> ASGIApp:
    """The app, and ``/direct/{key}``: an ``SSEResponse`` counted by the app's engine."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/direct/"):
            response = SSEResponse(direct, engine=stream_app.engine, heartbeat=None,
                                   stream_id=scope["path"].removeprefix("/direct/"))
            await response(scope, receive, send)
        else:
            await stream_app(scope, receive, send)

    return app


@contextlib.contextmanager
def serving(*, lifespan: bool = True, **options: Any) -> Iterator[Served]:
    """uvicorn on 127.0.0.1:<free port> in a thread serving ``create_app`` with the ``work``
    agent (also the chat agent) and the direct route; caps 5 / 3, ``retry_after`` 7."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    made: dict[str, Any] = {}
    ready = threading.Event()
    options = {"max_connections": 5, "max_connections_per_stream": 3,
               "retry_after": RETRY_AFTER, "heartbeat_interval": None, **options}

    async def main() -> None:
        log = FlakyLog()
        runs = Runs(log, [work], store=MemoryRunStore())
        app = create_app(log, allow_anonymous_writes=True, agents=runs, chat_agent="work",
                         **options)
        server = DrainingServer(uvicorn.Config(
            with_direct(app), log_level="warning", lifespan="on" if lifespan else "off",
            timeout_graceful_shutdown=2), app)
        made.update(app=app, server=server, log=log)
        ready.set()
        await server.serve(sockets=[sock])

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    deadline = time.monotonic() + 10
    while not made["server"].started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield Served(port, made["app"], made["log"])
    finally:
        made["server"].handle_exit(signal.SIGTERM, None)
        thread.join(15)
        sock.close()
        assert not thread.is_alive(), "the server did not exit"


def chat_body(chat_id: str, **extra: Any) -> bytes:
    return json.dumps({"id": chat_id, "trigger": "submit-message", "messageId": None, **extra,
                       "messages": [{"id": "u1", "role": "user",
                                     "parts": [{"type": "text", "text": "hello"}]}]}).encode()


def request_for(kind: str, key: str, **extra: Any) -> bytes:
    """The raw HTTP request of one reader of ``key`` (a stream, run, chat or direct key)."""
    if kind == "chat-post":
        body = chat_body(key, **extra)
        return (b"POST /api/chat HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    path = {"sse": f"/streams/{key}/sse", "runs": f"/runs/{key}/sse",
            "chat-resume": f"/api/chat/{key}/stream", "direct": f"/direct/{key}"}[kind]
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()


async def prepare(srv: Served, kind: str, key: str, **extra: Any) -> None:
    """Make ``key`` readable by ``kind``: its stream, its run, its chat's running reply."""
    async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
        if kind == "sse":
            assert (await client.put(f"/streams/{key}")).status_code == 200
        elif kind == "runs":
            started = await client.post("/runs", json={"agent": "work", "runId": key,
                                                       "input": extra})
            assert started.status_code == 201, started.text
        elif kind == "chat-resume":  # a reply is running: start it, leave at once
            async with client.stream("POST", "/api/chat", content=chat_body(key, **extra),
                                     headers={"Content-Type": "application/json"}) as resp:
                assert resp.status_code == 200
    await wait_for(lambda: srv.app.statistics().open_connections == 0)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    writer: asyncio.StreamWriter


async def open_reader(srv: Served, kind: str, key: str) -> Answer:
    """A reader that reads the status line and headers only."""
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    writer.write(request_for(kind, key))
    with anyio.fail_after(10):
        head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    return Answer(int(lines[0].split()[1]), headers, writer)


@contextlib.asynccontextmanager
async def readers() -> AsyncIterator[list[Answer]]:
    opened: list[Answer] = []
    try:
        yield opened
    finally:
        for answer in opened:
            answer.writer.close()


def stalled_reader(srv: Served, kind: str, key: str, **extra: Any) -> socket.socket:
    """A reader that sends its request and never reads a byte (a tiny receive window)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", srv.port))
    sock.sendall(request_for(kind, key, **extra))
    return sock


def read_to_eof(sock: socket.socket) -> None:
    while sock.recv(65536):
        pass


# ---- both caps, on every route that streams -------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_every_streaming_route_counts_against_both_caps(kind: str) -> None:
    with serving() as srv:
        for key in ("a", "b", "c"):
            await prepare(srv, kind, key)
        async with readers() as opened:
            for _ in range(3):
                opened.append(await open_reader(srv, kind, "a"))
            assert [a.status for a in opened] == [200, 200, 200]
            per_stream = await open_reader(srv, kind, "a")
            opened.append(per_stream)
            assert per_stream.status == 429
            assert per_stream.headers["retry-after"] == str(RETRY_AFTER)
            for _ in range(2):
                opened.append(await open_reader(srv, kind, "b"))
            assert [a.status for a in opened[-2:]] == [200, 200]
            total = await open_reader(srv, kind, "c")
            opened.append(total)
            assert total.status == 503
            assert total.headers["retry-after"] == str(RETRY_AFTER)
            stats = srv.app.statistics()
            assert (stats.open_connections, stats.refused_total) == (5, 2)
        await wait_for(lambda: srv.app.statistics().open_connections == 0)


async def test_chat_readers_and_stream_readers_share_one_pool() -> None:
    """12 chat readers with caps 5 / 3 are no longer all accepted, starving ``/sse`` readers:
    the chat's stream takes 3, other readers the rest, and then everyone gets 503."""
    with serving() as srv:
        await prepare(srv, "chat-resume", "c1")
        await prepare(srv, "sse", "s")
        async with readers() as opened:
            for _ in range(12):
                opened.append(await open_reader(srv, "chat-post", "c1"))
            statuses = [a.status for a in opened]
            assert statuses == [200] * 3 + [429] * 9
            opened += [await open_reader(srv, "sse", "s") for _ in range(3)]
            assert [a.status for a in opened[-3:]] == [200, 200, 503]


# ---- a reader that never reads is evicted -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_reader_that_never_reads_is_evicted_and_reset(kind: str) -> None:
    with serving(send_timeout=0.5) as srv:
        flood = {"flood": True}
        if kind in ("sse", "runs", "chat-resume"):  # the stream, the run, the running reply
            await prepare(srv, kind, "f", **flood)
        sock = stalled_reader(srv, kind, "f", **flood)
        try:
            await wait_for(lambda: srv.app.statistics().open_connections == 1, 10)
            async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
                with anyio.fail_after(60):
                    while srv.app.statistics().evicted_total < 1:
                        if kind == "sse":  # the other kinds flood by themselves
                            await client.post("/streams/f/chunks", json=[
                                {"step": 1, "chunk": PAYLOAD} for _ in range(16)])
                        await anyio.sleep(0.01)
            await wait_for(lambda: srv.app.statistics().open_connections == 0, 10)
            assert srv.app.statistics().evicted_total == 1
            sock.settimeout(5)
            with pytest.raises(ConnectionResetError):  # reset, not left flushing
                read_to_eof(sock)
        finally:
            sock.close()


# ---- Retry-After on every 503 ----------------------------------------------------------------------


async def test_retry_after_is_on_every_503_of_the_stream_runs_and_chat_routes() -> None:
    with serving() as srv:
        await prepare(srv, "runs", "r")
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            srv.log.down = True  # a backend outage (a 503 of the log)
            try:
                answers = {
                    "stream sse": await client.get("/streams/r/sse"),
                    "stream info": await client.get("/streams/r/info"),
                    "run sse": await client.get("/runs/r/sse"),
                    "chat resume": await client.get("/api/chat/c/stream"),
                    "chat stop": await client.post("/api/chat/c/stop"),
                }
            finally:
                srv.log.down = False
        for route, answer in answers.items():
            assert answer.status_code == 503, (route, answer.text)
            assert answer.headers["retry-after"] == str(RETRY_AFTER), route
            assert answer.json()["status"] == 503


async def test_a_draining_server_refuses_every_streaming_route_with_retry_after() -> None:
    with serving() as srv:
        for kind in ("sse", "runs", "chat-resume"):
            await prepare(srv, kind, "r")
        srv.app.begin_shutdown()  # no stream is open: nothing for the loop's thread to do
        async with readers() as opened:
            for kind in KINDS:
                opened.append(await open_reader(srv, kind, "r"))
        for kind, answer in zip(KINDS, opened, strict=True):
            assert answer.status == 503, kind
            assert answer.headers["retry-after"] == str(RETRY_AFTER), kind


# ---- the lifespan: a host must start the app's agents ------------------------------------------------


async def test_agents_never_started_answer_503_naming_the_fix(
        caplog: pytest.LogCaptureFixture) -> None:
    with serving(lifespan=False) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            run = await client.post("/runs", json={"agent": "work", "runId": "r"})
            chat = await client.post("/api/chat", content=chat_body("c"),
                                     headers={"Content-Type": "application/json"})
    for answer in (run, chat):
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == str(RETRY_AFTER)
        body = answer.json()
        assert body["code"] == "AGENTS_NOT_STARTED"
        assert "FastAPI(lifespan=stream_app.lifespan)" in body["error"]
    told = [r for r in caplog.records if r.name == "streamwire.server"
            and r.levelname == "ERROR" and "lifespan" in r.getMessage()]
    assert len(told) == 1, "said once, in the server's log"


async def test_agents_never_started_are_logged_at_the_first_request_of_any_kind(
        caplog: pytest.LogCaptureFixture) -> None:
    """A mounted app hears of its host's start-up only through its first request: the error is
    in the log from then on, before any run is asked for."""
    with serving(lifespan=False) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            assert (await client.get("/healthz")).status_code == 200
            told = [r for r in caplog.records if r.name == "streamwire.server"
                    and r.levelname == "ERROR" and "lifespan" in r.getMessage()]
            assert len(told) == 1, "said at the first request, a health check"
            await client.get("/healthz")
    again = [r for r in caplog.records if r.levelname == "ERROR" and "lifespan" in r.getMessage()]
    assert len(again) == 1, "and only once"


async def test_a_started_app_says_nothing_of_it(caplog: pytest.LogCaptureFixture) -> None:
    with serving(lifespan=True) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            assert (await client.get("/healthz")).status_code == 200
    assert not [r for r in caplog.records if "lifespan" in r.getMessage()
                and r.levelname == "ERROR"]


async def test_the_lifespan_helper_starts_the_agents_under_fastapi() -> None:
    from fastapi import FastAPI

    stream_app = create_app(MemoryLog(), allow_anonymous_writes=True, agents=[work])
    host = FastAPI(lifespan=stream_app.lifespan)

    @host.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    host.mount("/", stream_app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(host, log_level="warning",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),),
                              daemon=True)
    thread.start()
    try:
        await wait_for(lambda: server.started, 10)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert (await client.get("/health")).status_code == 200
            started = await client.post("/runs", json={"agent": "work", "runId": "r1"})
            assert started.status_code == 201, started.text
            async with client.stream("GET", "/runs/r1/sse") as resp:
                assert resp.status_code == 200
                async for line in resp.aiter_lines():
                    if line.startswith("data:") and "hi" in line:
                        break
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
    assert not thread.is_alive()
    assert stream_app.statistics().draining  # the lifespan's end drained the app
