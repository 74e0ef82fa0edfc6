"""The transports: the TRD's stream-sse-writable group (headers, frame format, special characters,
``end()``, plus backpressure, disconnect and timeout) over the ASGI interface, and its
stream-sse-readable group (parsing, blank-line dispatch, split frames, cleanup, edge cases) over
byte chunks and over httpx responses from a real socket."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any, ClassVar, Final

import anyio
import httpx
import pytest

from streamwire.chat import Chat
from streamwire.client import create_sse_readable
from streamwire.errors import SSEDecodeError, StreamDropError, UsageError
from streamwire.server import SSEResponse, create_sse_writable
from streamwire.sse import SSEEvent
from streamwire.transport import (
    DEFAULT_HIGH_WATER,
    SSE_HEADERS,
    AbortSignal,
    MemoryWritable,
    ProducerFailure,
    SSEWritable,
)
from streamwire.writer import StreamWriter

pytestmark = pytest.mark.anyio

HTTP_SCOPE: Final[dict[str, Any]] = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"},
                     "method": "GET", "path": "/", "headers": []}


class ASGICall:
    """Calls an ASGI app the way a server does, with plain ``receive`` / ``send`` callables."""

    def __init__(self, *, send_delay: float = 0.0, disconnect_after: int | None = None) -> None:
        self.messages: list[dict[str, Any]] = []
        self.send_delay = send_delay
        self.disconnect_after = disconnect_after  # body messages, then the client leaves
        self._requested = False
        self._gone: anyio.Event | None = None

    async def receive(self) -> dict[str, Any]:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        assert self._gone is not None
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        assert self._gone is not None
        if self._gone.is_set():
            raise OSError("client disconnected")  # what ASGI >= 2.4 servers raise
        self.messages.append(message)
        if self.disconnect_after is not None and len(self.body_messages) >= self.disconnect_after:
            self._gone.set()
        if self.send_delay:
            await anyio.sleep(self.send_delay)

    async def run(self, app: Any) -> None:
        self._gone = anyio.Event()
        with anyio.fail_after(10):
            await app(HTTP_SCOPE, self.receive, self.send)

    @property
    def start(self) -> dict[str, Any]:
        return self.messages[0]

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.start["headers"]}

    @property
    def body_messages(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == "http.response.body"]

    @property
    def body(self) -> bytes:
        return b"".join(m["body"] for m in self.body_messages)

    @property
    def completed(self) -> bool:
        return bool(self.body_messages) and self.body_messages[-1]["more_body"] is False


def frame(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


async def chat_reply(writable: SSEWritable, signal: AbortSignal) -> None:
    writer = StreamWriter(writable, Chat, signal=signal)
    await writer.event(Chat.chunk({"chunk": "Hello"}))
    await writer.end("complete", "m1", "u1")


DONE_M1: Final = frame("done", '{"done":true,"messageId":"m1","userMessageId":"u1",'
                               '"reason":"complete"}')


# -- SSE writable (ASGI) ------------------------------------------------------------------------


class TestSSEWritable:
    @pytest.mark.parametrize(("header", "value"), list(SSE_HEADERS.items()),
                             ids=list(SSE_HEADERS))
    async def test_sets_each_sse_header(self, header: str, value: str) -> None:
        call = ASGICall()
        await call.run(create_sse_writable(chat_reply))
        assert call.headers[header.lower()] == value

    async def test_status_and_no_content_length(self) -> None:
        call = ASGICall()
        await call.run(create_sse_writable(chat_reply))
        assert call.start["status"] == 200
        assert "content-length" not in call.headers
        assert SSE_HEADERS["Content-Type"] == "text/event-stream"

    async def test_extra_headers_and_status_are_merged(self) -> None:
        call = ASGICall()
        await call.run(create_sse_writable(chat_reply, status_code=201,
                                           headers={"X-Request-Id": "r1"}))
        assert call.start["status"] == 201
        assert call.headers["x-request-id"] == "r1"
        assert call.headers["cache-control"] == "no-cache"

    async def test_frame_format(self) -> None:
        call = ASGICall()
        await call.run(create_sse_writable(chat_reply))
        assert call.body == frame("chunk", '{"chunk":"Hello"}') + DONE_M1
        assert call.completed

    async def test_raw_write_formats_event_and_data(self) -> None:
        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writable.write("custom", "plain text")
            writable.write("multi", "line one\nline two")
            writable.end()

        call = ASGICall()
        await call.run(create_sse_writable(produce))
        assert call.body == (b"event: custom\ndata: plain text\n\n"
                             b"event: multi\ndata: line one\ndata: line two\n\n")

    async def test_special_characters_are_preserved(self) -> None:
        text = 'héllo "wörld" ✓ 🚀\n\\ </script>'

        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writer = StreamWriter(writable, Chat, signal=signal)
            await writer.event(Chat.chunk({"chunk": text}))
            await writer.end("complete", "", "")

        call = ASGICall()
        await call.run(create_sse_writable(produce))
        first = call.body.split(b"\n\n")[0]
        assert first.startswith(b"event: chunk\ndata: ")
        assert json.loads(first.split(b"data: ", 1)[1]) == {"chunk": text}

    async def test_event_name_with_a_line_break_is_refused(self) -> None:
        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writable.write("bad\nevent: injected", "x")

        call = ASGICall()
        with pytest.raises(ValueError, match="frame injection"):
            await call.run(create_sse_writable(produce))
        assert call.completed  # the body still ended cleanly

    async def test_end_delegation_completes_the_body(self) -> None:
        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writable.write("chunk", '{"chunk":"x"}')
            writable.end()
            writable.end()  # idempotent
            await anyio.sleep(0.05)  # the body is complete before the producer returns

        call = ASGICall()
        await call.run(create_sse_writable(produce))
        assert call.body == frame("chunk", '{"chunk":"x"}')
        assert [m["more_body"] for m in call.body_messages][-1] is False
        assert len([m for m in call.body_messages if not m["more_body"]]) == 1

    async def test_write_after_end_is_a_usage_error(self) -> None:
        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writable.end()
            writable.write("chunk", "{}")

        with pytest.raises(UsageError, match="after end"):
            await ASGICall().run(create_sse_writable(produce))

    async def test_producer_exception_sends_error_and_is_re_raised(
            self, caplog: pytest.LogCaptureFixture) -> None:
        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writer = StreamWriter(writable, Chat, signal=signal)
            await writer.event(Chat.chunk({"chunk": "partial"}))
            raise RuntimeError("model crashed: secret=hunter2")

        call = ASGICall()
        with pytest.raises(RuntimeError, match="model crashed"):
            await call.run(create_sse_writable(produce))
        failed = "Stream aborted unexpectedly: the stream's producer failed"
        assert call.body.endswith(frame("error", f'{{"error":"{failed}","message":"{failed}"}}'))
        assert b"hunter2" not in call.body  # the exception's text stays on the server
        assert call.completed
        # The server says what happened, with the exception and its traceback.
        (record,) = [r for r in caplog.records if r.name == "streamwire.server"]
        assert record.levelname == "ERROR"
        assert "GET /: the stream's producer raised RuntimeError" in record.getMessage()
        assert record.exc_info is not None
        assert str(record.exc_info[1]) == "model crashed: secret=hunter2"

    async def test_producer_returning_without_terminal_sends_error(
            self, caplog: pytest.LogCaptureFixture) -> None:
        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writer = StreamWriter(writable, Chat, signal=signal)
            await writer.event(Chat.chunk({"chunk": "forgot to end"}))

        call = ASGICall()
        response = create_sse_writable(produce)
        await call.run(response)
        returned = "Stream aborted unexpectedly: the stream's producer returned without ending it"
        assert call.body.endswith(frame("error",
                                        f'{{"error":"{returned}","message":"{returned}"}}'))
        assert call.completed
        reason = response.signal.reason
        assert isinstance(reason, ProducerFailure)
        assert reason.exception is None
        (record,) = [r for r in caplog.records if r.name == "streamwire.server"]
        assert "returned without ending the stream" in record.getMessage()
        assert "writer.end(...)" in record.getMessage()

    async def test_a_producer_that_ends_its_stream_logs_nothing(
            self, caplog: pytest.LogCaptureFixture) -> None:
        await ASGICall().run(create_sse_writable(chat_reply))
        assert [r for r in caplog.records if r.name == "streamwire.server"] == []

    async def test_timeout_ends_with_done_timeout_and_tracked_ids(self) -> None:
        writers: list[StreamWriter[Chat]] = []
        cancelled: list[bool] = []

        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writer = StreamWriter(writable, Chat, signal=signal)
            writers.append(writer)
            await writer.event(Chat.message_start({
                "userMessageId": "u5", "assistantMessageId": "a5",
                "model": {"id": "m", "displayName": "M", "provider": "p"}}))
            try:
                await anyio.sleep(30)  # a model that never answers
            except anyio.get_cancelled_exc_class():
                cancelled.append(True)
                raise

        call = ASGICall()
        started = time.monotonic()
        await call.run(create_sse_writable(produce, timeout=0.2))
        assert time.monotonic() - started < 5
        assert call.body.endswith(frame("done", '{"done":true,"messageId":"a5",'
                                                '"userMessageId":"u5","reason":"timeout"}'))
        assert call.completed
        assert writers[0].end_reason == "timeout"
        assert cancelled == [True]

    async def test_timeout_does_not_fire_after_a_normal_end(self) -> None:
        call = ASGICall()
        response = create_sse_writable(chat_reply, timeout=0.05)
        await call.run(response)
        await anyio.sleep(0.1)
        assert call.body.endswith(DONE_M1)
        assert not response.signal.aborted

    async def test_disconnect_aborts_with_cancelled_and_cancels_the_producer(self) -> None:
        writers: list[StreamWriter[Chat]] = []
        produced: list[int] = []
        finished: list[str] = []

        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writer = StreamWriter(writable, Chat, signal=signal)
            writers.append(writer)
            try:
                for i in range(10_000):
                    await writer.event(Chat.chunk({"chunk": str(i)}))
                    produced.append(i)
                    await anyio.sleep(0.001)
            finally:
                finished.append("cleanup ran")

        call = ASGICall(disconnect_after=3)
        response = create_sse_writable(produce)
        await call.run(response)
        assert writers[0].closed
        assert writers[0].end_reason == "cancelled"
        assert response.signal.reason == "cancelled"
        assert response.writable is not None
        assert response.writable.disconnected
        assert len(produced) < 10_000
        assert finished == ["cleanup ran"]
        assert b"event: done" not in call.body  # nobody was left to receive it

    async def test_client_gone_before_the_start_aborts_without_running_the_producer(self) -> None:
        ran: list[bool] = []

        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            ran.append(True)

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            raise OSError("client disconnected")

        response = create_sse_writable(produce)
        await response(HTTP_SCOPE, receive, send)
        assert ran == []
        assert response.signal.reason == "cancelled"

    async def test_backpressure_bounds_the_queue_for_a_slow_client(self) -> None:
        payload = "x" * 10_000
        sent: list[int] = []

        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writer = StreamWriter(writable, Chat, signal=signal)
            for i in range(200):
                await writer.event(Chat.chunk({"chunk": payload}))
                sent.append(i)
            await writer.end("complete", "", "")

        call = ASGICall(send_delay=0.005)
        response = create_sse_writable(produce)
        await call.run(response)
        assert response.writable is not None
        frame_size = len(frame("chunk", json.dumps({"chunk": payload}, separators=(",", ":"))))
        # 2 MB went through, but never more than the high-water mark plus one frame was queued.
        assert len(call.body) > 200 * frame_size
        assert response.writable.peak_buffered <= DEFAULT_HIGH_WATER + frame_size
        assert response.writable.buffered == 0

    async def test_writing_without_drain_stops_at_max_buffer_size(self) -> None:
        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            for _ in range(100):
                writable.write("chunk", "y" * 1000)  # never drains

        call = ASGICall(send_delay=0.05)
        with pytest.raises(UsageError, match="max_buffer_size=10000"):
            await call.run(create_sse_writable(produce, high_water=1000, max_buffer_size=10_000))

    async def test_a_response_streams_once(self) -> None:
        response = create_sse_writable(chat_reply)
        await ASGICall().run(response)
        with pytest.raises(UsageError, match="streams once"):
            await ASGICall().run(response)

    @pytest.mark.parametrize("kwargs", [{"high_water": -1}, {"high_water": 10, "max_buffer_size": 5},
                                        {"timeout": 0}, {"timeout": -1.0}])
    def test_invalid_options_are_value_errors(self, kwargs: dict[str, Any]) -> None:
        with pytest.raises(ValueError, match=r"high_water|timeout"):
            SSEResponse(chat_reply, **kwargs)


class TestMemoryWritable:
    async def test_collects_frames_and_body(self) -> None:
        out = MemoryWritable()
        out.write("a", "1")
        out.write("b", "2\n3")
        await out.drain()
        out.end()
        assert out.frames == [("a", "1"), ("b", "2\n3")]
        assert bytes(out.body) == b"event: a\ndata: 1\n\nevent: b\ndata: 2\ndata: 3\n\n"
        assert out.ended

    def test_write_after_end_is_a_usage_error(self) -> None:
        out = MemoryWritable()
        out.end()
        with pytest.raises(UsageError, match=r"write\('a'\) after end"):
            out.write("a", "1")


# -- SSE readable over byte chunks ---------------------------------------------------------------


async def read_all(*chunks: bytes, **limits: int) -> list[SSEEvent]:
    return [event async for event in create_sse_readable(list(chunks), **limits)]


def pairs(events: list[SSEEvent]) -> list[tuple[str, str]]:
    return [(e.event, e.data) for e in events]


STREAM: Final = (b"event: message_start\ndata: {\"userMessageId\":\"u\"}\n\n"
                 b"event: chunk\ndata: {\"chunk\":\"Hel\"}\n\n"
                 b": keep-alive comment\n\n"
                 b"event: chunk\r\ndata: {\"chunk\":\"lo \xc3\xa9\xe2\x9c\x93\"}\r\n\r\n"
                 b"event: done\rdata: {\"done\":true}\r\r")
STREAM_EVENTS: Final = [("message_start", '{"userMessageId":"u"}'), ("chunk", '{"chunk":"Hel"}'),
                        ("chunk", '{"chunk":"lo é✓"}'), ("done", '{"done":true}')]


class TestSSEReadable:
    async def test_single_event(self) -> None:
        assert pairs(await read_all(b"event: chunk\ndata: {}\n\n")) == [("chunk", "{}")]

    async def test_several_events_in_one_chunk(self) -> None:
        assert pairs(await read_all(STREAM)) == STREAM_EVENTS

    async def test_event_without_name_is_message(self) -> None:
        assert pairs(await read_all(b"data: x\n\n")) == [("message", "x")]

    async def test_dispatch_waits_for_the_blank_line(self) -> None:
        readable = create_sse_readable([b"event: a\ndata: 1\n", b"data: 2\n", b"\n"])
        assert pairs([e async for e in readable]) == [("a", "1\n2")]

    async def test_multiple_data_lines_are_joined_with_lf(self) -> None:
        assert pairs(await read_all(b"data: a\ndata:b\ndata:  c\n\n")) == [("message", "a\nb\n c")]

    async def test_event_line_alone_dispatches_nothing(self) -> None:
        assert await read_all(b"event: lonely\n\n", b"data: x\n\n") == [SSEEvent("message", "x")]

    async def test_event_name_does_not_leak_into_the_next_event(self) -> None:
        assert pairs(await read_all(b"event: a\ndata: 1\n\ndata: 2\n\n")) == [
            ("a", "1"), ("message", "2")]

    async def test_comments_and_unknown_fields_are_ignored(self) -> None:
        body = b": comment\nfoo: bar\nevent: e\n: another\ndata: d\n\n"
        assert pairs(await read_all(body)) == [("e", "d")]

    async def test_id_and_retry_are_kept(self) -> None:
        (event,) = await read_all(b"id: 7\nretry: 1500\nevent: e\ndata: d\n\n")
        assert (event.id, event.retry) == ("7", 1500)

    async def test_crlf_line_endings(self) -> None:
        assert pairs(await read_all(b"event: a\r\ndata: 1\r\n\r\n")) == [("a", "1")]

    async def test_cr_line_endings(self) -> None:
        assert pairs(await read_all(b"event: a\rdata: 1\r\r")) == [("a", "1")]

    async def test_crlf_split_between_chunks(self) -> None:
        assert pairs(await read_all(b"data: 1\r", b"\n\r", b"\ndata: 2\r\n\r\n")) == [
            ("message", "1"), ("message", "2")]

    async def test_empty_stream(self) -> None:
        assert await read_all() == []
        assert await read_all(b"") == []

    async def test_only_blank_lines(self) -> None:
        assert await read_all(b"\n\n\r\n\r\r") == []

    async def test_data_without_trailing_blank_line_is_dropped(self) -> None:
        # WHATWG: an event still open at end of stream is discarded, not guessed.
        assert pairs(await read_all(b"data: 1\n\ndata: incomplete\n")) == [("message", "1")]
        assert pairs(await read_all(b"data: 1\n\ndata: no newline at all")) == [("message", "1")]

    async def test_leading_bom_is_stripped(self) -> None:
        assert pairs(await read_all(b"\xef\xbb\xbfevent: a\ndata: 1\n\n")) == [("a", "1")]

    async def test_json_with_data_prefix_inside_is_not_split(self) -> None:
        body = b'event: chunk\ndata: {"chunk":"data: x\\n\\nevent: y"}\n\n'
        assert pairs(await read_all(body)) == [("chunk", '{"chunk":"data: x\\n\\nevent: y"}')]

    async def test_every_split_into_two_chunks_gives_the_same_events(self) -> None:
        for cut in range(len(STREAM) + 1):
            assert pairs(await read_all(STREAM[:cut], STREAM[cut:])) == STREAM_EVENTS, cut

    async def test_splits_into_three_chunks_give_the_same_events(self) -> None:
        size = len(STREAM)
        for a in range(0, size, 7):
            for b in range(a, size, 5):
                got = await read_all(STREAM[:a], STREAM[a:b], STREAM[b:])
                assert pairs(got) == STREAM_EVENTS, (a, b)

    async def test_byte_by_byte_gives_the_same_events(self) -> None:
        got = await read_all(*(STREAM[i:i + 1] for i in range(len(STREAM))))
        assert pairs(got) == STREAM_EVENTS

    async def test_multibyte_character_split_across_chunks(self) -> None:
        body = 'data: {"chunk":"🚀é"}\n\n'.encode()
        cut = body.index(b"\xf0") + 2  # inside the 4-byte rocket
        assert pairs(await read_all(body[:cut], body[cut:])) == [("message", '{"chunk":"🚀é"}')]

    async def test_many_small_chunks_without_newline_are_joined_once(self) -> None:
        data = "z" * 50_000
        body = f"event: big\ndata: {data}\n\n".encode()
        chunks = [body[i:i + 10] for i in range(0, len(body), 10)]
        assert pairs(await read_all(*chunks)) == [("big", data)]

    async def test_one_megabyte_event_in_one_line(self) -> None:
        data = "a" * 1_000_000
        (event,) = await read_all(f"data: {data}\n\n".encode())
        assert len(event.data) == 1_000_000

    async def test_line_over_max_line_size_is_an_sse_decode_error(self) -> None:
        with pytest.raises(SSEDecodeError, match="max_line_size=100") as info:
            await read_all(b"data: " + b"x" * 200, max_line_size=100)
        assert info.value.limit == "max_line_size"

    async def test_event_over_max_event_size_is_an_sse_decode_error(self) -> None:
        with pytest.raises(SSEDecodeError, match="max_event_size=50") as info:
            await read_all(b"data: 0123456789\n" * 10 + b"\n", max_event_size=50)
        assert info.value.limit == "max_event_size"

    async def test_async_source_of_bytes(self) -> None:
        async def chunks() -> AsyncIterator[bytes]:
            yield STREAM[:10]
            yield STREAM[10:]

        assert pairs([e async for e in create_sse_readable(chunks())]) == STREAM_EVENTS

    async def test_sync_iteration(self) -> None:
        assert pairs(list(create_sse_readable([STREAM[:5], STREAM[5:]]))) == STREAM_EVENTS

    async def test_sync_iteration_of_an_async_source_is_a_usage_error(self) -> None:
        async def chunks() -> AsyncGenerator[bytes]:
            yield b""

        source = chunks()
        with pytest.raises(UsageError, match="async for"):
            list(create_sse_readable(source))
        await source.aclose()

    async def test_a_readable_is_iterated_once(self) -> None:
        readable = create_sse_readable([STREAM])
        assert len([e async for e in readable]) == 4
        with pytest.raises(UsageError, match="iterated once"):
            _ = [e async for e in readable]

    async def test_normal_end_releases_the_source(self) -> None:
        released: list[str] = []

        async def chunks() -> AsyncIterator[bytes]:
            try:
                yield STREAM
            finally:
                released.append("closed")

        assert len([e async for e in create_sse_readable(chunks())]) == 4
        assert released == ["closed"]

    async def test_early_break_releases_the_source(self) -> None:
        released: list[str] = []

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while True:
                    yield b"data: tick\n\n"
            finally:
                released.append("closed")

        events = aiter(create_sse_readable(chunks()))
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for _ in events:
                break
        assert released == ["closed"]

    async def test_error_releases_the_source(self) -> None:
        released: list[str] = []

        async def chunks() -> AsyncIterator[bytes]:
            try:
                yield b"data: 1\n\n"
                raise ConnectionResetError("peer reset")
            finally:
                released.append("closed")

        got: list[SSEEvent] = []
        with pytest.raises(ConnectionResetError):
            got.extend([e async for e in create_sse_readable(chunks())])
        assert released == ["closed"]

    def test_sync_early_break_releases_the_source(self) -> None:
        released: list[str] = []

        def chunks() -> Iterator[bytes]:
            try:
                while True:
                    yield b"data: tick\n\n"
            finally:
                released.append("closed")

        events = iter(create_sse_readable(chunks()))
        with contextlib.closing(events):  # type: ignore[type-var]
            next(events)
        assert released == ["closed"]


# -- SSE readable over httpx, on a real socket -----------------------------------------------------


class RawHTTPHandler(socketserver.StreamRequestHandler):
    """Answers with scripted bytes: each path is a list of chunks written one by one, chunked."""

    routes: ClassVar[dict[str, list[bytes]]] = {}
    closed_by_client: ClassVar[threading.Event] = threading.Event()

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError):  # a client may leave early: that is the test
            self._answer()

    def _answer(self) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            data = self.request.recv(65536)
            if not data:
                return
            request += data
        path = request.split(b" ", 2)[1].decode()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        for part in self.routes.get(path.removesuffix("/drop").removesuffix("/hold"), []):
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.flush()
            time.sleep(0.002)  # separate TCP segments: the client sees real chunking
        if path.endswith("/drop"):
            self.wfile.write(b"40\r\npartial")  # a chunk cut short, then the socket closes
            self.wfile.flush()
            return
        if path.endswith("/hold"):
            self.request.settimeout(5)
            with contextlib.suppress(OSError):
                while self.request.recv(1024):
                    pass
            self.closed_by_client.set()
            return
        self.wfile.write(b"0\r\n\r\n")


class RawHTTPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture(scope="module")
def raw_server() -> Iterator[str]:
    RawHTTPHandler.routes["/chat"] = [STREAM[:17], STREAM[17:40], STREAM[40:]]
    server = RawHTTPServer(("127.0.0.1", 0), RawHTTPHandler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class TestHTTPXReadable:
    async def test_async_response(self, raw_server: str) -> None:
        async with httpx.AsyncClient() as client, client.stream("GET", raw_server + "/chat") as r:
            events = [e async for e in create_sse_readable(r)]
            assert r.is_closed
        assert pairs(events) == STREAM_EVENTS

    def test_sync_response(self, raw_server: str) -> None:
        with httpx.Client() as client, client.stream("GET", raw_server + "/chat") as r:
            events = list(create_sse_readable(r))
            assert r.is_closed
        assert pairs(events) == STREAM_EVENTS

    async def test_async_response_with_stream_reader(self, raw_server: str) -> None:
        from streamwire.reader import StreamReader

        got: list[object] = []
        async with httpx.AsyncClient() as client, client.stream("GET", raw_server + "/chat") as r:
            await StreamReader(create_sse_readable(r), Chat).on(Chat.chunk, got.append).consume()
        assert got == [{"chunk": "Hel"}, {"chunk": "lo é✓"}]

    def test_sync_response_with_stream_reader(self, raw_server: str) -> None:
        from streamwire.reader import StreamReader

        got: list[object] = []
        with httpx.Client() as client, client.stream("GET", raw_server + "/chat") as r:
            StreamReader(create_sse_readable(r), Chat).on(Chat.done, got.append).consume_sync()
        assert got == []  # '{"done":true}' lacks the ids: a parse error, skipped

    async def test_broken_body_is_a_stream_drop(self, raw_server: str) -> None:
        got: list[SSEEvent] = []
        async with (httpx.AsyncClient() as client,
                    client.stream("GET", raw_server + "/chat/drop") as r):
            with pytest.raises(StreamDropError, match="broke off") as info:
                got.extend([e async for e in create_sse_readable(r)])
        assert isinstance(info.value.__cause__, httpx.TransportError)
        assert info.value.retryable

    def test_sync_broken_body_is_a_stream_drop(self, raw_server: str) -> None:
        with (httpx.Client() as client, client.stream("GET", raw_server + "/chat/drop") as r,
              pytest.raises(StreamDropError)):
            list(create_sse_readable(r))

    async def test_early_break_closes_the_response(self, raw_server: str) -> None:
        RawHTTPHandler.closed_by_client.clear()
        async with httpx.AsyncClient() as client, client.stream("GET", raw_server + "/chat/hold") as r:
            events = aiter(create_sse_readable(r))
            async with contextlib.aclosing(events):  # type: ignore[type-var]
                first = await anext(events)
            assert r.is_closed
        assert first.event == "message_start"
        assert await anyio.to_thread.run_sync(RawHTTPHandler.closed_by_client.wait, 5)

    async def test_sync_response_read_async_is_a_usage_error(self, raw_server: str) -> None:
        def open_sync() -> httpx.Response:
            with httpx.Client() as client:
                return client.send(client.build_request("GET", raw_server + "/chat"), stream=True)

        response = await anyio.to_thread.run_sync(open_sync)
        try:
            with pytest.raises(UsageError, match=r"sync httpx\.Client"):
                _ = [e async for e in create_sse_readable(response)]
        finally:
            response.close()

    async def test_async_response_read_sync_is_a_usage_error(self, raw_server: str) -> None:
        async with httpx.AsyncClient() as client, client.stream("GET", raw_server + "/chat") as r:
            with pytest.raises(UsageError, match=r"httpx\.AsyncClient"):
                list(create_sse_readable(r))


def test_raw_server_speaks_http(raw_server: str) -> None:
    host, port = raw_server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /chat HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(12) == b"HTTP/1.1 200"
