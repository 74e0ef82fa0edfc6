"""Fan-out (``streamwire.server._fanout``, issue #17) over real uvicorn on every backend: the readers
caught up on a stream share one log reader and one encode per frame, and every rule of a solo
connection still holds for each of them -- every chunk exactly once, in order, then exactly one
terminal -- through evictions, readers attaching mid-batch, terminals and cleanups during a batch,
and a shutdown. Every test also fails on an exception the server logs (``uvicorn.error`` and
``streamwire.server`` at ERROR)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import msgspec
import pytest

import helpers.server as server_helpers
import streamwire.server._fanout as fanout_module
import streamwire.server._joining as joining_module
import streamwire.server._sse as sse_module
from helpers.server import LogFactory, Running, append, backend, serving, sse, wait_for
from streamwire.frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    RewoundFrame,
    StreamFrame,
    TruncatedFrame,
    UnknownFrame,
    decode_stream_frame,
)
from streamwire.server import StreamApp
from streamwire.server._fanout import Hub
from streamwire.sse import SSEDecoder

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # a fixture, used by name

TERMINALS = (EndFrame, FailFrame, TruncatedFrame)
Frame = StreamFrame | UnknownFrame


# ---- the server, its hubs, and what it logs ------------------------------------------------------


class ServerLog(logging.Handler):
    """What the server logs: its errors, and ``streamwire.server``'s info lines (evictions)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.errors: list[str] = []
        self.info: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        (self.errors if record.levelno >= logging.ERROR else self.info).append(
            self.format(record))


@dataclass
class Served:
    running: Running
    log: ServerLog

    @property
    def app(self) -> StreamApp:
        return self.running.app

    @property
    def base(self) -> str:
        return self.running.base


@contextlib.contextmanager
def fanout_server(factory: LogFactory, **options: Any) -> Iterator[Served]:
    """``serving(...)`` (no heartbeats unless asked); on a clean exit, fails when the server
    logged an error meanwhile (an exception in the ASGI app, an unexpected error while
    streaming), including while it stopped."""
    collect = ServerLog()
    ours = logging.getLogger("streamwire.server")
    level = ours.level
    loggers = [logging.getLogger("uvicorn.error"), ours]
    options.setdefault("heartbeat_interval", None)
    with serving(factory, **options) as srv:
        for logger in loggers:  # after uvicorn configured its loggers
            logger.addHandler(collect)
        ours.setLevel(logging.INFO)
        try:
            yield Served(srv, collect)
            srv.stop()
        finally:
            ours.setLevel(level)
            for logger in loggers:
                logger.removeHandler(collect)
    assert not collect.errors, "the server logged errors:\n" + "\n".join(collect.errors)


def hubs(srv: Served) -> dict[str, Hub]:
    fanout = srv.app.fanout
    assert fanout is not None, "fan-out is off"
    return fanout.hubs


def followers(srv: Served, stream_id: str) -> int:
    hub = hubs(srv).get(stream_id)
    return len(hub.followers) if hub is not None else 0


def port_of(srv: Served) -> int:
    return int(srv.base.rsplit(":", 1)[1])


async def on_server(srv: Served, call: Any) -> Any:
    """Run ``call()`` (a coroutine function or a plain one) on the server's event loop."""
    loop = srv.running.server._loop
    assert loop is not None

    async def run() -> Any:
        result = call()
        return await result if asyncio.iscoroutine(result) else result

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), loop))


def client_for(srv: Served, *, rcvbuf: int | None = None) -> httpx.AsyncClient:
    """A client with no connection limit; ``rcvbuf``: its sockets' receive buffer (fixed, so
    the kernel does not grow it to megabytes under a reader that stops reading)."""
    options = [(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)] if rcvbuf else None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=options)
    return httpx.AsyncClient(base_url=srv.base, timeout=30, transport=transport)


#: The socket buffers of tests that take the hub's lagging path: the server's send buffers (see
#: ``small_send_buffers``) and their clients' receive buffers.
SMALL_BUFFER = 64 * 1024


class _SmallSendBuffers:
    """``helpers.server``'s ``socket`` module, but the listening socket ``serving`` binds has a
    16 KiB send buffer (32 KiB once Linux doubles it), which the sockets it accepts inherit."""

    def __getattr__(self, name: str) -> Any:
        return getattr(socket, name)

    @staticmethod
    def socket(*args: Any, **kwargs: Any) -> socket.socket:
        sock = socket.socket(*args, **kwargs)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER // 4)
        return sock


@pytest.fixture
def small_send_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Server sockets with small send buffers, as over a real network: on loopback the kernel's
    autotuned buffers absorb megabytes per connection, and a batch would never reach the hub's
    lagging path (outboxes and their drainers)."""
    monkeypatch.setattr(server_helpers, "socket", _SmallSendBuffers())


# ---- payloads and what a reader must end with ----------------------------------------------------


def payload(n: int, size: int) -> str:
    """The chunk written as sequence ``n`` (JSON string ``"c<n>-xxx..."``, ``size`` characters)."""
    head = f"c{n}-"
    return head + "x" * max(size - len(head), 0)


def wire(text: str) -> bytes:
    """A string chunk as the log stores it (its JSON text)."""
    return msgspec.json.encode(text)


@dataclass
class Written:
    """What the writer stored: sequence -> chunk JSON text."""

    chunks: dict[int, bytes] = field(default_factory=dict)

    async def append(self, client: httpx.AsyncClient, stream_id: str, count: int, *,
                     size: int = 32, step: int = 1) -> list[int]:
        first = max(self.chunks, default=0) + 1
        texts = [payload(first + i, size) for i in range(count)]
        sequences = await append(client, stream_id, *texts, step=step)
        assert sequences == list(range(first, first + count)), "another writer?"
        for seq, text in zip(sequences, texts, strict=True):
            self.chunks[seq] = wire(text)
        return sequences

    def between(self, after: int, upto: int | None = None) -> list[tuple[int, bytes]]:
        last = max(self.chunks, default=0) if upto is None else upto
        return [(seq, self.chunks[seq]) for seq in range(after + 1, last + 1)
                if seq in self.chunks]


def chunks_of(frames: list[Frame]) -> list[tuple[int, bytes]]:
    return [(f.sequence, bytes(f.chunk)) for f in frames if isinstance(f, ChunkFrame)]


def terminals_of(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if isinstance(f, TERMINALS)]


def assert_exactly_once(frames: list[Frame], expected: list[tuple[int, bytes]],
                        terminal: Frame | type, who: str = "reader") -> None:
    """Every expected chunk once, in order, nothing else; then exactly one terminal, last."""
    got = chunks_of(frames)
    if got != expected:
        seqs = [s for s, _ in got]
        dupes = sorted(s for s, n in Counter(seqs).items() if n > 1)
        missing = sorted({s for s, _ in expected} - set(seqs))
        raise AssertionError(f"{who}: {len(got)} chunks, expected {len(expected)}; duplicates "
                             f"{dupes[:10]}, missing {missing[:10]}, first {seqs[:5]}, "
                             f"out of order: {seqs != sorted(seqs)}")
    ends = terminals_of(frames)
    assert len(ends) == 1, f"{who}: terminals {ends}"
    assert frames[-1] is ends[0], f"{who}: frames after the terminal: {frames[-3:]}"
    if isinstance(terminal, type):
        assert isinstance(ends[0], terminal), f"{who}: terminal {ends[0]}"
    else:
        assert ends[0] == terminal, f"{who}: terminal {ends[0]}"


# ---- readers -------------------------------------------------------------------------------------


@dataclass
class Reader:
    """One SSE client: its frames over all its connections, and how those ended."""

    stream_id: str
    cursor: int = 0
    frames: list[Frame] = field(default_factory=list)
    connections: int = 0
    drops: int = 0  # bodies that ended (closed or reset) without a terminal
    caught_up: anyio.Event = field(default_factory=anyio.Event)
    #: when set: the reader stops reading once caught up until this is set (a slow reader)
    resume: anyio.Event | None = None

    @property
    def last_seq(self) -> int:
        chunks = [f.sequence for f in self.frames if isinstance(f, ChunkFrame)]
        return chunks[-1] if chunks else self.cursor

    @property
    def done(self) -> bool:
        return bool(self.frames) and isinstance(self.frames[-1], TERMINALS)

    async def run(self, client: httpx.AsyncClient, *, reattach: bool = False,
                  header: bool = False, limit: float = 30) -> Reader:
        """Read until a terminal; ``reattach``: after a drop, open again from the last chunk
        (``header``: with ``Last-Event-ID`` instead of ``?cursor=``)."""
        with anyio.fail_after(limit):
            while True:
                cursor = self.last_seq
                headers = {"Last-Event-ID": str(cursor)} if header and cursor else None
                try:
                    async with sse(client, self.stream_id,
                                   cursor=None if headers else cursor,
                                   headers=headers) as (resp, items):
                        assert resp.status_code == 200, await resp.aread()
                        self.connections += 1
                        async for item in items:
                            if isinstance(item, str):
                                continue
                            self.frames.append(item)
                            if isinstance(item, CaughtUpFrame):
                                self.caught_up.set()
                                if self.resume is not None:
                                    await self.resume.wait()
                except (httpx.RemoteProtocolError, httpx.ReadError):
                    pass  # reset, or the body cut short: a drop
                if self.done:
                    return self
                self.drops += 1
                if not reattach:
                    return self


async def start_readers(tg: anyio.abc.TaskGroup, client: httpx.AsyncClient, stream_id: str,
                        count: int, cursor: int = 0, *, slow: anyio.Event | None = None,
                        **kw: Any) -> list[Reader]:
    """``count`` readers from ``cursor``, returned once each is caught up. ``slow``: every other
    one stops reading once caught up until that event is set."""
    readers = [Reader(stream_id, cursor, resume=slow if i % 2 else None) for i in range(count)]
    for reader in readers:
        tg.start_soon(lambda r=reader: r.run(client, **kw))
    with anyio.fail_after(15):
        for reader in readers:
            await reader.caught_up.wait()
    return readers


async def attach_followers(tg: anyio.abc.TaskGroup, client: httpx.AsyncClient, srv: Served,
                           stream_id: str, count: int, **kw: Any) -> list[Reader]:
    """``count`` readers of a quiet stream attaching at once, all following its hub once this
    returns (the first to catch up made it; each of the others joined when it caught up, as
    ``in_step`` with the hub's reader, parked or not, allows)."""
    readers = await start_readers(tg, client, stream_id, count, **kw)  # odd ones: slow
    await wait_for(lambda: followers(srv, stream_id) == count)
    return readers


async def end(client: httpx.AsyncClient, stream_id: str) -> None:
    resp = await client.post(f"/streams/{stream_id}/end", json={"status": "completed"})
    assert resp.status_code == 200, resp.text


async def fail(client: httpx.AsyncClient, stream_id: str, error: str) -> None:
    resp = await client.post(f"/streams/{stream_id}/fail",
                             json={"error": error, "recoverable": False})
    assert resp.status_code == 200, resp.text


async def cleanup(client: httpx.AsyncClient, stream_id: str, step: int) -> RewoundFrame:
    resp = await client.post(f"/streams/{stream_id}/cleanup", json={"step": step})
    assert resp.status_code == 200, resp.text
    return msgspec.convert(resp.json(), RewoundFrame, from_attributes=False)


async def head_of(client: httpx.AsyncClient, stream_id: str) -> int:
    resp = await client.get(f"/streams/{stream_id}/info")
    assert resp.status_code == 200, resp.text
    head: int = resp.json()["head"]
    return head


COMPLETED = EndFrame(status="completed")


# ---- 1. the shared path is the one taken ---------------------------------------------------------


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Messages the hub queued for lagging followers (``_fanout.enqueue`` calls), so a test
    knows it took the lagging path."""
    calls = [0]
    real = fanout_module.enqueue

    def counting(*args: Any) -> None:
        calls[0] += 1
        real(*args)

    monkeypatch.setattr(fanout_module, "enqueue", counting)
    return calls


@pytest.fixture
def encodes(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, str]]:
    """Counts of ``encode_stream_frame`` calls by (module, frame type): the hub's and a solo
    connection's (the server runs in this process, on a thread)."""
    counts: Counter[tuple[str, str]] = Counter()
    for module, name in ((fanout_module, "hub"), (joining_module, "hub"), (sse_module, "solo")):
        real = module.encode_stream_frame

        def counting(frame: Any, _real: Any = real, _name: str = name) -> bytes:
            counts[_name, type(frame).__name__] += 1
            result: bytes = _real(frame)
            return result

        monkeypatch.setattr(module, "encode_stream_frame", counting)
    return counts


async def test_caught_up_readers_share_one_reader_and_one_encode_per_frame(
        backend: LogFactory, encodes: Counter[tuple[str, str]]) -> None:
    count, batches = 30, 10
    with fanout_server(backend, max_connections_per_stream=100) as srv:
        async with client_for(srv) as client, anyio.create_task_group() as tg:
            await client.put("/streams/s")
            written = Written()
            readers = await attach_followers(tg, client, srv, "s", count)
            hub = hubs(srv)["s"]
            joinable = srv.app.fanout is not None and srv.app.fanout.joinable
            if importlib.util.find_spec("httptools") is None:  # uvicorn on h11: every shared
                # message goes past each follower's send, framed once (``DirectBody``)
                assert all(follower.body is not None for follower in hub.followers)
            for _ in range(batches):
                await written.append(client, "s", 3)
                await written.append(client, "s", 2, size=2000)
                # while streaming: the same hub, every reader still following it
                assert hubs(srv).get("s") is hub
                assert len(hub.followers) == count
            await end(client, "s")
        for i, reader in enumerate(readers):
            assert_exactly_once(reader.frames, written.between(0), COMPLETED, f"reader {i}")
            assert reader.connections == 1
            assert reader.drops == 0
        assert not hubs(srv), "the hub outlived its stream"
    total = len(written.chunks)
    assert encodes["hub", "ChunkFrame"] == total, "not one encode per frame"
    assert encodes["solo", "ChunkFrame"] == 0, "a chunk went out through a solo connection"
    assert encodes["hub", "EndFrame"] == 1
    # the first reader's caught-up came from its own reader; the others joined the hub at the
    # same cursor of the same view (``Fanout.prepare``), so they share one catch-up, encoded
    # once (``JoinMemo``, ``Joining.catch_up``). A log with no join (SQLite): each its own.
    caught_up = encodes["solo", "CaughtUpFrame"], encodes["hub", "CaughtUpFrame"]
    assert caught_up == ((1, 1) if joinable else (count, 0))


# ---- 2. a follower that stops reading is evicted; nobody else notices ---------------------------


def sse_socket(port: int, stream_id: str, rcvbuf: int | None = None) -> socket.socket:
    """A raw socket that asked for ``stream_id``'s SSE (``rcvbuf``: the receive window it
    advertises, set before connecting)."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /streams/%s/sse HTTP/1.1\r\nHost: t\r\n\r\n" % stream_id.encode())
    return sock


class ChunkedSSE:
    """A 200 response with an HTTP/1.1 chunked SSE body, decoded as its bytes arrive."""

    def __init__(self) -> None:
        self.buffer = b""
        self.head = False
        self.decoder = SSEDecoder()
        self.frames: list[Frame] = []

    def feed(self, data: bytes) -> None:
        """Take the next bytes; decode every chunk that is whole."""
        self.buffer += data
        if not self.head:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            self.head, self.buffer = True, rest
        while True:
            size_line, sep, rest = self.buffer.partition(b"\r\n")
            if not sep:
                return
            size = int(size_line.split(b";")[0], 16)
            if len(rest) < size + 2:
                return
            self._decode(rest[:size])
            self.buffer = rest[size + 2:]

    def finish(self) -> None:
        """The connection ended: decode the whole events of a last chunk cut short."""
        size_line, sep, rest = self.buffer.partition(b"\r\n")
        if self.head and sep:
            self._decode(rest[:int(size_line.split(b";")[0], 16)])
        self.buffer = b""

    def _decode(self, data: bytes) -> None:
        self.frames += [decode_stream_frame(e) for e in self.decoder.feed(data)]


class StalledReader:
    """A raw socket with a tiny receive window that sends its request and reads nothing more
    until told to; then it reads what it was sent, to EOF or the reset."""

    def __init__(self, port: int, stream_id: str) -> None:
        self.sock = sse_socket(port, stream_id, 4096)

    def read_rest(self) -> tuple[list[Frame], bool]:
        """The frames it had been sent (complete events only), and whether it was reset."""
        self.sock.settimeout(5)
        body = ChunkedSSE()
        reset = False
        try:
            while piece := self.sock.recv(1 << 16):
                body.feed(piece)
        except ConnectionResetError:
            reset = True
        body.finish()
        assert body.head, "no response head"
        return body.frames, reset

    def close(self) -> None:
        self.sock.close()


async def test_a_follower_that_stops_reading_is_evicted_and_the_others_get_everything(
        backend: LogFactory, small_send_buffers: None, queued: list[int]) -> None:
    count, size, backlog = 10, 4096, 128 * 1024
    with fanout_server(backend, max_backlog_bytes=backlog, send_timeout=5,
                       max_connections_per_stream=100) as srv:
        async with client_for(srv, rcvbuf=SMALL_BUFFER) as client:
            await client.put("/streams/s")
            written = Written()
            await written.append(client, "s", 5)
            async with anyio.create_task_group() as tg:
                readers = await attach_followers(tg, client, srv, "s", count)
                stalled = StalledReader(port_of(srv), "s")
                try:
                    await wait_for(lambda: followers(srv, "s") == count + 1)
                    # batches of 96 KiB, each under the backlog limit: the readers that read
                    # take each one (outbox and all) before the next, the stalled one piles up
                    with anyio.fail_after(20):
                        while srv.app.statistics().evicted_total == 0:
                            await written.append(client, "s", 24, size=size)
                            last = max(written.chunks)
                            await wait_for(lambda n=last: all(r.last_seq == n for r in readers))
                    await written.append(client, "s", 24, size=size)
                    await end(client, "s")
                    frames, reset = await anyio.to_thread.run_sync(stalled.read_rest)
                finally:
                    stalled.close()
            assert queued[0] > 0, "the lagging path was not taken"
            assert srv.app.statistics().evicted_total == 1, "a reader that kept reading was evicted"
            evictions = [line for line in srv.log.info if "evicting" in line]
            assert len(evictions) == 1, evictions
            assert f"max_backlog_bytes={backlog}" in evictions[0], "evicted for the backlog"
            for i, reader in enumerate(readers):
                assert_exactly_once(reader.frames, written.between(0), COMPLETED, f"reader {i}")
                assert reader.drops == 0
            # evicted: reset, no terminal, every chunk it got in order from the start
            assert reset
            assert not terminals_of(frames)
            got = chunks_of(frames)
            assert got == written.between(0, len(got))
            assert len(got) < len(written.chunks)
            # it re-attaches from its cursor (Last-Event-ID) and gets the rest exactly once
            rest = await Reader("s", got[-1][0] if got else 0).run(client, header=True)
            assert_exactly_once(rest.frames, written.between(rest.cursor), COMPLETED, "re-attach")
            await wait_for(lambda: srv.app.statistics().open_connections == 0)


async def test_one_batch_bigger_than_the_backlog_limit_evicts_no_reader_that_keeps_up(
        backend: LogFactory, small_send_buffers: None) -> None:
    count, backlog = 10, 512 * 1024  # half the burst: room for uneven reading on a busy machine
    with fanout_server(backend, max_backlog_bytes=backlog, max_connections_per_stream=100) as srv:
        async with client_for(srv, rcvbuf=SMALL_BUFFER) as client:
            await client.put("/streams/s")
            written = Written()
            async with anyio.create_task_group() as tg:
                readers = await attach_followers(tg, client, srv, "s", count, reattach=True)
                # 1 MiB in one append_many: a solo connection takes it at the reader's pace
                await written.append(client, "s", 1024, size=1024)
                await end(client, "s")
            for i, reader in enumerate(readers):  # exactly once, re-attaching or not
                assert_exactly_once(reader.frames, written.between(0), COMPLETED, f"reader {i}")
            assert srv.app.statistics().evicted_total == 0
            assert [r.drops for r in readers] == [0] * count


# ---- 3. readers attaching while a batch is delivered ---------------------------------------------


async def test_readers_attaching_mid_batch_at_any_cursor_get_each_chunk_once(
        backend: LogFactory, small_send_buffers: None, queued: list[int]) -> None:
    with fanout_server(backend, max_connections_per_stream=100) as srv:
        async with client_for(srv, rcvbuf=SMALL_BUFFER) as client:
            await client.put("/streams/s")
            written = Written()
            late: list[Reader] = []
            slow = anyio.Event()
            async with anyio.create_task_group() as tg:
                readers = await attach_followers(tg, client, srv, "s", 8, slow=slow)
                # one batch of 1,200 (600 KiB: the slow followers take it from their outboxes),
                # then more batches; readers attach at 0, the middle and the head meanwhile
                await written.append(client, "s", 1200, size=512)
                await wait_for(lambda: queued[0] > 0)  # the slow ones lag
                slow.set()
                for round_ in range(4):
                    head = await head_of(client, "s")
                    for cursor in (0, head // 2, head):
                        reader = Reader("s", cursor)
                        late.append(reader)
                        tg.start_soon(reader.run, client)
                    await written.append(client, "s", 20 + round_, size=200)
                await end(client, "s")
            for i, reader in enumerate(readers + late):
                assert_exactly_once(reader.frames, written.between(reader.cursor), COMPLETED,
                                    f"reader {i} from {reader.cursor}")
                assert reader.drops == 0
            assert queued[0] > 0, "the lagging path was not taken"
            assert srv.app.statistics().evicted_total == 0
            assert not hubs(srv)


# ---- 4. a terminal right behind a batch ----------------------------------------------------------


@pytest.mark.parametrize("how", ["end", "fail"])
async def test_a_terminal_right_after_a_batch_comes_once_after_every_chunk(
        backend: LogFactory, how: str, small_send_buffers: None, queued: list[int]) -> None:
    count = 20
    with fanout_server(backend, max_connections_per_stream=100) as srv:
        async with client_for(srv, rcvbuf=SMALL_BUFFER) as client:
            await client.put("/streams/s")
            written = Written()
            slow = anyio.Event()
            async with anyio.create_task_group() as tg:
                readers = await attach_followers(tg, client, srv, "s", count, slow=slow)
                await written.append(client, "s", 600, size=1024)
                if how == "end":
                    await end(client, "s")
                else:
                    await fail(client, "s", "the model broke")
                await wait_for(lambda: "s" not in hubs(srv))  # the hub wrote its last
                slow.set()  # the terminal is in the slow ones' outboxes, behind the batch
            terminal = COMPLETED if how == "end" else FailFrame("the model broke", False)
            for i, reader in enumerate(readers):
                assert_exactly_once(reader.frames, written.between(0), terminal, f"reader {i}")
                assert reader.drops == 0
            assert queued[0] > count, "the lagging path was not taken"
            assert srv.app.statistics().evicted_total == 0
            assert not hubs(srv), "the hub outlived its stream"
            await wait_for(lambda: srv.app.statistics().open_connections == 0)


# ---- 5. cleanups while readers follow the hub ----------------------------------------------------


def split_at_markers(frames: list[Frame]) -> tuple[list[list[tuple[int, bytes]]],
                                                    list[RewoundFrame]]:
    """The chunks between the ``rewound`` markers, and the markers."""
    parts: list[list[tuple[int, bytes]]] = [[]]
    markers: list[RewoundFrame] = []
    for frame in frames:
        if isinstance(frame, RewoundFrame):
            markers.append(frame)
            parts.append([])
        elif isinstance(frame, ChunkFrame):
            parts[-1].append((frame.sequence, bytes(frame.chunk)))
    return parts, markers


async def test_a_cleanup_reaches_each_follower_once_where_it_happened(
        backend: LogFactory, small_send_buffers: None) -> None:
    with fanout_server(backend, max_connections_per_stream=100) as srv:
        async with client_for(srv, rcvbuf=SMALL_BUFFER) as client:
            await client.put("/streams/s")
            written = Written()
            await written.append(client, "s", 10, step=1)
            async with anyio.create_task_group() as tg:
                readers = await attach_followers(tg, client, srv, "s", 20)
                # at rest: the marker comes right after the head, then the new chunks
                await written.append(client, "s", 10, step=2)
                await wait_for(lambda: all(r.last_seq == 20 for r in readers))
                first = await cleanup(client, "s", 1)
                assert first.at_sequence == 20
                assert first.min_sequence == 10
                between = Reader("s", 0)  # attached after the first cleanup, before the second
                tg.start_soon(between.run, client)
                await written.append(client, "s", 10, step=2)  # 21..30
                with anyio.fail_after(10):
                    await between.caught_up.wait()
                await wait_for(lambda: all(r.last_seq == 30 for r in [*readers, between]))
                # mid-batch: a batch and, right behind it, the cleanup that removes it
                await written.append(client, "s", 300, step=3, size=1024)  # 31..330
                second = await cleanup(client, "s", 2)
                assert second.at_sequence == 330
                assert second.min_sequence == 30
                after = Reader("s", 0)  # attached after both cleanups
                tg.start_soon(after.run, client)
                with anyio.fail_after(10):
                    await after.caught_up.wait()
                await written.append(client, "s", 10, step=3)  # 331..340
                await end(client, "s")
            kept = written.between(0, 10) + written.between(20, 30)  # what survived both
            for i, reader in enumerate(readers):
                parts, markers = split_at_markers(reader.frames)
                assert markers == [first, second], f"reader {i}: markers {markers}"
                assert parts[0] == written.between(0, 20), f"reader {i}"
                # chunks of the batch the second cleanup removed may have gone out before it
                # (a prefix of the batch, never after the marker)
                assert parts[1][:10] == written.between(20, 30), f"reader {i}"
                assert parts[1][10:] == written.between(30, 30 + len(parts[1]) - 10)
                assert parts[2] == written.between(330), f"reader {i}"
                assert len(terminals_of(reader.frames)) == 1
                assert reader.frames[-1] == COMPLETED
                assert reader.drops == 0
            parts, markers = split_at_markers(between.frames)
            assert markers == [second], f"a reader attached after a cleanup got {markers}"
            assert parts[0][:20] == kept
            assert parts[1] == written.between(330)
            assert between.frames[-1] == COMPLETED
            assert_exactly_once(after.frames, kept + written.between(330), COMPLETED, "after")
            assert not [f for f in after.frames if isinstance(f, RewoundFrame)]


# ---- 6. leaving and shutting down ----------------------------------------------------------------


@pytest.mark.parametrize("lagging", [False, True])
async def test_followers_leaving_release_their_slots_at_once(
        backend: LogFactory, lagging: bool, small_send_buffers: None, queued: list[int]) -> None:
    count = 20
    with fanout_server(backend, max_connections_per_stream=100) as srv:
        async with client_for(srv, rcvbuf=SMALL_BUFFER) as client:
            await client.put("/streams/s")
            written = Written()
            async with anyio.create_task_group() as tg:
                # one of these made the hub (its reader is the hub's): they all stay
                readers = await attach_followers(tg, client, srv, "s", count)
                # lagging: they stop reading once caught up, and 600 KiB wait in their outboxes
                never = anyio.Event() if lagging else None
                gone = [Reader("s", resume=never) for _ in range(count)]
                scopes = [anyio.CancelScope() for _ in gone]

                async def read_until_cancelled(reader: Reader, scope: anyio.CancelScope) -> None:
                    with scope:
                        await reader.run(client)

                for reader, scope in zip(gone, scopes, strict=True):
                    tg.start_soon(read_until_cancelled, reader, scope)
                await wait_for(lambda: followers(srv, "s") == 2 * count)
                if lagging:
                    await written.append(client, "s", 600, size=1024)
                    last = max(written.chunks)
                    await wait_for(lambda: all(r.last_seq == last for r in readers))
                    assert queued[0] > 0
                else:
                    await written.append(client, "s", 1)
                    await wait_for(lambda: all(r.last_seq == 1 for r in gone))
                for scope in scopes:
                    scope.cancel()  # the client closes those connections
                with anyio.fail_after(2):  # promptly: nothing is written to them meanwhile
                    while srv.app.statistics().open_connections != count:  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                assert followers(srv, "s") == count
                await written.append(client, "s", 5)
                await end(client, "s")
            for i, reader in enumerate(readers):
                assert_exactly_once(reader.frames, written.between(0), COMPLETED, f"reader {i}")
            assert srv.app.statistics().evicted_total == 0
            await wait_for(lambda: srv.app.statistics().open_connections == 0)


async def test_the_reader_that_made_the_hub_can_leave_first(backend: LogFactory) -> None:
    count = 5
    with fanout_server(backend, max_connections_per_stream=100) as srv:
        async with client_for(srv) as client:
            await client.put("/streams/s")
            written = Written()
            async with anyio.create_task_group() as tg:
                scope = anyio.CancelScope()
                maker = Reader("s")

                async def read_until_cancelled() -> None:
                    with scope:
                        await maker.run(client)

                tg.start_soon(read_until_cancelled)
                await wait_for(lambda: followers(srv, "s") == 1)
                hub = hubs(srv)["s"]
                await anyio.sleep(0.1)
                readers = await start_readers(tg, client, "s", count)
                await wait_for(lambda: followers(srv, "s") == count + 1)
                await written.append(client, "s", 3)
                await wait_for(lambda: maker.last_seq == 3)
                scope.cancel()  # the reader whose log reader the hub reads leaves
                await wait_for(lambda: srv.app.statistics().open_connections == count)
                assert hubs(srv).get("s") is hub
                assert len(hub.followers) == count
                await written.append(client, "s", 3)
                await end(client, "s")
            for i, reader in enumerate(readers):
                assert_exactly_once(reader.frames, written.between(0), COMPLETED, f"reader {i}")
            assert not hubs(srv)


@pytest.mark.parametrize("when", ["at rest", "mid-batch"])
async def test_a_shutdown_gives_each_follower_one_recoverable_fail(
        backend: LogFactory, when: str, small_send_buffers: None, queued: list[int]) -> None:
    count = 20
    with fanout_server(backend, max_connections_per_stream=100) as srv:
        async with client_for(srv, rcvbuf=SMALL_BUFFER) as client:
            await client.put("/streams/s")
            written = Written()
            await written.append(client, "s", 3)
            slow = anyio.Event()
            async with anyio.create_task_group() as tg:
                readers = await attach_followers(tg, client, srv, "s", count, slow=slow)
                if when == "mid-batch":
                    await written.append(client, "s", 600, size=1024)
                    await wait_for(lambda: queued[0] > 0)  # some followers lag
                # the lagging followers' outboxes give way to the shutdown's fail
                drain = asyncio.ensure_future(on_server(srv, srv.app.drain))
                await anyio.sleep(0.05)
                slow.set()
                drained = await drain
            assert drained is True
            stats = srv.app.statistics()
            assert stats.open_connections == 0
            assert stats.draining
            assert stats.evicted_total == 0
            assert not hubs(srv)
            for i, reader in enumerate(readers):
                got = chunks_of(reader.frames)
                assert got == written.between(0, len(got)), f"reader {i}: not a prefix, in order"
                if when == "at rest":
                    assert len(got) == 3
                ends = terminals_of(reader.frames)
                assert len(ends) == 1, f"reader {i}: {ends}"
                assert reader.frames[-1] is ends[0], f"reader {i}: frames after the terminal"
                assert isinstance(ends[0], FailFrame)
                assert ends[0].recoverable
                assert ends[0].error_detail == {"code": "SERVER_SHUTDOWN"}
                assert reader.drops == 0
                assert reader.connections == 1
            refused = await client.get("/streams/s/sse")
            assert refused.status_code == 503


# ---- 7. fan-out off ------------------------------------------------------------------------------


async def test_without_fanout_each_connection_reads_alone(
        backend: LogFactory, encodes: Counter[tuple[str, str]]) -> None:
    with fanout_server(backend, fanout=False) as srv:
        assert srv.app.fanout is None
        async with client_for(srv) as client:
            await client.put("/streams/s")
            written = Written()
            async with anyio.create_task_group() as tg:
                readers = await start_readers(tg, client, "s", 3)
                await written.append(client, "s", 20)
                await end(client, "s")
            for i, reader in enumerate(readers):
                assert_exactly_once(reader.frames, written.between(0), COMPLETED, f"reader {i}")
    assert encodes["solo", "ChunkFrame"] == 3 * 20
    assert not [key for key in encodes if key[0] == "hub"]
