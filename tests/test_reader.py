"""StreamReader: the TRD's stream-reader test group (registration, ``consume()`` lifecycle, typed
dispatch of every chat event, parse errors, handler errors, late registration)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import anyio
import anyio.lowlevel
import httpx_sse
import msgspec
import pytest

from helpers.chat_samples import CHAT_SAMPLES, SAMPLE_IDS, Billing, MyChat
from streamwire.chat import Chat, ChunkPayload, DonePayload, Progress
from streamwire.client import create_sse_readable
from streamwire.contract import Message
from streamwire.errors import PayloadError, StreamDropError, UsageError
from streamwire.reader import StreamReader
from streamwire.sse import SSEEvent

pytestmark = pytest.mark.anyio


def sse(*frames: tuple[str, str]) -> bytes:
    return b"".join(f"event: {e}\ndata: {d}\n\n".encode() for e, d in frames)


CHUNKS_AND_DONE: Final = sse(
    ("chunk", '{"chunk":"a"}'), ("chunk", '{"chunk":"b"}'),
    ("done", '{"done":true,"messageId":"m","userMessageId":"u","reason":"complete"}'))


def reader(body: bytes, contract: Any = Chat) -> StreamReader[Any]:
    return StreamReader(create_sse_readable([body]), contract)


class Source:
    """An async byte source that records how far it was read and whether it was released."""

    def __init__(self, *chunks: bytes, fail_after: int | None = None) -> None:
        self.chunks = chunks
        self.fail_after = fail_after
        self.sent = 0
        self.closed = False

    async def _gen(self) -> AsyncIterator[bytes]:
        try:
            for chunk in self.chunks:
                if self.fail_after is not None and self.sent >= self.fail_after:
                    raise StreamDropError("transport broke", cursor=None)
                self.sent += 1
                yield chunk
                await anyio.lowlevel.checkpoint()
        finally:
            self.closed = True

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._gen()


# -- registration -----------------------------------------------------------------------------


class TestRegistration:
    async def test_on_returns_the_reader_for_chaining(self) -> None:
        r = reader(b"")
        assert r.on(Chat.chunk, print) is r
        assert r.on(Chat.done, print).on(Chat.error, print) is r

    async def test_on_parse_error_returns_the_reader(self) -> None:
        r = reader(b"")
        assert r.on_parse_error(print) is r

    async def test_event_outside_the_contract_is_refused_at_registration(self) -> None:
        r = reader(b"")
        with pytest.raises(UsageError, match=r"'billing\.invoice' of Billing is not an event of Chat"):
            r.on(Billing.invoice, print)

    async def test_extension_event_is_refused_by_a_base_contract_reader(self) -> None:
        with pytest.raises(UsageError, match="'invoice' of MyChat"):
            reader(b"").on(MyChat.invoice, print)

    async def test_extended_contract_reader_takes_base_and_own_events(self) -> None:
        got: list[object] = []
        body = sse(("chunk", '{"chunk":"x"}'), ("invoice", '{"id":"i","cents":3}'))
        await (reader(body, MyChat).on(Chat.chunk, got.append).on(MyChat.invoice, got.append)
               .consume())
        assert got == [{"chunk": "x"}, {"id": "i", "cents": 3}]

    async def test_user_contract_reads_by_wire_name(self) -> None:
        got: list[object] = []
        await reader(sse(("billing.invoice", '{"id":"i","cents":5}')), Billing).on(
            Billing.invoice, got.append).consume()
        assert got == [{"id": "i", "cents": 5}]


# -- dispatch -----------------------------------------------------------------------------------


class TestDispatch:
    @pytest.mark.parametrize(("name", "msg", "wire"), CHAT_SAMPLES, ids=SAMPLE_IDS)
    async def test_every_chat_event_reaches_its_handler_typed(
            self, name: str, msg: Message[Chat, Any], wire: str) -> None:
        got: list[object] = []
        r = reader(sse(("chunk", '{"chunk":"other"}'), (msg.name, wire)))
        if msg.name != "chunk":
            r.on(Chat.chunk, lambda d: None)
        await r.on(msg.event, got.append).consume()
        assert got[-1] == msg.data
        assert msgspec.json.encode(got[-1]).decode() == wire

    async def test_lambda_handler_gets_the_payload(self) -> None:
        text: list[str] = []
        await reader(CHUNKS_AND_DONE).on(Chat.chunk, lambda d: text.append(d["chunk"])).consume()
        assert text == ["a", "b"]

    async def test_progress_variants_are_told_apart_by_key(self) -> None:
        seen: list[str] = []

        def on_progress(d: Progress) -> None:
            if "steps" in d:
                seen.append(f"steps:{len(d['steps'])}")
            elif "done" in d:
                seen.append("done")
            else:
                seen.append(f"chunk:{d['chunk']}")

        body = sse(("progress", '{"steps":[]}'), ("progress", '{"chunk":"x"}'),
                   ("progress", '{"done":true}'))
        await reader(body).on(Chat.progress, on_progress).consume()
        assert seen == ["steps:0", "chunk:x", "done"]

    async def test_async_handlers_are_awaited_in_order(self) -> None:
        order: list[str] = []

        async def slow(d: ChunkPayload) -> None:
            await anyio.sleep(0.01)
            order.append("slow:" + d["chunk"])

        def fast(d: DonePayload) -> None:
            order.append("done:" + d["reason"])

        await reader(CHUNKS_AND_DONE).on(Chat.chunk, slow).on(Chat.done, fast).consume()
        assert order == ["slow:a", "slow:b", "done:complete"]

    async def test_several_handlers_of_one_event_run_in_registration_order(self) -> None:
        order: list[str] = []
        r = reader(sse(("chunk", '{"chunk":"x"}')))
        r.on(Chat.chunk, lambda d: order.append("first"))
        r.on(Chat.chunk, lambda d: order.append("second"))
        await r.consume()
        assert order == ["first", "second"]

    async def test_unregistered_events_are_not_parsed(self) -> None:
        errors: list[str] = []
        got: list[object] = []
        body = sse(("title", "{not json"), ("usage", "[]"), ("chunk", '{"chunk":"ok"}'))
        await (reader(body).on(Chat.chunk, got.append)
               .on_parse_error(lambda e, raw, err: errors.append(e)).consume())
        assert errors == []  # the malformed title and usage were never decoded
        assert got == [{"chunk": "ok"}]

    async def test_events_outside_the_contract_are_ignored(self) -> None:
        got: list[object] = []
        body = sse(("heartbeat", "x"), ("future_event", '{"a":1}'), ("chunk", '{"chunk":"k"}'))
        await reader(body).on(Chat.chunk, got.append).consume()
        assert got == [{"chunk": "k"}]

    async def test_unnamed_message_events_are_ignored_by_a_chat_reader(self) -> None:
        got: list[object] = []
        await reader(b'data: {"chunk":"x"}\n\n' + CHUNKS_AND_DONE).on(
            Chat.chunk, got.append).consume()
        assert got == [{"chunk": "a"}, {"chunk": "b"}]

    async def test_stream_without_done_resolves(self) -> None:
        got: list[object] = []
        await reader(sse(("chunk", '{"chunk":"a"}'))).on(Chat.chunk, got.append).on(
            Chat.done, got.append).consume()
        assert got == [{"chunk": "a"}]

    async def test_empty_stream_resolves_without_calls(self) -> None:
        got: list[object] = []
        await reader(b"").on(Chat.chunk, got.append).consume()
        assert got == []

    async def test_events_after_done_are_still_dispatched(self) -> None:
        got: list[str] = []
        body = CHUNKS_AND_DONE + sse(("chunk", '{"chunk":"after"}'))
        await reader(body).on(Chat.chunk, lambda d: got.append(d["chunk"])).consume()
        assert got == ["a", "b", "after"]

    async def test_any_async_iterable_of_events_is_a_readable(self) -> None:
        async def events() -> AsyncIterator[SSEEvent]:
            yield SSEEvent("chunk", '{"chunk":"a"}')
            yield SSEEvent("chunk", '{"chunk":"b"}')

        got: list[object] = []
        await StreamReader(events(), Chat).on(Chat.chunk, got.append).consume()
        assert got == [{"chunk": "a"}, {"chunk": "b"}]

    async def test_httpx_sse_events_are_readable_too(self) -> None:
        async def events() -> AsyncIterator[httpx_sse.ServerSentEvent]:
            yield httpx_sse.ServerSentEvent(event="title", data='{"title":"T"}')

        got: list[object] = []
        await StreamReader(events(), Chat).on(Chat.title, got.append).consume()
        assert got == [{"title": "T"}]


# -- parse errors -------------------------------------------------------------------------------


class TestParseErrors:
    @pytest.mark.parametrize(("event", "raw"), [
        ("chunk", "{not json"),
        ("chunk", '{"chunk":1}'),
        ("chunk", '{"text":"x"}'),
        ("chunk", ""),
        ("progress", '{"steps":[],"done":true}'),
        ("progress", '{"done":false}'),
        ("suggestions", '{"suggestions":["a"]}'),
        ("done", '{"done":true,"messageId":"m","userMessageId":"u","reason":"bogus"}'),
    ], ids=["bad-json", "wrong-type", "missing-key", "empty", "two-variants", "literal",
            "wrapped-array", "bad-reason"])
    async def test_malformed_payload_is_reported_and_skipped(self, event: str, raw: str) -> None:
        reports: list[tuple[str, str, PayloadError]] = []
        got: list[str] = []
        r = reader(sse((event, raw), ("title", '{"title":"after"}')))
        bound = Chat.event_named(event)
        assert bound is not None
        r.on(bound, lambda d: got.append("the handler of the bad frame ran"))
        r.on(Chat.title, lambda d: got.append(d["title"]))
        await r.on_parse_error(lambda e, data, err: reports.append((e, data, err))).consume()
        assert [(e, data) for e, data, _ in reports] == [(event, raw)]
        assert isinstance(reports[0][2], PayloadError)
        assert reports[0][2].event == event
        assert got == ["after"]  # the bad frame reached no handler; the stream went on

    async def test_parse_error_without_handler_is_skipped_silently(self) -> None:
        got: list[str] = []
        body = sse(("chunk", "nope"), ("chunk", '{"chunk":"ok"}'))
        await reader(body).on(Chat.chunk, lambda d: got.append(d["chunk"])).consume()
        assert got == ["ok"]

    async def test_every_parse_error_handler_is_called(self) -> None:
        calls: list[str] = []
        await (reader(sse(("chunk", "nope"))).on(Chat.chunk, print)
               .on_parse_error(lambda e, r, x: calls.append("one"))
               .on_parse_error(lambda e, r, x: calls.append("two")).consume())
        assert calls == ["one", "two"]

    async def test_async_parse_error_handler_is_awaited(self) -> None:
        calls: list[str] = []

        async def report(event: str, raw: str, err: PayloadError) -> None:
            await anyio.lowlevel.checkpoint()
            calls.append(raw)

        await reader(sse(("chunk", "[1]"))).on(Chat.chunk, print).on_parse_error(report).consume()
        assert calls == ["[1]"]

    async def test_many_malformed_frames_do_not_stop_the_stream(self) -> None:
        frames = [("chunk", "bad" if i % 2 else f'{{"chunk":"{i}"}}') for i in range(100)]
        got: list[str] = []
        errors: list[str] = []
        await (reader(sse(*frames)).on(Chat.chunk, lambda d: got.append(d["chunk"]))
               .on_parse_error(lambda e, r, x: errors.append(r)).consume())
        assert got == [str(i) for i in range(0, 100, 2)]
        assert len(errors) == 50


# -- handler errors -------------------------------------------------------------------------------


class TestHandlerErrors:
    async def test_sync_handler_exception_propagates_and_stops_the_stream(self) -> None:
        source = Source(sse(("chunk", '{"chunk":"a"}')), sse(("chunk", '{"chunk":"b"}')),
                        sse(("chunk", '{"chunk":"c"}')))
        seen: list[str] = []

        def handler(d: ChunkPayload) -> None:
            seen.append(d["chunk"])
            if d["chunk"] == "b":
                raise ValueError("consumer bug")

        with pytest.raises(ValueError, match="consumer bug"):
            await StreamReader(create_sse_readable(source), Chat).on(Chat.chunk, handler).consume()
        assert seen == ["a", "b"]
        assert source.sent == 2  # the third chunk was never read
        assert source.closed  # and the body was released

    async def test_async_handler_exception_propagates(self) -> None:
        async def handler(d: ChunkPayload) -> None:
            await anyio.lowlevel.checkpoint()
            raise KeyError(d["chunk"])

        with pytest.raises(KeyError, match="a"):
            await reader(CHUNKS_AND_DONE).on(Chat.chunk, handler).consume()

    async def test_parse_error_handler_exception_propagates(self) -> None:
        def report(event: str, raw: str, err: PayloadError) -> None:
            raise RuntimeError(f"strict mode: {event}")

        with pytest.raises(RuntimeError, match="strict mode: chunk"):
            await reader(sse(("chunk", "x"))).on(Chat.chunk, print).on_parse_error(report).consume()

    async def test_transport_error_propagates(self) -> None:
        source = Source(sse(("chunk", '{"chunk":"a"}')), b"more", fail_after=1)
        got: list[object] = []
        with pytest.raises(StreamDropError, match="transport broke"):
            await StreamReader(create_sse_readable(source), Chat).on(
                Chat.chunk, got.append).consume()
        assert got == [{"chunk": "a"}]
        assert source.closed

    async def test_body_is_released_after_a_normal_end(self) -> None:
        source = Source(CHUNKS_AND_DONE)
        await StreamReader(create_sse_readable(source), Chat).consume()
        assert source.closed


# -- consume() lifecycle --------------------------------------------------------------------------


class TestConsume:
    async def test_consume_returns_the_same_awaitable(self) -> None:
        r = reader(CHUNKS_AND_DONE)
        assert r.consume() is r.consume()

    async def test_awaiting_twice_runs_the_stream_once(self) -> None:
        got: list[object] = []
        r = reader(CHUNKS_AND_DONE).on(Chat.chunk, got.append)
        await r.consume()
        await r.consume()
        assert len(got) == 2

    async def test_concurrent_awaits_share_one_run(self) -> None:
        got: list[object] = []
        source = Source(*[sse(("chunk", f'{{"chunk":"{i}"}}')) for i in range(20)])
        r = StreamReader(create_sse_readable(source), Chat).on(Chat.chunk, got.append)
        finished: list[int] = []

        async def wait(i: int) -> None:
            await r.consume()
            finished.append(i)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(wait, i)
        assert sorted(finished) == [0, 1, 2]
        assert len(got) == 20

    async def test_failure_is_re_raised_to_every_await(self) -> None:
        def boom(d: ChunkPayload) -> None:
            raise ValueError("once")

        r = reader(CHUNKS_AND_DONE).on(Chat.chunk, boom)
        with pytest.raises(ValueError, match="once"):
            await r.consume()
        with pytest.raises(ValueError, match="once"):
            await r.consume()

    async def test_cancelled_run_tells_other_awaiters_the_stream_was_not_read(self) -> None:
        async def never_ends() -> AsyncIterator[SSEEvent]:
            yield SSEEvent("chunk", '{"chunk":"a"}')
            await anyio.sleep(60)
            yield SSEEvent("chunk", '{"chunk":"never"}')

        r = StreamReader(never_ends(), Chat)
        with anyio.move_on_after(0.05) as scope:
            await r.consume()
        assert scope.cancelled_caught
        with pytest.raises(UsageError, match="was cancelled"):
            await r.consume()

    async def test_consume_is_lazy_until_awaited(self) -> None:
        source = Source(CHUNKS_AND_DONE)
        r = StreamReader(create_sse_readable(source), Chat)
        pending = r.consume()
        await anyio.sleep(0.01)
        assert source.sent == 0
        await pending
        assert source.sent == 1

    async def test_handler_registered_after_consume_call_receives_events(self) -> None:
        got: list[object] = []
        r = reader(CHUNKS_AND_DONE)
        pending = r.consume()
        r.on(Chat.done, got.append)
        await pending
        assert [type(x) for x in got] == [dict]

    async def test_handler_registered_mid_stream_receives_later_events(self) -> None:
        late: list[str] = []
        r = reader(sse(*[("chunk", f'{{"chunk":"{i}"}}') for i in range(4)],
                       ("title", '{"title":"T"}')))

        def first(d: ChunkPayload) -> None:
            if d["chunk"] == "1":
                r.on(Chat.title, lambda t: late.append(t["title"]))
                r.on(Chat.chunk, lambda c: late.append(c["chunk"]))

        await r.on(Chat.chunk, first).consume()
        assert late == ["2", "3", "T"]

    async def test_consume_on_a_sync_only_readable_is_a_usage_error(self) -> None:
        r = StreamReader([SSEEvent("chunk", '{"chunk":"a"}')], Chat)
        with pytest.raises(UsageError, match="consume_sync"):
            r.consume()

    async def test_reading_the_same_readable_twice_is_a_usage_error(self) -> None:
        readable = create_sse_readable([CHUNKS_AND_DONE])
        await StreamReader(readable, Chat).consume()
        with pytest.raises(UsageError, match="iterated once"):
            await StreamReader(readable, Chat).consume()


# -- consume_sync ---------------------------------------------------------------------------------


class TestConsumeSync:
    def test_sync_reader_dispatches_in_order(self) -> None:
        got: list[object] = []
        StreamReader(create_sse_readable([CHUNKS_AND_DONE]), Chat).on(
            Chat.chunk, got.append).on(Chat.done, got.append).consume_sync()
        assert got == [{"chunk": "a"}, {"chunk": "b"},
                       {"done": True, "messageId": "m", "userMessageId": "u",
                        "reason": "complete"}]

    def test_sync_parse_errors_are_skipped(self) -> None:
        errors: list[str] = []
        got: list[object] = []
        StreamReader(create_sse_readable([sse(("chunk", "x"), ("chunk", '{"chunk":"y"}'))]),
                     Chat).on(Chat.chunk, got.append).on_parse_error(
            lambda e, r, x: errors.append(r)).consume_sync()
        assert (errors, got) == (["x"], [{"chunk": "y"}])

    def test_async_handler_in_sync_consume_is_a_usage_error(self) -> None:
        async def handler(d: ChunkPayload) -> None:
            return None

        r = StreamReader(create_sse_readable([CHUNKS_AND_DONE]), Chat).on(Chat.chunk, handler)
        with pytest.raises(UsageError, match="async handlers need"):
            r.consume_sync()

    def test_sync_handler_exception_stops_and_releases(self) -> None:
        closed: list[bool] = []

        def body() -> Iterator[bytes]:
            try:
                yield sse(("chunk", '{"chunk":"a"}'))
                yield sse(("chunk", '{"chunk":"b"}'))
            finally:
                closed.append(True)

        def boom(d: ChunkPayload) -> None:
            raise ValueError(d["chunk"])

        with pytest.raises(ValueError, match="a"):
            StreamReader(create_sse_readable(body()), Chat).on(Chat.chunk, boom).consume_sync()
        assert closed == [True]

    def test_consume_sync_twice_is_a_usage_error(self) -> None:
        r = StreamReader(create_sse_readable([CHUNKS_AND_DONE]), Chat)
        r.consume_sync()
        with pytest.raises(UsageError, match="already consumed"):
            r.consume_sync()

    def test_consume_after_consume_sync_is_a_usage_error(self) -> None:
        r = StreamReader(create_sse_readable([CHUNKS_AND_DONE]), Chat)
        r.consume_sync()
        with pytest.raises(UsageError, match="consumed by consume_sync"):
            r.consume()

    def test_two_async_handlers_in_sync_consume_leave_no_unawaited_coroutine(self) -> None:
        async def one(d: ChunkPayload) -> None:
            return None

        async def two(d: ChunkPayload) -> None:
            return None

        r = StreamReader(create_sse_readable([CHUNKS_AND_DONE]), Chat)
        with pytest.raises(UsageError, match="returned an awaitable"):
            r.on(Chat.chunk, one).on(Chat.chunk, two).consume_sync()

    def test_consume_sync_on_an_async_readable_is_a_usage_error(self) -> None:
        async def events() -> AsyncIterator[SSEEvent]:
            yield SSEEvent("chunk", "{}")

        with pytest.raises(UsageError, match="asynchronous"):
            StreamReader(events(), Chat).consume_sync()
