"""A re-attach storm over real uvicorn on every backend: hundreds of readers attach to one stream
at once (as after a restart), at cursors spread over its last 100 chunks, while the writer goes
on and then ends the stream. Each reader gets every chunk after its cursor exactly once, in
order, and exactly one terminal; on the logs that let readers join a hub without a reader of
their own (``ReadPosition.join``: memory, Redis) most of them do. Bounded in time."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import h11
import httpx
import msgspec
import pytest

import streamwire.server._fanout as fanout_module
from helpers.server import LogFactory, append, backend, serving
from streamwire.frames import ChunkFrame, EndFrame, StreamFrame, UnknownFrame, decode_stream_frame
from streamwire.sse import SSEDecoder

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # a fixture, used by name

READERS = 500
SPREAD = 100  # the cursors: the last 100 chunks
BEFORE = 300  # chunks written before the storm
DURING = 40  # chunks written while it attaches
LIMIT = 90.0  # seconds for the whole storm


@dataclass
class Reader:
    cursor: int
    frames: list[StreamFrame | UnknownFrame] = field(default_factory=list)
    connections: int = 0

    @property
    def last(self) -> int:
        chunks = [f.sequence for f in self.frames if isinstance(f, ChunkFrame)]
        return chunks[-1] if chunks else self.cursor

    @property
    def ended(self) -> bool:
        return any(isinstance(f, EndFrame) for f in self.frames)


async def _connect(port: int, stream_id: str, reader: Reader) -> None:
    """One connection from the reader's last sequence to the end of its body (a drop included)."""
    reader.connections += 1
    socket_reader, writer = await asyncio.open_connection("127.0.0.1", port)
    conn = h11.Connection(h11.CLIENT)
    target = f"/streams/{stream_id}/sse?cursor={reader.last}"
    writer.write(conn.send(h11.Request(method="GET", target=target,
                                       headers=[("host", "127.0.0.1")])))
    writer.write(conn.send(h11.EndOfMessage()))
    decoder = SSEDecoder()
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await socket_reader.read(65536))
                continue
            if isinstance(event, h11.Response):
                assert event.status_code == 200, event
            elif isinstance(event, h11.Data):
                reader.frames += [decode_stream_frame(e) for e in decoder.feed(bytes(event.data))]
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return
    except (h11.RemoteProtocolError, ConnectionError):
        return  # a drop (an eviction resets): it re-attaches from its last sequence
    finally:
        writer.close()


async def _read(port: int, stream_id: str, reader: Reader) -> None:
    while not reader.ended:
        assert reader.connections < 5, f"reader at {reader.cursor}: re-attached 4 times"
        await _connect(port, stream_id, reader)


def _check(reader: Reader, written: dict[int, bytes], who: str) -> None:
    got = [(f.sequence, bytes(f.chunk)) for f in reader.frames if isinstance(f, ChunkFrame)]
    want = [(s, written[s]) for s in sorted(written) if s > reader.cursor]
    if got != want:
        seqs = [s for s, _ in got]
        dupes = sorted(s for s, n in Counter(seqs).items() if n > 1)
        raise AssertionError(f"{who}: {len(got)} chunks, expected {len(want)}; duplicates "
                             f"{dupes[:10]}, first {seqs[:5]}")
    ends = [f for f in reader.frames if isinstance(f, EndFrame)]
    assert len(ends) == 1, f"{who}: terminals {ends}"
    assert reader.frames[-1] is ends[0], f"{who}: frames after the terminal"


async def test_storm_of_readers_each_get_every_chunk_once_and_one_terminal(
        backend: LogFactory, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    joined = Counter[str]()
    enter = fanout_module.Fanout.enter

    def counting(self: Any, conn: Any, joining: Any) -> Any:
        follower = enter(self, conn, joining)
        joined["hub" if follower is not None else "moved"] += 1
        return follower

    monkeypatch.setattr(fanout_module.Fanout, "enter", counting)
    written: dict[int, bytes] = {}

    async def write(count: int) -> None:
        texts = [f"chunk {len(written) + i + 1}" for i in range(count)]
        sequences = await append(client, "storm", *texts)
        written.update((s, msgspec.json.encode(t)) for s, t in zip(sequences, texts, strict=True))

    with serving(backend, max_connections_per_stream=READERS + 10, heartbeat_interval=None,
                 max_connections=READERS + 50) as srv:
        port = int(srv.base.rsplit(":", 1)[1])
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await client.put("/streams/storm")
            for _ in range(BEFORE // 100):
                await write(100)
            rng = random.Random(25)
            readers = [Reader(BEFORE - rng.randrange(SPREAD + 1)) for _ in range(READERS)]
            with anyio.fail_after(LIMIT):
                async with anyio.create_task_group() as tg:
                    for reader in readers:
                        tg.start_soon(_read, port, "storm", reader)
                    for _ in range(DURING // 4):  # the writer goes on meanwhile
                        await write(4)
                        await anyio.sleep(0.05)
                    # every reader attached (it has chunks, or its cursor is the head) before the end
                    while not all(r.frames for r in readers):  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                    await write(4)
                    resp = await client.post("/streams/storm/end", json={"status": "completed"})
                    assert resp.status_code == 200, resp.text
        srv.stop()
    for i, reader in enumerate(readers):
        _check(reader, written, f"reader {i} at {reader.cursor}")
    if request.node.callspec.params["backend"] != "sqlite":  # SQLite readers replay alone
        assert joined["hub"] >= READERS // 2, f"few joined a hub without a reader: {joined}"
