"""StreamWriter: the TRD's stream-writer test group (serialisation of every chat event, terminal
methods, the write guard, abort handling, message-ID tracking), over ``MemoryWritable``."""

from __future__ import annotations

from typing import Any, Final

import pytest

from helpers.chat_samples import CHAT_SAMPLES, MODEL, SAMPLE_IDS, Billing, MyChat
from streamwire.chat import Chat, StreamEndReason
from streamwire.contract import Message
from streamwire.errors import PayloadError, UsageError
from streamwire.transport import AbortController, MemoryWritable, ProducerFailure
from streamwire.writer import ABORT_ERROR_MESSAGE, StreamWriter

pytestmark = pytest.mark.anyio

REASONS: Final[list[StreamEndReason]] = ["complete", "max_rounds", "cancelled", "context_limit",
                                          "timeout"]


def frame(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def done_json(reason: str, message_id: str = "", user_message_id: str = "") -> str:
    return (f'{{"done":true,"messageId":"{message_id}","userMessageId":"{user_message_id}",'
            f'"reason":"{reason}"}}')


ERROR_JSON: Final = '{"error":"%s","message":"%s"}'


async def start_message(writer: StreamWriter[Chat], aid: str = "a1", uid: str = "u1") -> None:
    await writer.event(Chat.message_start({"userMessageId": uid, "assistantMessageId": aid,
                                           "model": MODEL}))


# -- serialisation ------------------------------------------------------------------------------


class TestSerialisation:
    @pytest.mark.parametrize(("name", "msg", "wire"), CHAT_SAMPLES, ids=SAMPLE_IDS)
    async def test_every_chat_event_is_one_named_frame(
            self, name: str, msg: Message[Chat, Any], wire: str) -> None:
        out = MemoryWritable()
        await StreamWriter(out, Chat).event(msg)
        assert bytes(out.body) == frame(msg.name, wire)
        assert out.frames == [(msg.name, wire)]

    @pytest.mark.parametrize(("text", "json"), [
        ("line one\nline two", r'"line one\nline two"'),
        ("cr\r\nlf", r'"cr\r\nlf"'),
        ('quote " and \\ backslash', r'"quote \" and \\ backslash"'),
        ("héllo wörld ✓ 🚀", '"héllo wörld ✓ 🚀"'),
        ("data: event: id: fake\n\nframe", r'"data: event: id: fake\n\nframe"'),
        ("nul\x00 tab\t", r'"nul\u0000 tab\t"'),
        ("", '""'),
    ], ids=["lf", "crlf", "quotes", "unicode", "injection", "control", "empty"])
    async def test_special_characters_stay_in_one_data_line(self, text: str, json: str) -> None:
        out = MemoryWritable()
        await StreamWriter(out, Chat).event(Chat.chunk({"chunk": text}))
        assert bytes(out.body) == frame("chunk", '{"chunk":' + json + "}")
        assert bytes(out.body).count(b"\n") == 3  # event line, data line, blank line

    async def test_events_are_written_in_order(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        for i in range(5):
            await writer.event(Chat.chunk({"chunk": str(i)}))
        assert [json for _, json in out.frames] == [f'{{"chunk":"{i}"}}' for i in range(5)]
        assert not out.ended

    async def test_user_contract_uses_its_wire_names(self) -> None:
        out = MemoryWritable()
        await StreamWriter(out, Billing).event(Billing.invoice({"id": "i1", "cents": 250}))
        assert bytes(out.body) == frame("billing.invoice", '{"id":"i1","cents":250}')

    async def test_extended_contract_writes_base_and_own_events(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, MyChat)
        await writer.event(Chat.chunk({"chunk": "a"}))
        await writer.event(MyChat.invoice({"id": "i", "cents": 1}))
        await writer.end("complete", "m", "u")
        assert [name for name, _ in out.frames] == ["chunk", "invoice", "done"]

    async def test_event_of_another_contract_is_refused_at_run_time(self) -> None:
        out = MemoryWritable()
        writer: Any = StreamWriter(out, Chat)  # Any: bypass the static check on purpose
        with pytest.raises(UsageError, match=r"'billing\.invoice' of Billing is not an event of"):
            await writer.event(Billing.invoice({"id": "i", "cents": 1}))
        assert out.frames == []
        assert not writer.closed

    async def test_unencodable_payload_is_a_payload_error_and_writes_nothing(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        bad: Any = {"chunk": object()}
        with pytest.raises(PayloadError, match="'chunk'"):
            await writer.event(Chat.chunk(bad))
        assert out.frames == []
        assert not writer.closed



# -- validation at write time (what the reader would drop never reaches the wire) ----------------


class TestValidation:
    async def test_a_payload_of_the_wrong_shape_is_refused_before_the_wire(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        wrong: Any = {"text": "hi"}  # the durable chat's field name, not the TRD's ``chunk``
        with pytest.raises(PayloadError) as info:
            await writer.event(Chat.chunk(wrong))
        message = str(info.value)
        assert "Chat.chunk: the payload does not match" in message
        assert "missing required field `chunk`" in message
        assert "validate=False" in message  # says how to opt out
        assert info.value.event == "chunk"
        assert out.frames == []
        assert not writer.closed

    @pytest.mark.parametrize(("event", "payload"), [
        (Chat.chunk, {"chunk": 1}),                                   # wrong type
        (Chat.progress, {"done": True, "chunk": "x"}),                # two members of a union
        (Chat.progress, {"steps": [{"id": "s", "label": "l", "status": "nope"}]}),  # a literal
        (Chat.suggestions, {"suggestions": ["a"]}),                   # the old wrapped shape
    ], ids=["type", "union", "literal", "wrapped-array"])
    async def test_every_shape_the_reader_refuses_is_refused(self, event: Any,
                                                             payload: Any) -> None:
        with pytest.raises(PayloadError):  # the reader's rule...
            event.decode(event(payload).encode())
        out = MemoryWritable()
        with pytest.raises(PayloadError):  # ...is the writer's
            await StreamWriter(out, Chat).event(event(payload))
        assert out.frames == []

    async def test_done_with_the_durable_word_completed_is_refused(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        done: Any = {"done": True, "messageId": "m", "userMessageId": "u", "reason": "completed"}
        with pytest.raises(PayloadError, match=r"Chat\.done"):
            await writer.event(Chat.done(done))
        assert out.frames == []
        assert not writer.closed  # nothing was written, so the stream can still end properly

    async def test_validate_false_writes_the_payload_unchecked(self) -> None:
        out = MemoryWritable()
        wrong: Any = {"text": "hi"}
        await StreamWriter(out, Chat, validate=False).event(Chat.chunk(wrong))
        assert out.frames == [("chunk", '{"text":"hi"}')]

    async def test_extra_keys_pass_like_the_reader_which_drops_them(self) -> None:
        out = MemoryWritable()
        extra: Any = {"chunk": "hi", "lang": "en"}
        await StreamWriter(out, Chat).event(Chat.chunk(extra))
        assert out.frames == [("chunk", '{"chunk":"hi","lang":"en"}')]

    @pytest.mark.parametrize("reason", ["completed", "done", "", None, "COMPLETE"])
    async def test_end_with_an_unknown_reason_names_the_valid_ones(self, reason: Any) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat, validate=False)  # checked even without validation
        with pytest.raises(UsageError) as info:
            await writer.end(reason, "m", "u")
        assert "complete, max_rounds, cancelled, context_limit, timeout" in str(info.value)
        assert out.frames == []
        assert not writer.closed
        if reason == "completed":
            assert "durable profile's word" in str(info.value)


# -- terminal methods ---------------------------------------------------------------------------


class TestTerminals:
    @pytest.mark.parametrize("reason", REASONS)
    async def test_end_writes_done_with_reason_and_ids(self, reason: StreamEndReason) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await writer.end(reason, "msg-1", "user-1")
        assert bytes(out.body) == frame("done", done_json(reason, "msg-1", "user-1"))
        assert out.ended
        assert writer.closed
        assert writer.end_reason == reason

    async def test_error_writes_error_and_message_fields(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await writer.error("Model overloaded")
        assert bytes(out.body) == frame("error", ERROR_JSON % ("Model overloaded",
                                                               "Model overloaded"))
        assert out.ended
        assert writer.closed
        assert writer.end_reason is None

    async def test_error_message_with_special_characters_is_escaped(self) -> None:
        out = MemoryWritable()
        await StreamWriter(out, Chat).error('bad "input"\nline')
        assert out.frames == [("error", r'{"error":"bad \"input\"\nline",'
                                        r'"message":"bad \"input\"\nline"}')]

    async def test_done_given_to_event_is_terminal(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await writer.event(Chat.done({"done": True, "messageId": "m", "userMessageId": "u",
                                      "reason": "max_rounds"}))
        await writer.event(Chat.chunk({"chunk": "late"}))
        assert [name for name, _ in out.frames] == ["done"]
        assert out.ended
        assert writer.end_reason == "max_rounds"

    async def test_error_given_to_event_is_terminal(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await writer.event(Chat.error({"error": "e", "message": "m"}))
        await writer.end("complete", "", "")
        assert out.frames == [("error", '{"error":"e","message":"m"}')]
        assert writer.closed

    async def test_transport_failure_on_terminal_still_closes(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        out.end()  # the transport is already gone: MemoryWritable.write raises
        with pytest.raises(UsageError, match="after end"):
            await writer.end("complete", "m", "u")
        assert writer.closed
        await writer.error("second terminal")  # the guard holds even after a failed write
        assert out.frames == []


# -- write guard (the TRD's 9 cases) ------------------------------------------------------------


async def _end(writer: StreamWriter[Chat]) -> None:
    await writer.end("complete", "m", "u")


async def _error(writer: StreamWriter[Chat]) -> None:
    await writer.error("failed")


async def _event(writer: StreamWriter[Chat]) -> None:
    await writer.event(Chat.chunk({"chunk": "late"}))


class TestWriteGuard:
    @pytest.mark.parametrize(("first", "then"), [
        (_end, _event), (_error, _event), (_end, _end), (_error, _error), (_error, _end),
        (_end, _error),
    ], ids=["event-after-end", "event-after-error", "end-after-end", "error-after-error",
            "end-after-error", "error-after-end"])
    async def test_calls_after_a_terminal_are_silent_no_ops(self, first: Any, then: Any) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await first(writer)
        before = bytes(out.body)
        await then(writer)
        await then(writer)
        assert bytes(out.body) == before
        assert len(out.frames) == 1

    async def test_closed_is_false_while_open(self) -> None:
        writer = StreamWriter(MemoryWritable(), Chat)
        await writer.event(Chat.chunk({"chunk": "x"}))
        assert writer.closed is False

    async def test_closed_is_true_after_end(self) -> None:
        writer = StreamWriter(MemoryWritable(), Chat)
        await writer.end("complete", "", "")
        assert writer.closed is True

    async def test_closed_is_true_after_error(self) -> None:
        writer = StreamWriter(MemoryWritable(), Chat)
        await writer.error("x")
        assert writer.closed is True


# -- abort signal (the TRD's 12 cases, and more) ------------------------------------------------


class TestAbort:
    @pytest.mark.parametrize("reason", REASONS)
    async def test_valid_reason_sends_done_with_it(self, reason: StreamEndReason) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Chat, signal=ac.signal)
        await writer.event(Chat.chunk({"chunk": "partial"}))
        ac.abort(reason)
        assert out.frames[-1] == ("done", done_json(reason))
        assert out.ended
        assert writer.closed
        assert writer.end_reason == reason

    @pytest.mark.parametrize("reason", [None, 42, ValueError("boom"), "bogus", "COMPLETE", ""],
                             ids=["no-reason", "int", "exception", "invalid-string",
                                  "wrong-case", "empty-string"])
    async def test_other_reasons_send_error(self, reason: object) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Chat, signal=ac.signal)
        ac.abort(reason)
        assert out.frames == [("error", ERROR_JSON % (ABORT_ERROR_MESSAGE, ABORT_ERROR_MESSAGE))]
        assert writer.closed
        assert writer.end_reason is None

    @pytest.mark.parametrize(("exception", "says"), [
        (RuntimeError("db password=hunter2"), "the stream's producer failed"),
        (None, "the stream's producer returned without ending it"),
    ], ids=["raised", "returned"])
    async def test_a_producer_failure_says_which_without_its_text(
            self, exception: BaseException | None, says: str) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Chat, signal=ac.signal)
        ac.abort(ProducerFailure(exception))
        text = f"{ABORT_ERROR_MESSAGE}: {says}"
        assert out.frames == [("error", ERROR_JSON % (text, text))]
        assert b"hunter2" not in out.body
        assert writer.end_reason is None

    async def test_abort_without_argument_sends_error(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        StreamWriter(out, Chat, signal=ac.signal)
        ac.abort()
        assert [name for name, _ in out.frames] == ["error"]

    async def test_abort_after_end_writes_nothing(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Chat, signal=ac.signal)
        await writer.end("complete", "m", "u")
        ac.abort("timeout")
        assert out.frames == [("done", done_json("complete", "m", "u"))]
        assert writer.end_reason == "complete"

    async def test_abort_after_error_writes_nothing(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Chat, signal=ac.signal)
        await writer.error("first")
        ac.abort("cancelled")
        assert out.frames == [("error", ERROR_JSON % ("first", "first"))]

    async def test_pre_aborted_signal_fires_in_the_constructor(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        ac.abort("cancelled")
        writer = StreamWriter(out, Chat, signal=ac.signal)
        assert out.frames == [("done", done_json("cancelled"))]  # before any await
        assert writer.closed
        await writer.event(Chat.chunk({"chunk": "never"}))
        assert len(out.frames) == 1

    async def test_pre_aborted_signal_with_invalid_reason_sends_error(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        ac.abort(RuntimeError("gone"))
        StreamWriter(out, Chat, signal=ac.signal)
        assert [name for name, _ in out.frames] == ["error"]

    async def test_no_signal_means_no_abort_handling(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await writer.event(Chat.chunk({"chunk": "a"}))
        AbortController().abort("timeout")  # an unrelated controller
        assert not writer.closed
        assert out.frames == [("chunk", '{"chunk":"a"}')]

    async def test_abort_before_message_start_has_empty_ids(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        StreamWriter(out, Chat, signal=ac.signal)
        ac.abort("timeout")
        assert out.frames == [("done", done_json("timeout", "", ""))]

    async def test_abort_after_message_start_carries_tracked_ids(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Chat, signal=ac.signal)
        await start_message(writer, "assistant-7", "user-7")
        await writer.event(Chat.chunk({"chunk": "partial"}))
        ac.abort("cancelled")
        assert out.frames[-1] == ("done", done_json("cancelled", "assistant-7", "user-7"))

    async def test_signal_shared_by_two_writers_ends_both(self) -> None:
        a, b = MemoryWritable(), MemoryWritable()
        ac = AbortController()
        StreamWriter(a, Chat, signal=ac.signal)
        StreamWriter(b, Chat, signal=ac.signal)
        ac.abort("max_rounds")
        assert a.frames == b.frames == [("done", done_json("max_rounds"))]

    async def test_second_abort_is_ignored(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        StreamWriter(out, Chat, signal=ac.signal)
        ac.abort("timeout")
        ac.abort("cancelled")
        assert out.frames == [("done", done_json("timeout"))]
        assert ac.signal.reason == "timeout"

    async def test_writer_of_a_contract_without_chat_terminals_just_ends(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Billing, signal=ac.signal)
        await writer.event(Billing.invoice({"id": "i", "cents": 1}))
        ac.abort("cancelled")
        assert [name for name, _ in out.frames] == ["billing.invoice"]
        assert out.ended
        assert writer.closed
        await writer.event(Billing.invoice({"id": "j", "cents": 2}))
        assert len(out.frames) == 1


# -- message-ID tracking --------------------------------------------------------------------------


class TestMessageIds:
    async def test_ids_are_empty_before_message_start(self) -> None:
        writer = StreamWriter(MemoryWritable(), Chat)
        assert (writer.message_id, writer.user_message_id) == ("", "")

    async def test_message_start_is_tracked_and_still_written(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await start_message(writer, "a9", "u9")
        assert (writer.message_id, writer.user_message_id) == ("a9", "u9")
        assert [name for name, _ in out.frames] == ["message_start"]

    async def test_the_last_message_start_wins(self) -> None:
        out = MemoryWritable()
        ac = AbortController()
        writer = StreamWriter(out, Chat, signal=ac.signal)
        await start_message(writer, "a1", "u1")
        await start_message(writer, "a2", "u2")
        ac.abort("context_limit")
        assert out.frames[-1] == ("done", done_json("context_limit", "a2", "u2"))

    async def test_explicit_end_uses_its_own_ids(self) -> None:
        out = MemoryWritable()
        writer = StreamWriter(out, Chat)
        await start_message(writer, "tracked", "tracked-user")
        await writer.end("complete", "explicit", "explicit-user")
        assert out.frames[-1] == ("done", done_json("complete", "explicit", "explicit-user"))

    async def test_message_start_after_close_is_not_tracked(self) -> None:
        writer = StreamWriter(MemoryWritable(), Chat)
        await writer.end("complete", "", "")
        await start_message(writer, "late", "late")
        assert writer.message_id == ""


# -- the abort primitives -------------------------------------------------------------------------


class TestAbortController:
    def test_signal_starts_unaborted(self) -> None:
        ac = AbortController()
        assert (ac.signal.aborted, ac.signal.reason) == (False, None)

    def test_listeners_run_once_in_order_with_the_reason_set(self) -> None:
        ac = AbortController()
        seen: list[tuple[str, object]] = []
        ac.signal.add_listener(lambda: seen.append(("a", ac.signal.reason)))
        ac.signal.add_listener(lambda: seen.append(("b", ac.signal.aborted)))
        ac.abort("why")
        ac.abort("again")
        assert seen == [("a", "why"), ("b", True)]

    def test_removed_listener_does_not_run(self) -> None:
        ac = AbortController()
        seen: list[int] = []

        def listener() -> None:
            seen.append(1)

        ac.signal.add_listener(listener)
        ac.signal.remove_listener(listener)
        ac.signal.remove_listener(listener)  # absent: no error
        ac.abort()
        assert seen == []

    def test_listener_added_after_abort_never_runs(self) -> None:
        ac = AbortController()
        ac.abort("x")
        seen: list[int] = []
        ac.signal.add_listener(lambda: seen.append(1))
        ac.abort("y")
        assert seen == []
        assert ac.signal.reason == "x"

    def test_listener_exception_propagates_from_abort(self) -> None:
        ac = AbortController()

        def bad() -> None:
            raise KeyError("listener bug")

        ac.signal.add_listener(bad)
        with pytest.raises(KeyError, match="listener bug"):
            ac.abort("timeout")
        assert ac.signal.aborted
