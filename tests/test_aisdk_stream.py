"""The sans-I/O chat front end: chat events -> UI message chunks (one row per ``Chat`` event and per
terminal), D-4's error ending, event ids and resuming after any of them, and the terminal mapping
table between the run's stream and the chat contract in both directions."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from helpers.chat_samples import CHAT_SAMPLES, SAMPLE_IDS
from streamwire.aisdk import (
    END_REASONS,
    FINISH_REASONS,
    REPLY_ERROR_WORDS,
    TERMINALS,
    UI_MESSAGE_STREAM_HEADERS,
    ChatReplyDecoder,
    UIMessageStreamEncoder,
    chat_terminal,
    end_reason,
    format_event_id,
    parse_event_id,
    terminal_frame,
)
from streamwire.chat import STREAM_END_REASONS, Chat
from streamwire.contract import Message
from streamwire.errors import PayloadError, StreamTruncatedError
from streamwire.frames import (
    CaughtUpFrame,
    ChunkCodec,
    ChunkFrame,
    EndFrame,
    FailFrame,
    RewoundFrame,
    StreamFrame,
    TruncatedFrame,
    UnknownFrame,
)
from streamwire.sse import SSEDecoder

CODEC = ChunkCodec(Chat)
PREAMBLE = [{"type": "start", "messageId": "m1"}, {"type": "start-step"}]
FINISH = [{"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}]


def frames_of(*messages: Message[Chat, Any]) -> list[StreamFrame]:
    return [CODEC.frame(i, msg) for i, msg in enumerate(messages, 1)]


def ui_chunks(frames: list[StreamFrame | UnknownFrame], message_id: str | None = "m1"
              ) -> list[dict[str, Any]]:
    encoder = UIMessageStreamEncoder(message_id)
    out: list[Any] = []
    for frame in frames:
        out += encoder.chunks(frame)
    return out


def sse_events(body: bytes) -> list[tuple[str, str]]:
    """(id, data) of each event of a UI message stream body."""
    decoder = SSEDecoder()
    events = decoder.feed(body) + decoder.flush()
    return [(event.id, event.data) for event in events]


def encode_all(frames: list[StreamFrame | UnknownFrame], *, after: str | None = None) -> bytes:
    encoder = UIMessageStreamEncoder("m1", after=after)
    return encoder.encode_start() + b"".join(encoder.feed(frame) for frame in frames)


TEXT = [{"type": "text-start", "id": "t1"}, {"type": "text-delta", "id": "t1", "delta": "Hello, how can I help?"},
        {"type": "text-end", "id": "t1"}]
ATTACHMENT_META = {"streamwire": {"id": "f1", "filename": "a.txt"}}

#: The mapping table, one row per chat sample: the UI chunks between the preamble and the finish.
EXPECTED: dict[str, list[dict[str, Any]]] = {
    "chunk": TEXT,
    "reasoning-chunk": [{"type": "reasoning-start", "id": "r1"},
                        {"type": "reasoning-delta", "id": "r1", "delta": "Let me think"},
                        {"type": "reasoning-end", "id": "r1"}],
    "reasoning-done": [],  # no reasoning part is open: nothing to close
    "progress-steps": [{"type": "data-progress", "id": "progress", "data": {"steps": [
        {"id": "s1", "label": "Searching the web", "status": "active", "toolName": "search"}]}}],
    "progress-done": [{"type": "data-progress", "id": "progress", "data": {"done": True}}],
    "progress-chunk": [{"type": "data-progress", "id": "progress",
                        "data": {"chunk": "Reading 3 pages"}}],
    "clear": [{"type": "data-clear", "data": {}}],
    "message_start": [{"type": "message-metadata", "messageMetadata": {
        "userMessageId": "u1", "assistantMessageId": "a1",
        "model": {"id": "claude-x", "displayName": "Claude X", "provider": "anthropic"}}}],
    "usage": [{"type": "data-usage", "id": "usage",
               "data": {"inputTokens": 12, "outputTokens": 30, "totalTokens": 42}}],
    "sources": [{"type": "source-url", "sourceId": "s1.0", "url": "https://example.org/a", "title": "A"},
                {"type": "source-url", "sourceId": "s1.1", "url": "https://example.org/b", "title": "B"}],
    "suggestions": [{"type": "data-suggestions", "id": "suggestions", "data": ["Tell me more", "Why?"]}],
    "attachments": [{"type": "file", "url": "data:text/plain;base64,aGk=", "mediaType": "text/plain",
                     "providerMetadata": ATTACHMENT_META}],
    "title": [{"type": "data-title", "id": "title", "data": {"title": "Trip to Lisbon"}}],
    "warnings": [{"type": "data-warnings", "data": ["Search quota low"]}],
    "compression-start": [{"type": "data-compression", "id": "compression", "data": {"messageCount": 40}}],
    "compression-done": [{"type": "data-compression", "id": "compression", "data": {"done": True}}],
    "selection_required": [{"type": "data-selection-required", "data": {
        "selectionId": "sel1", "prompt": "Which city?",
        "options": [{"id": "o1", "label": "Lisbon"}, {"id": "o2", "label": "Porto"}]}}],
    "done": [],  # the terminal frame ends a reply, not an event inside a chunk
    "error": [],
}


def test_the_table_has_a_row_per_sample() -> None:
    assert set(EXPECTED) == set(SAMPLE_IDS)


@pytest.mark.parametrize(("case", "msg", "wire"), CHAT_SAMPLES, ids=SAMPLE_IDS)
def test_each_chat_event_maps_to_its_ui_chunks(case: str, msg: Message[Chat, Any], wire: str
                                               ) -> None:
    got = ui_chunks([*frames_of(msg), EndFrame("completed")])
    assert got == [*PREAMBLE, *EXPECTED[case], *FINISH]


#: The terminal table: the run stream's terminal -> the UI chunks after the open part is closed.
def failed(code: str | None, *, recoverable: bool) -> dict[str, Any]:
    """The chunk that gives a failed reply's code to the page (``metadata.error``)."""
    return {"type": "message-metadata",
            "messageMetadata": {"error": {"code": code, "recoverable": recoverable}}}


TERMINAL_ROWS: list[tuple[str, Any, list[dict[str, Any]]]] = [
    ("completed", EndFrame("completed"), [{"type": "finish", "finishReason": "stop"}]),
    ("completed-reason-complete", EndFrame("completed", output={"reason": "complete"}),
     [{"type": "finish", "finishReason": "stop"}]),
    ("context_limit", EndFrame("completed", output={"reason": "context_limit"}),
     [{"type": "finish", "finishReason": "length"}]),
    ("stopReason-max_tokens", EndFrame("completed", output={"stopReason": "max_tokens"}),
     [{"type": "finish", "finishReason": "length"}]),
    ("stopReason-end_turn", EndFrame("completed", output={"stopReason": "end_turn"}),
     [{"type": "finish", "finishReason": "stop"}]),
    ("max_rounds", EndFrame("completed", output={"reason": "max_rounds"}),
     [{"type": "finish", "finishReason": "other"}]),
    ("timeout", EndFrame("completed", output={"reason": "timeout"}),
     [{"type": "finish", "finishReason": "other"}]),
    ("output-not-an-object", EndFrame("completed", output="a plain text output"),
     [{"type": "finish", "finishReason": "stop"}]),
    ("interrupted", EndFrame("interrupted"),
     [{"type": "abort", "reason": "interrupted"}, {"type": "finish", "finishReason": "stop"}]),
    ("paused", EndFrame("paused", state={"at": 3}), [{"type": "finish", "finishReason": "stop"}]),
    # D-4 in the user's words (aisdk._words), the code just before for the page's logic
    ("fail", FailFrame("the agent failed", False, {"code": "AGENT_ERROR"}),
     [failed("AGENT_ERROR", recoverable=False),
      {"type": "error", "errorText": REPLY_ERROR_WORDS["AGENT_ERROR"]},
      {"type": "finish", "finishReason": "error"}]),
    ("fail-recoverable", FailFrame("worker lost", True, {"code": "WORKER_LOST"}),
     [failed("WORKER_LOST", recoverable=True),
      {"type": "error", "errorText": REPLY_ERROR_WORDS["WORKER_LOST"]},
      {"type": "finish", "finishReason": "error"}]),
    ("truncated", TruncatedFrame(4),
     [failed("TRUNCATED", recoverable=False),
      {"type": "error", "errorText": REPLY_ERROR_WORDS["TRUNCATED"]},
      {"type": "finish", "finishReason": "error"}]),
]


@pytest.mark.parametrize(("case", "terminal", "ending"), TERMINAL_ROWS,
                         ids=[row[0] for row in TERMINAL_ROWS])
def test_each_terminal_maps_to_its_ending(case: str, terminal: Any, ending: list[Any]) -> None:
    got = ui_chunks([*frames_of(Chat.chunk({"chunk": "Hello, how can I help?"})), terminal])
    assert got == [*PREAMBLE, *TEXT, {"type": "finish-step"}, *ending]


def test_d4_a_failed_run_ends_with_the_error_then_finish_error_then_done() -> None:
    frames: list[StreamFrame | UnknownFrame] = [
        *frames_of(Chat.reasoning({"chunk": "hmm"}), Chat.chunk({"chunk": "Half a rep"})),
        FailFrame("the agent failed", False, {"code": "AGENT_ERROR"})]
    events = sse_events(encode_all(frames))
    data = [json.loads(d) if d != "[DONE]" else d for _, d in events]
    assert data[-5:] == [{"type": "finish-step"},
                         failed("AGENT_ERROR", recoverable=False),
                         {"type": "error", "errorText": REPLY_ERROR_WORDS["AGENT_ERROR"]},
                         {"type": "finish", "finishReason": "error"}, "[DONE]"]
    assert {"type": "text-end", "id": "t2"} in data, "the open text part is closed first"
    assert [d for d in data if isinstance(d, dict) and d["type"] == "finish"] == [
        {"type": "finish", "finishReason": "error"}], "exactly one finish"


def test_text_and_reasoning_alternate_in_parts_of_their_own() -> None:
    got = ui_chunks([*frames_of(
        Chat.reasoning({"chunk": "a"}), Chat.reasoning({"chunk": "b"}), Chat.chunk({"chunk": "c"}),
        Chat.chunk({"chunk": "d"}), Chat.reasoning({"chunk": "e"}), Chat.reasoning({"done": True}),
        Chat.chunk({"chunk": "f"})), EndFrame("completed")])
    assert got == [
        *PREAMBLE,
        {"type": "reasoning-start", "id": "r1"}, {"type": "reasoning-delta", "id": "r1", "delta": "a"},
        {"type": "reasoning-delta", "id": "r1", "delta": "b"}, {"type": "reasoning-end", "id": "r1"},
        {"type": "text-start", "id": "t3"}, {"type": "text-delta", "id": "t3", "delta": "c"},
        {"type": "text-delta", "id": "t3", "delta": "d"}, {"type": "text-end", "id": "t3"},
        {"type": "reasoning-start", "id": "r5"}, {"type": "reasoning-delta", "id": "r5", "delta": "e"},
        {"type": "reasoning-end", "id": "r5"},
        {"type": "text-start", "id": "t7"}, {"type": "text-delta", "id": "t7", "delta": "f"},
        {"type": "text-end", "id": "t7"}, *FINISH]


def test_clear_closes_the_open_part_so_new_text_starts_a_new_one() -> None:
    got = ui_chunks([*frames_of(Chat.chunk({"chunk": "draft"}), Chat.clear({}),
                                Chat.chunk({"chunk": "final"})), EndFrame("completed")])
    assert got[2:-2] == [{"type": "text-start", "id": "t1"},
                         {"type": "text-delta", "id": "t1", "delta": "draft"},
                         {"type": "text-end", "id": "t1"}, {"type": "data-clear", "data": {}},
                         {"type": "text-start", "id": "t3"},
                         {"type": "text-delta", "id": "t3", "delta": "final"},
                         {"type": "text-end", "id": "t3"}]


def test_without_a_message_id_start_has_none() -> None:
    assert ui_chunks([EndFrame("completed")], message_id=None)[0] == {"type": "start"}


def test_what_is_ignored() -> None:
    bad = ChunkFrame(2, msgspec.Raw(b'{"event":"chunk","data":{"chunk":7}}'))
    encoder = UIMessageStreamEncoder("m1")
    got: list[Any] = []
    for frame in [*frames_of(Chat.chunk({"chunk": "a"})), bad, RewoundFrame(0),
                  CaughtUpFrame(3), UnknownFrame("future", "{}"), EndFrame("completed")]:
        got += encoder.chunks(frame)
    assert got == [*PREAMBLE, {"type": "text-start", "id": "t1"},
                   {"type": "text-delta", "id": "t1", "delta": "a"},
                   {"type": "text-end", "id": "t1"}, *FINISH]
    assert encoder.skipped == 1
    assert encoder.finished
    assert encoder.chunks(EndFrame("completed")) == [], "nothing after the terminal"
    assert encoder.feed(EndFrame("completed")) == b""


def test_an_event_outside_the_chat_contract_is_a_data_part_not_dropped() -> None:
    unknown = ChunkFrame(3, msgspec.Raw(b'{"event":"tool_call","data":{"x":1}}'))
    encoder = UIMessageStreamEncoder("m1")
    got: list[Any] = []
    for frame in [*frames_of(Chat.chunk({"chunk": "a"})), unknown, EndFrame("completed")]:
        got += encoder.chunks(frame)
    assert got == [*PREAMBLE, {"type": "text-start", "id": "t1"},
                   {"type": "text-delta", "id": "t1", "delta": "a"},
                   {"type": "data-tool_call", "data": {"x": 1}},
                   {"type": "text-end", "id": "t1"}, *FINISH]
    assert encoder.skipped == 0


def test_a_chunk_that_is_not_a_message_is_skipped() -> None:
    encoder = UIMessageStreamEncoder("m1")
    assert encoder.chunks(ChunkFrame(1, msgspec.Raw(b'"just text"'))) == PREAMBLE
    assert encoder.skipped == 1


# -- SSE, event ids and resuming ---------------------------------------------------------------

REPLY: list[StreamFrame | UnknownFrame] = [
    *frames_of(Chat.message_start({"userMessageId": "u1", "assistantMessageId": "m1",
                                   "model": {"id": "x", "displayName": "X", "provider": "p"}}),
               Chat.reasoning({"chunk": "think"}), Chat.reasoning({"done": True}),
               Chat.chunk({"chunk": "Hel"}), Chat.chunk({"chunk": "lo"}),
               Chat.sources([{"url": "https://a.example", "title": "A"}]),
               Chat.usage({"inputTokens": 1, "outputTokens": 2, "totalTokens": 3})),
    CaughtUpFrame(7), EndFrame("completed")]


def test_the_sse_body_is_one_data_line_per_chunk_with_ids_then_done() -> None:
    body = encode_all(REPLY)
    assert body.startswith(b'id: 0\ndata: {"type":"start","messageId":"m1"}\n\n'
                           b'id: 0.1\ndata: {"type":"start-step"}\n\n')
    assert body.endswith(b'data: {"type":"finish","finishReason":"stop"}\n\nid: 7.4\ndata: [DONE]\n\n')
    events = sse_events(body)
    ids = [parse_event_id(i) for i, _ in events]
    assert ids == sorted(ids), "ids increase"
    assert len(set(ids)) == len(ids), "ids are unique"
    for _, data in events[:-1]:
        json.loads(data)
    assert {i.partition(".")[0] for i, _ in events} == {str(n) for n in range(8)}
    assert body.count(b"\n\n") == len(events)
    assert dict(UI_MESSAGE_STREAM_HEADERS)["x-vercel-ai-ui-message-stream"] == "v1"


def test_resuming_after_any_event_id_gives_exactly_the_events_after_it() -> None:
    full = sse_events(encode_all(REPLY))
    for k, (event_id, _) in enumerate(full):
        assert sse_events(encode_all(REPLY, after=event_id)) == full[k + 1:], event_id


def test_feed_without_encode_start_sends_the_preamble_first() -> None:
    encoder = UIMessageStreamEncoder("m1")
    body = b"".join(encoder.feed(frame) for frame in REPLY)
    assert body == encode_all(REPLY)


@pytest.mark.parametrize(("text", "position"), [("0", (0, 0)), ("7", (7, 0)), ("7.2", (7, 2)),
                                                 (" 12.0 ", (12, 0))])
def test_event_ids_round_trip(text: str, position: tuple[int, int]) -> None:
    assert parse_event_id(text) == position
    assert parse_event_id(format_event_id(position)) == position


@pytest.mark.parametrize("text", ["", "x", "-1", "1.", ".1", "1.2.3", "1e3", "\u0661", "9" * 19, "1.x"])
def test_a_bad_event_id_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="not a UI message stream event id"):
        parse_event_id(text)
    with pytest.raises(ValueError, match="not a UI message stream event id"):
        UIMessageStreamEncoder("m1", after=text)


# -- the terminal table, both directions -------------------------------------------------------

@pytest.mark.parametrize("reason", sorted(STREAM_END_REASONS))
def test_terminals_table_round_trips(reason: Any) -> None:
    frame = TERMINALS[reason]
    done = chat_terminal(frame, message_id="a1", user_message_id="u1")
    assert done.name == "done"
    assert done.data == {"done": True, "messageId": "a1", "userMessageId": "u1", "reason": reason}
    assert terminal_frame(done) == frame
    assert end_reason(frame) == reason
    assert reason in FINISH_REASONS


def test_every_end_status_has_a_reason() -> None:
    assert set(END_REASONS) == {"completed", "paused", "interrupted"}
    assert chat_terminal(EndFrame("paused")).data["reason"] == "complete"
    assert chat_terminal(EndFrame("interrupted")).data["reason"] == "cancelled"


def test_fail_and_error_map_both_ways() -> None:
    error = chat_terminal(FailFrame("the agent failed", False, {"code": "AGENT_ERROR"}))
    assert error.name == "error"
    assert error.data == {"error": "the agent failed", "message": "the agent failed"}
    assert terminal_frame(error) == FailFrame("the agent failed", False)
    assert chat_terminal(terminal_frame(error)).data == error.data


def test_a_truncated_reply_raises_its_typed_error() -> None:
    with pytest.raises(StreamTruncatedError) as caught:
        chat_terminal(TruncatedFrame(9))
    assert caught.value.floor == 9


def test_an_unknown_stop_reason_ends_as_complete() -> None:
    assert end_reason(EndFrame("completed", output={"stopReason": "weird"})) == "complete"
    assert end_reason(EndFrame("completed", output={"stopReason": "tool_use"})) == "complete"
    assert end_reason(EndFrame("interrupted", output={"reason": "timeout"})) == "cancelled"


# -- the reader side's decoder -------------------------------------------------------------------

def test_reply_decoder_passes_chat_events_through_and_ends_with_done() -> None:
    decoder = ChatReplyDecoder(message_id="given", user_message_id="given-u")
    out = []
    for frame in REPLY:
        if isinstance(frame, ChunkFrame):
            event = decoder.event(frame)
            if event is not None:
                out.append((event.event, event.data, event.id))
    assert [name for name, _, _ in out] == ["message_start", "reasoning", "reasoning", "chunk",
                                            "chunk", "sources", "usage"]
    assert out[3] == ("chunk", '{"chunk":"Hel"}', "4")
    done = decoder.terminal(EndFrame("completed"))
    assert (done.event, json.loads(done.data)) == ("done", {
        "done": True, "messageId": "m1", "userMessageId": "u1", "reason": "complete"})


def test_reply_decoder_d4_fail_is_the_error_event() -> None:
    decoder = ChatReplyDecoder(message_id="a1")
    error = decoder.terminal(FailFrame("boom", False))
    assert (error.event, json.loads(error.data)) == ("error", {"error": "boom", "message": "boom"})
    assert Chat.error.decode(error.data) == {"error": "boom", "message": "boom"}
    with pytest.raises(StreamTruncatedError):
        decoder.terminal(TruncatedFrame(3))


def test_reply_decoder_skips_terminal_and_undeclared_events_and_passes_bad_payloads() -> None:
    decoder = ChatReplyDecoder()
    assert decoder.event(CODEC.frame(1, Chat.done({"done": True, "messageId": "a",
                                                   "userMessageId": "u",
                                                   "reason": "complete"}))) is None
    assert decoder.event(CODEC.frame(2, Chat.error({"error": "x", "message": "x"}))) is None
    assert decoder.event(ChunkFrame(3, msgspec.Raw(b'{"event":"tool","data":1}'))) is None
    bad = decoder.event(ChunkFrame(4, msgspec.Raw(b'{"event":"chunk","data":{"chunk":7}}')))
    assert bad is not None
    assert bad.data == '{"chunk":7}', "the reader's parse-error path decides"
    with pytest.raises(PayloadError):
        decoder.event(ChunkFrame(5, msgspec.Raw(b"[1]")))
