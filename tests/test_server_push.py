"""A hub over ``MemoryLog`` takes each append's chunks in the appending task (``ReadPosition.push``,
``streamwire.server._fanout``): over real uvicorn and raw sockets, the frame is in every
follower's socket when ``append`` returns, concurrent appenders still give each follower every
chunk once and in order, a follower that lags hands pacing back to the hub's task, and a push
whose delivery fails ends the hub with one ``fail`` without the writer seeing it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import msgspec
import pytest

import streamwire.server._fanout as fanout_module
from helpers.server import Running, serving, wait_for
from streamwire.frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    StreamFrame,
    UnknownFrame,
)
from streamwire.log.memory import MemoryLog
from streamwire.server._fanout import Hub
from test_server_fanout import SMALL_BUFFER, ChunkedSSE, small_send_buffers, sse_socket

pytestmark = pytest.mark.anyio
__all__ = ["small_send_buffers"]  # a fixture, used by name


#: the sockets the current test opened (closed after it, whatever its outcome)
OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


class RawReader:
    """A blocking raw-socket SSE reader of one stream, de-chunking and decoding what it gets."""

    def __init__(self, port: int, stream_id: str, rcvbuf: int | None = None) -> None:
        self.sock = sse_socket(port, stream_id, rcvbuf)
        OPEN.append(self.sock)
        self.body = ChunkedSSE()

    @property
    def frames(self) -> list[StreamFrame | UnknownFrame]:
        return self.body.frames

    def take(self, data: bytes) -> None:
        self.body.feed(data)

    def read_until(self, done: type, limit: float = 10.0) -> None:
        """Block until a frame of type ``done`` arrived."""
        self.sock.settimeout(limit)
        while not any(isinstance(f, done) for f in self.frames):
            data = self.sock.recv(1 << 16)
            assert data, "the server closed the connection"
            self.take(data)

    def ready_now(self) -> bytes:
        """What the socket holds at this instant, without waiting (b"": nothing)."""
        self.sock.setblocking(False)
        try:
            return self.sock.recv(1 << 16)
        except BlockingIOError:
            return b""
        finally:
            self.sock.setblocking(True)

    def chunks(self) -> list[tuple[int, bytes]]:
        return [(f.sequence, bytes(f.chunk)) for f in self.frames if isinstance(f, ChunkFrame)]


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[Running]:
    options = getattr(request, "param", {})
    with serving(MemoryLog, heartbeat_interval=None, **options) as running:
        yield running


def port_of(running: Running) -> int:
    return int(running.base.rsplit(":", 1)[1])


async def on_server(running: Running, call: Any) -> Any:
    """Await ``call()`` on the server's event loop."""
    loop = running.server._loop
    assert loop is not None
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call(), loop))


def hub_of(running: Running, stream_id: str) -> Hub | None:
    fanout = running.app.fanout
    assert fanout is not None, "fan-out is off"
    return fanout.hubs.get(stream_id)


async def followed(running: Running, stream_id: str, count: int,
                   rcvbuf: int | None = None) -> list[RawReader]:
    """``count`` raw readers of ``stream_id``, each caught up and following its hub, and the
    hub's reader parked (as a tap: its task is not running)."""
    await on_server(running, lambda: running.app.log.create_stream(stream_id))
    readers = [RawReader(port_of(running), stream_id, rcvbuf) for _ in range(count)]
    for reader in readers:
        await anyio.to_thread.run_sync(reader.read_until, CaughtUpFrame)

    def parked() -> bool:
        hub = hub_of(running, stream_id)
        return (hub is not None and len(hub.followers) == count
                and hub.position.push is not None)

    await wait_for(parked)
    await anyio.sleep(0.05)  # the hub's task reaches its reader's park
    return readers


async def test_an_appended_chunk_is_in_every_followers_socket_when_append_returns(
        served: Running) -> None:
    readers = await followed(served, "s", 3)

    async def append_then_look() -> tuple[int, list[bytes]]:
        seq = await served.app.log.append("s", 1, b'"now"')
        # no await since the append: no other task (the hub's included) ran in between
        return seq, [reader.ready_now() for reader in readers]

    seq, seen = await on_server(served, append_then_look)
    for reader, data in zip(readers, seen, strict=True):
        assert data, "the chunk was not written before append returned"
        reader.take(data)
        assert reader.chunks()[-1] == (seq, b'"now"')


async def test_concurrent_appenders_give_each_follower_every_chunk_once_in_order(
        served: Running) -> None:
    readers = await followed(served, "s", 5)
    log = served.app.log
    writers, each = 8, 40

    async def write_all() -> list[tuple[int, bytes]]:
        written: list[tuple[int, bytes]] = []

        async def writer(w: int) -> None:
            for i in range(each):
                chunk = msgspec.json.encode(f"w{w}-{i}")
                if i % 3 == 2:  # batches too, and a task switch now and then
                    other = msgspec.json.encode(f"w{w}-{i}b")
                    seqs = await log.append_many("s", [(1, chunk), (1, other)])
                    written.extend([(seqs[0], chunk), (seqs[1], other)])
                    await asyncio.sleep(0)
                else:
                    written.append((await log.append("s", 1, chunk), chunk))

        await asyncio.gather(*[writer(w) for w in range(writers)])
        await log.end_stream("s")
        return sorted(written)

    written = await on_server(served, write_all)
    for i, reader in enumerate(readers):
        await anyio.to_thread.run_sync(reader.read_until, EndFrame)
        assert reader.chunks() == written, f"reader {i}"
        assert [f for f in reader.frames if isinstance(f, EndFrame | FailFrame)] == [
            EndFrame(status="completed")]
    await wait_for(lambda: hub_of(served, "s") is None)


@pytest.mark.parametrize("served", [{"max_backlog_bytes": 4 << 20}], indirect=True)
@pytest.mark.usefixtures("small_send_buffers")
async def test_a_follower_left_lagging_by_a_push_hands_pacing_to_the_hub_task(
        served: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    paced = [0]
    real = Hub._paced

    async def counting(self: Hub) -> None:
        paced[0] += 1
        await real(self)

    monkeypatch.setattr(Hub, "_paced", counting)
    (fast,) = await followed(served, "s", 1, SMALL_BUFFER)
    slow = RawReader(port_of(served), "s", 4096)  # it reads nothing until the fast one is done
    await anyio.to_thread.run_sync(slow.read_until, CaughtUpFrame)
    await wait_for(lambda: (hub := hub_of(served, "s")) is not None and len(hub.followers) == 2)
    log = served.app.log
    big = msgspec.json.encode("x" * 60_000)

    async def write() -> list[int]:
        hub = hub_of(served, "s")
        assert hub is not None
        seqs = []
        for _ in range(60):  # ~3.6 MB: more than the kernel buffers of a reader that stopped
            seqs.append(await log.append("s", 1, big))
            await asyncio.sleep(0.002)
        await log.end_stream("s")
        return seqs

    writing = asyncio.ensure_future(on_server(served, write))
    await anyio.to_thread.run_sync(fast.read_until, EndFrame, 30.0)
    seqs = await writing
    assert [s for s, _ in fast.chunks()] == seqs
    assert paced[0] > 0, "no push left the slow follower lagging: the test proves nothing"
    await anyio.to_thread.run_sync(slow.read_until, EndFrame, 30.0)
    assert [s for s, _ in slow.chunks()] == seqs


async def test_a_push_that_fails_ends_the_hub_with_one_fail_and_the_writer_goes_on(
        served: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    readers = await followed(served, "s", 2)
    real = fanout_module.encode_stream_frame
    failed_in: list[asyncio.Task[Any] | None] = []

    def encode(frame: Any) -> bytes:
        if isinstance(frame, ChunkFrame) and bytes(frame.chunk) == b'"boom"':
            failed_in.append(asyncio.current_task())
            raise RuntimeError("a bug in the hub")
        return real(frame)

    monkeypatch.setattr(fanout_module, "encode_stream_frame", encode)

    async def write() -> tuple[list[int], asyncio.Task[Any] | None]:
        first = await served.app.log.append("s", 1, b'"fine"')
        second = await served.app.log.append("s", 1, b'"boom"')  # the writer never sees it
        return [first, second], asyncio.current_task()

    (first, second), writer = await on_server(served, write)
    assert second == first + 1
    assert failed_in == [writer], "the failing page was not pushed from the writer's task"
    for reader in readers:
        await anyio.to_thread.run_sync(reader.read_until, FailFrame)
        assert reader.chunks() == [(first, b'"fine"')]
        ends = [f for f in reader.frames if isinstance(f, EndFrame | FailFrame)]
        assert len(ends) == 1
        assert isinstance(ends[0], FailFrame)
        assert ends[0].recoverable
        assert ends[0].error == "internal server error"  # no internal text by default
    await wait_for(lambda: hub_of(served, "s") is None)
