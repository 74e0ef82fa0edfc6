"""The Python chat transport (D-4's reader side) over real sockets: a durable reply read with the
TRD's ``StreamReader`` and its usual handlers, from the real stream server (uvicorn) and from a
scripted server for exact misbehaviour: ``fail`` -> the ``error`` event and the end, ``truncated``
-> its typed error, a body with no terminal -> ``StreamDropError`` once re-attaching runs out."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from helpers.chaos_proxy import ServerThread
from helpers.scripted import Reply, Scripted
from streamwire.chat import Chat
from streamwire.client import AsyncChatReply, ChatReply, RetryPolicy
from streamwire.contract import Message
from streamwire.errors import StreamDropError, StreamTruncatedError
from streamwire.frames import ChunkCodec, EndFrame, FailFrame, TruncatedFrame, encode_stream_frame
from streamwire.reader import StreamReader

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=3, backoff_initial=0.001, backoff_max=0.01, jitter=0.1)
CODEC = ChunkCodec(Chat)
REPLY: list[Message[Chat, Any]] = [
    Chat.message_start({"userMessageId": "u1", "assistantMessageId": "a1",
                        "model": {"id": "demo", "displayName": "Demo", "provider": "streamwire"}}),
    Chat.reasoning({"chunk": "Let me think."}),
    Chat.reasoning({"done": True}),
    Chat.chunk({"chunk": "Hello, "}),
    Chat.chunk({"chunk": "world."}),
    Chat.sources([{"url": "https://example.org", "title": "Example"}]),
]


def body(messages: list[Message[Chat, Any]], terminal: bytes = b"") -> bytes:
    return b"".join(encode_stream_frame(CODEC.frame(i, m)) for i, m in enumerate(messages, 1)) + terminal


class Collected:
    """What a TRD-style consumer's handlers saw, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def reader(self, readable: Any) -> StreamReader[Chat]:
        reader = StreamReader(readable, Chat)
        for name in ("message_start", "reasoning", "chunk", "sources", "done", "error"):
            event = Chat.event_named(name)
            assert event is not None
            reader.on(event, lambda data, name=name: self.seen.append((name, data)))
        return reader

    @property
    def text(self) -> str:
        return "".join(data["chunk"] for name, data in self.seen if name == "chunk")


async def write_reply(client: httpx.AsyncClient, base: str, stream: str,
                      messages: list[Message[Chat, Any]]) -> None:
    assert (await client.put(f"{base}/streams/{stream}")).status_code < 300
    items = [{"step": 1, "chunk": json.loads(CODEC.encode(m))} for m in messages]
    assert (await client.post(f"{base}/streams/{stream}/chunks", json=items)).status_code == 200


@pytest.fixture(scope="module")
def server() -> Any:
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    with ServerThread(create_app(MemoryLog(), allow_anonymous_writes=True)) as srv:
        yield srv


async def test_a_durable_reply_reaches_the_trd_handlers_then_done(server: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        await write_reply(client, server.url, "ok", REPLY)
        end = await client.post(f"{server.url}/streams/ok/end",
                                json={"status": "completed", "output": {"stopReason": "max_tokens"}})
        assert end.status_code < 300
        got = Collected()
        async with AsyncChatReply(client, f"{server.url}/streams/ok/sse") as reply:
            await got.reader(reply).consume()
    assert [name for name, _ in got.seen] == ["message_start", "reasoning", "reasoning", "chunk",
                                              "chunk", "sources", "done"]
    assert got.text == "Hello, world."
    assert got.seen[-1][1] == {"done": True, "messageId": "a1", "userMessageId": "u1",
                               "reason": "context_limit"}


async def test_d4_a_fail_frame_is_the_error_event_and_the_end(server: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        await write_reply(client, server.url, "bad", REPLY[:4])
        failed = await client.post(f"{server.url}/streams/bad/fail", json={
            "error": "the agent failed", "recoverable": False, "errorDetail": {"code": "AGENT"}})
        assert failed.status_code < 300
        async with AsyncChatReply(client, f"{server.url}/streams/bad/sse") as reply:
            messages = [msg async for msg in reply.messages()]
    assert [m.name for m in messages] == ["message_start", "reasoning", "reasoning", "chunk", "error"]
    assert messages[-1].data == {"error": "the agent failed", "message": "the agent failed"}


def test_the_sync_twin_reads_the_same_reply(server: ServerThread) -> None:
    with httpx.Client(timeout=10) as client:
        assert client.put(f"{server.url}/streams/sync").status_code < 300
        items = [{"step": 1, "chunk": json.loads(CODEC.encode(m))} for m in REPLY]
        assert client.post(f"{server.url}/streams/sync/chunks", json=items).status_code == 200
        assert client.post(f"{server.url}/streams/sync/end",
                           json={"status": "interrupted"}).status_code < 300
        got = Collected()
        with ChatReply(client, f"{server.url}/streams/sync/sse", message_id="x") as reply:
            got.reader(reply).consume_sync()
    assert got.text == "Hello, world."
    assert got.seen[-1] == ("done", {"done": True, "messageId": "a1", "userMessageId": "u1",
                                     "reason": "cancelled"})


async def test_a_cut_reply_is_resumed_from_its_cursor_not_replayed() -> None:
    first = body(REPLY[:3])[:-7]  # cut inside chunk 3: a drop at cursor 2
    replies = [Reply(first), Reply(body(REPLY) + encode_stream_frame(EndFrame("completed")))]
    with Scripted(replies) as srv:
        async with (httpx.AsyncClient(timeout=10) as client,
                    AsyncChatReply(client, srv.url, retry=FAST) as reply):
            names = [event.event async for event in reply]
    assert names == ["message_start", "reasoning", "reasoning", "chunk", "chunk", "sources", "done"]
    assert srv.requests[1].get("last-event-id") == "2"


async def test_d4_a_body_without_a_terminal_raises_stream_drop_error_into_the_consumer() -> None:
    with Scripted([Reply(body(REPLY[:2]))]) as srv:  # every connection ends with no terminal
        async with httpx.AsyncClient(timeout=10) as client:
            got = Collected()
            async with AsyncChatReply(client, srv.url, retry=FAST) as reply:
                with pytest.raises(StreamDropError) as caught:
                    await got.reader(reply).consume()
    assert caught.value.cursor == 2
    assert [name for name, _ in got.seen] == ["message_start", "reasoning"], "no clean done"
    assert len(srv.requests) == 4, "the first connection and three re-attaches"


def test_d4_sync_a_body_without_a_terminal_raises_stream_drop_error() -> None:
    with Scripted([Reply(body(REPLY[:1]))]) as srv, httpx.Client(timeout=10) as client:
        got = Collected()
        with ChatReply(client, srv.url, retry=FAST) as reply, pytest.raises(StreamDropError):
            got.reader(reply).consume_sync()
    assert [name for name, _ in got.seen] == ["message_start"]


async def test_a_truncated_reply_raises_its_typed_error() -> None:
    with Scripted([Reply(encode_stream_frame(TruncatedFrame(5)))]) as srv:
        async with (httpx.AsyncClient(timeout=10) as client,
                    AsyncChatReply(client, srv.url, retry=FAST) as reply):
            with pytest.raises(StreamTruncatedError) as caught:
                await Collected().reader(reply).consume()
    assert caught.value.floor == 5


async def test_a_recoverable_fail_that_stays_becomes_the_error_event() -> None:
    # Each connection fails anew (another worker each time): the same fail again at the same
    # cursor would be stored and settle after one re-attach (tests/test_client_settle.py).
    def lost(n: int) -> bytes:
        return encode_stream_frame(FailFrame("worker lost", True,
                                             {"code": "WORKER_LOST", "worker": n}))
    with Scripted([Reply(body(REPLY[:4]) + lost(n)) for n in range(4)]) as srv:
        async with (httpx.AsyncClient(timeout=10) as client,
                    AsyncChatReply(client, srv.url, retry=FAST) as reply):
            messages = [msg async for msg in reply.messages()]
    assert [m.name for m in messages][-2:] == ["chunk", "error"]
    assert messages[-1].data == {"error": "worker lost", "message": "worker lost"}
    assert len(srv.requests) == 4, "re-attached as the seed asks, then settled"


async def test_closing_the_reply_ends_it_quietly(server: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        await write_reply(client, server.url, "open", REPLY[:2])  # still active: no terminal
        async with AsyncChatReply(client, f"{server.url}/streams/open/sse") as reply:
            names = []
            async for event in reply:
                names.append(event.event)
                if len(names) == 2:
                    await reply.aclose()
    assert names == ["message_start", "reasoning"]
