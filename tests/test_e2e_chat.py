"""End to end over real sockets: a FastAPI app served by uvicorn on 127.0.0.1 streams chat replies
with ``StreamWriter`` into ``create_sse_writable``; an httpx client reads them with
``StreamReader`` over ``create_sse_readable``. Covers every chat event, a client that disconnects
mid-stream (the server's writer ends ``cancelled``), a server-side timeout (``done`` with reason
``timeout``), backpressure from a client that stops reading, and what a newcomer meets: error
answers (404, 405, 422, an HTML page) as typed errors, payloads and end reasons of the wrong shape
refused at write time, producer failures logged and named, heartbeats on a quiet stream."""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import anyio
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from helpers.chat_samples import CHAT_SAMPLES, MODEL
from streamwire.chat import Chat, DonePayload
from streamwire.client import create_sse_readable
from streamwire.errors import PayloadError, ResponseStatusError, UsageError
from streamwire.reader import StreamReader
from streamwire.server import SSEResponse, create_sse_writable
from streamwire.transport import DEFAULT_HIGH_WATER, SSE_HEADERS, AbortSignal, SSEWritable
from streamwire.writer import StreamWriter

pytestmark = pytest.mark.anyio

#: Every non-terminal chat event (each union variant), then ``done``: a full chat reply.
REPLY: Final = [msg for name, msg, _ in CHAT_SAMPLES if msg.name not in ("done", "error")]
BIG_CHUNK: Final = "x" * 64 * 1024


class ServerState:
    """What the server saw, for assertions made from the client side."""

    def __init__(self) -> None:
        self.writers: dict[str, StreamWriter[Chat]] = {}
        self.responses: dict[str, SSEResponse] = {}
        self.written: dict[str, int] = {}


STATE: Final = ServerState()
app = FastAPI()


def stream(key: str, produce: Any, **options: Any) -> SSEResponse:
    """The route body: stream ``produce(writer)`` and remember the writer under ``key``."""

    async def run(writable: SSEWritable, signal: AbortSignal) -> None:
        writer = StreamWriter(writable, Chat, signal=signal)
        STATE.writers[key] = writer
        await produce(writer)

    response = STATE.responses[key] = create_sse_writable(run, **options)
    return response


@app.post("/chat")
async def chat() -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        for msg in REPLY:
            await writer.event(msg)
        await writer.end("complete", "a1", "u1")

    return stream("chat", produce)


@app.post("/chat-error")
async def chat_error() -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        await writer.event(Chat.chunk({"chunk": "I was say"}))
        await writer.error("Model overloaded, try again")

    return stream("chat-error", produce)


@app.get("/endless/{key}")
async def endless(key: str) -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        await writer.event(Chat.message_start({"userMessageId": "u2", "assistantMessageId": "a2",
                                               "model": MODEL}))
        i = 0
        while True:
            await writer.event(Chat.chunk({"chunk": f"token {i} "}))
            i += 1
            await anyio.sleep(0.005)

    return stream(key, produce)


@app.get("/stalled")
async def stalled() -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        await writer.event(Chat.message_start({"userMessageId": "u3", "assistantMessageId": "a3",
                                               "model": MODEL}))
        await writer.event(Chat.progress({"chunk": "calling a slow tool"}))
        await anyio.sleep(60)  # the tool never answers
        await writer.end("complete", "a3", "u3")

    return stream("stalled", produce, timeout=0.5)


@app.get("/flood")
async def flood() -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        STATE.written["flood"] = 0
        for _ in range(2000):  # 128 MiB if nothing pushed back
            await writer.event(Chat.chunk({"chunk": BIG_CHUNK}))
            STATE.written["flood"] += 1
        await writer.end("complete", "", "")

    return stream("flood", produce)


class Question(BaseModel):
    text: str


@app.post("/ask")
async def ask(question: Question) -> SSEResponse:  # a body missing -> FastAPI answers 422
    async def produce(writer: StreamWriter[Chat]) -> None:
        await writer.end("complete", "", "")

    return stream("ask", produce)


@app.get("/page", response_class=HTMLResponse)
async def page() -> str:
    return "<html><body>" + "Welcome! " * 100 + "</body></html>"


@app.get("/wrong-field")
async def wrong_field() -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        durable_shape: Any = {"text": "Hello"}  # the durable chat's field, not the TRD's
        await writer.event(Chat.chunk(durable_shape))
        await writer.end("complete", "", "")

    return stream("wrong-field", produce)


@app.get("/wrong-reason")
async def wrong_reason() -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        await writer.event(Chat.chunk({"chunk": "Hello"}))
        durable_word: Any = "completed"
        await writer.end(durable_word, "", "")

    return stream("wrong-reason", produce)


@app.get("/forgot-end")
async def forgot_end() -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        await writer.event(Chat.chunk({"chunk": "Hello"}))

    return stream("forgot-end", produce)


@app.get("/quiet")
async def quiet(heartbeat: float = 0.0) -> SSEResponse:
    async def produce(writer: StreamWriter[Chat]) -> None:
        await writer.event(Chat.progress({"chunk": "calling a slow tool"}))
        await anyio.sleep(0.55)  # the tool takes its time; heartbeats keep proxies patient
        await writer.end("complete", "", "")

    return stream("quiet", produce, heartbeat=heartbeat or None)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                            ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


async def wait_until(predicate: Any, seconds: float = 5.0) -> None:
    # Polled: the state changes in uvicorn's thread, where no anyio.Event of ours can be set.
    with anyio.fail_after(seconds):
        while not predicate():  # noqa: ASYNC110
            await anyio.sleep(0.01)


def record(into: list[Any], name: str) -> Any:
    """A handler that appends ``(name, payload)`` (or just ``name`` if ``into`` holds names)."""
    return lambda data: into.append((name, data))


async def test_full_chat_reply_reaches_every_handler(base_url: str) -> None:
    received: list[tuple[str, object]] = []
    parse_errors: list[str] = []
    reader_events = {msg.event for msg in REPLY} | {Chat.done}
    async with httpx.AsyncClient(base_url=base_url) as client, client.stream(
            "POST", "/chat") as response:
        assert response.status_code == 200
        for header, value in SSE_HEADERS.items():
            if header != "Connection":  # hop-by-hop: the server manages it
                assert response.headers[header] == value
        reader = StreamReader(create_sse_readable(response), Chat)
        for event in reader_events:
            reader.on(event, record(received, event.name))
        await reader.on_parse_error(lambda e, raw, err: parse_errors.append(e)).consume()
    assert parse_errors == []
    assert received[:-1] == [(msg.name, msg.data) for msg in REPLY]
    done: DonePayload = {"done": True, "messageId": "a1", "userMessageId": "u1",
                         "reason": "complete"}
    assert received[-1] == ("done", done)
    assert STATE.writers["chat"].end_reason == "complete"


async def test_error_reply_ends_with_the_error_event(base_url: str) -> None:
    got: list[object] = []
    async with httpx.AsyncClient(base_url=base_url) as client, client.stream(
            "POST", "/chat-error") as response:
        await (StreamReader(create_sse_readable(response), Chat)
               .on(Chat.chunk, got.append).on(Chat.error, got.append).consume())
    assert got == [{"chunk": "I was say"},
                   {"error": "Model overloaded, try again",
                    "message": "Model overloaded, try again"}]
    assert STATE.writers["chat-error"].closed
    assert STATE.writers["chat-error"].end_reason is None


def test_sync_client_reads_the_full_reply(base_url: str) -> None:
    names: list[tuple[str, object]] = []
    with httpx.Client(base_url=base_url) as client, client.stream("POST", "/chat") as response:
        reader = StreamReader(create_sse_readable(response), Chat)
        for event in {msg.event for msg in REPLY}:
            reader.on(event, record(names, event.name))
        reader.on(Chat.done, lambda d: names.append(("done", d["reason"]))).consume_sync()
    assert names == [(msg.name, msg.data) for msg in REPLY] + [("done", "complete")]


class StopReading(Exception):
    pass


async def test_client_disconnect_ends_the_server_writer_with_cancelled(base_url: str) -> None:
    chunks: list[str] = []

    def on_chunk(data: Any) -> None:
        chunks.append(data["chunk"])
        if len(chunks) == 5:
            raise StopReading  # a consumer that leaves mid-stream

    async with httpx.AsyncClient(base_url=base_url) as client:
        async with client.stream("GET", "/endless/disconnect") as response:
            with pytest.raises(StopReading):
                await StreamReader(create_sse_readable(response), Chat).on(
                    Chat.chunk, on_chunk).consume()
            assert response.is_closed  # the reader released the body
        await wait_until(lambda: STATE.writers["disconnect"].closed)
    writer = STATE.writers["disconnect"]
    assert writer.end_reason == "cancelled"
    assert STATE.responses["disconnect"].signal.reason == "cancelled"
    writable = STATE.responses["disconnect"].writable
    assert writable is not None
    assert writable.disconnected
    assert writer.message_id == "a2"
    assert chunks == [f"token {i} " for i in range(5)]


async def test_server_timeout_ends_with_done_timeout(base_url: str) -> None:
    got: list[tuple[str, object]] = []
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=base_url) as client, client.stream(
            "GET", "/stalled") as response:
        await (StreamReader(create_sse_readable(response), Chat)
               .on(Chat.progress, lambda d: got.append(("progress", d)))
               .on(Chat.done, lambda d: got.append(("done", d))).consume())
    assert time.monotonic() - started < 5
    assert got == [("progress", {"chunk": "calling a slow tool"}),
                   ("done", {"done": True, "messageId": "a3", "userMessageId": "u3",
                             "reason": "timeout"})]
    assert STATE.writers["stalled"].end_reason == "timeout"


async def test_a_client_that_stops_reading_does_not_grow_server_memory(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client, client.stream(
            "GET", "/flood") as response:
        body = response.aiter_raw()
        await anext(body)  # the stream is flowing; now stop reading
        await wait_until(lambda: STATE.written.get("flood", 0) > 0)
        stalled_at = -1
        while stalled_at != STATE.written["flood"]:  # wait until the producer is held back
            stalled_at = STATE.written["flood"]
            await anyio.sleep(0.3)
        writable = STATE.responses["flood"].writable
        assert writable is not None
        frame_size = len(BIG_CHUNK) + 30
        # The producer waits: what it wrote fits in the socket buffers plus the high-water
        # mark (tens of MiB at most on loopback), far from the 128 MiB it would have written.
        print(f"flood: {STATE.written['flood']} frames written, peak queue "
              f"{writable.peak_buffered} bytes")
        assert STATE.written["flood"] < 2000
        assert STATE.written["flood"] * frame_size < 48 * 1024 * 1024
        assert writable.peak_buffered <= DEFAULT_HIGH_WATER + frame_size
        await response.aclose()
    await wait_until(lambda: STATE.writers["flood"].closed)
    assert STATE.writers["flood"].end_reason == "cancelled"


# -- what a newcomer meets --------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "status", "body_start"), [
    ("GET", "/no-such-route", 404, '{"detail":"Not Found"}'),
    ("POST", "/stalled", 405, '{"detail":"Method Not Allowed"}'),
    ("POST", "/ask", 422, '{"detail":[{"type":"missing"'),
    ("GET", "/page", 200, "<html><body>Welcome! Welcome!"),
], ids=["404", "405", "422", "html-page"])
async def test_an_answer_that_is_not_an_event_stream_is_a_typed_error(
        base_url: str, method: str, path: str, status: int, body_start: str) -> None:
    got: list[object] = []
    async with httpx.AsyncClient(base_url=base_url) as client, client.stream(
            method, path) as response:
        reader = StreamReader(create_sse_readable(response), Chat).on(Chat.done, got.append)
        with pytest.raises(ResponseStatusError) as info:
            await reader.consume()
        assert response.is_closed  # the body was released
    error = info.value
    assert error.status_code == status
    assert body_start in str(error)  # the start of the body says what went wrong
    assert len(str(error)) < 500  # the start, not the whole page
    if status == 200:
        assert "this is not an event stream: expected text/event-stream, got 'text/html" in (
            str(error))
    else:
        assert f"HTTP {status}: " in str(error)
    assert got == []


def test_the_sync_reader_refuses_an_error_answer_too(base_url: str) -> None:
    with (httpx.Client(base_url=base_url) as client, client.stream("POST", "/ask") as response,
          pytest.raises(ResponseStatusError, match=r"HTTP 422: .*missing")):
        StreamReader(create_sse_readable(response), Chat).consume_sync()


async def read_reply(base_url: str, path: str) -> list[tuple[str, object]]:
    got: list[tuple[str, object]] = []
    async with httpx.AsyncClient(base_url=base_url) as client, client.stream(
            "GET", path) as response:
        await (StreamReader(create_sse_readable(response), Chat)
               .on(Chat.chunk, lambda d: got.append(("chunk", d)))
               .on(Chat.done, lambda d: got.append(("done", d)))
               .on(Chat.error, lambda d: got.append(("error", d["message"])))
               .on_parse_error(lambda e, raw, err: got.append(("parse error", e)))
               .consume())
    return got


def server_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "streamwire.server"]


async def test_a_payload_of_the_wrong_shape_fails_loudly_on_the_server(
        base_url: str, caplog: pytest.LogCaptureFixture) -> None:
    got = await read_reply(base_url, "/wrong-field")
    # Not a silent drop on the client: an error event saying what kind of failure it was...
    assert got == [("error", "Stream aborted unexpectedly: the stream's producer failed")]
    # ...and the server log has the cause, with the exception.
    await wait_until(lambda: server_errors(caplog))
    (record,) = server_errors(caplog)
    assert "GET /wrong-field: the stream's producer raised PayloadError" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], PayloadError)
    assert "missing required field `chunk`" in str(record.exc_info[1])


async def test_end_with_the_durable_word_names_the_valid_reasons(
        base_url: str, caplog: pytest.LogCaptureFixture) -> None:
    got = await read_reply(base_url, "/wrong-reason")
    assert got == [("chunk", {"chunk": "Hello"}),
                   ("error", "Stream aborted unexpectedly: the stream's producer failed")]
    await wait_until(lambda: server_errors(caplog))
    (record,) = server_errors(caplog)
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], UsageError)
    assert "complete, max_rounds, cancelled, context_limit, timeout" in str(record.exc_info[1])


async def test_a_producer_that_returns_without_end_is_named_and_logged(
        base_url: str, caplog: pytest.LogCaptureFixture) -> None:
    got = await read_reply(base_url, "/forgot-end")
    assert got == [("chunk", {"chunk": "Hello"}),
                   ("error", "Stream aborted unexpectedly: the stream's producer returned "
                             "without ending it")]
    await wait_until(lambda: server_errors(caplog))
    (record,) = server_errors(caplog)
    assert "GET /forgot-end: the stream's producer returned without ending the stream" in (
        record.getMessage())


async def raw_body(base_url: str, path: str) -> bytes:
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.get(path)
    return response.content


async def test_a_quiet_stream_sends_heartbeat_comments(base_url: str) -> None:
    body = await raw_body(base_url, "/quiet?heartbeat=0.1")
    # 0.55 s of silence at one comment per 0.1 s quiet: about five, never fewer than three.
    beats = body.count(b": heartbeat\n\n")
    assert 3 <= beats <= 6, body
    assert body.startswith(b"event: progress\n")
    assert body.endswith(b'"reason":"complete"}\n\n')
    # A reader does not see them.
    assert await read_reply(base_url, "/quiet?heartbeat=0.1") == [
        ("done", {"done": True, "messageId": "", "userMessageId": "", "reason": "complete"})]


async def test_heartbeat_none_sends_none_and_the_default_is_15_seconds(base_url: str) -> None:
    body = await raw_body(base_url, "/quiet")
    assert [line for line in body.split(b"\n") if line.startswith(b":")] == []
    assert body.endswith(b'"reason":"complete"}\n\n')
    default = inspect.signature(SSEResponse).parameters["heartbeat"].default
    assert default == 15.0  # like sse-starlette's ping
