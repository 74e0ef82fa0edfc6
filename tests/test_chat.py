"""The chat contract: every TRD event's wire JSON (and the tool and step events'), each union
variant, decode validation, the end reasons and the stop-reason mapping ("Serialization
correctness" of the TRD's test plan)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.chat import (
    STOP_REASON_TO_END_REASON,
    STREAM_END_REASONS,
    Chat,
    ConversationStep,
    ModelInfo,
    is_stream_end_reason,
    stop_reason_to_end_reason,
)
from streamwire.contract import Message
from streamwire.errors import PayloadError
from streamwire.sse import SSEDecoder, encode_frame

MODEL: ModelInfo = {"id": "claude-x", "displayName": "Claude X", "provider": "anthropic"}
STEP: ConversationStep = {"id": "s1", "label": "Searching", "status": "active", "toolName": "web", "detail": "q"}

# (message, exact wire JSON): every event of StreamEventMap, every union variant separately.
CASES: list[tuple[str, Message[Chat, Any], str]] = [
    ("chunk", Chat.chunk({"chunk": "Hello, how can I help?"}), '{"chunk":"Hello, how can I help?"}'),
    ("reasoning.chunk", Chat.reasoning({"chunk": "Let me think"}), '{"chunk":"Let me think"}'),
    ("reasoning.done", Chat.reasoning({"done": True}), '{"done":true}'),
    ("progress.steps", Chat.progress({"steps": [STEP, {"id": "s2", "label": "Reading",
                                                       "status": "pending"}]}),
     '{"steps":[{"id":"s1","label":"Searching","status":"active","toolName":"web","detail":"q"},'
     '{"id":"s2","label":"Reading","status":"pending"}]}'),
    ("progress.done", Chat.progress({"done": True}), '{"done":true}'),
    ("progress.chunk", Chat.progress({"chunk": "Looking up"}), '{"chunk":"Looking up"}'),
    ("clear", Chat.clear({}), "{}"),
    ("message_start", Chat.message_start({"userMessageId": "u1", "assistantMessageId": "a1",
                                          "model": MODEL}),
     '{"userMessageId":"u1","assistantMessageId":"a1",'
     '"model":{"id":"claude-x","displayName":"Claude X","provider":"anthropic"}}'),
    ("usage", Chat.usage({"inputTokens": 10, "outputTokens": 20, "totalTokens": 30}),
     '{"inputTokens":10,"outputTokens":20,"totalTokens":30}'),
    ("usage.cache", Chat.usage({"inputTokens": 1, "outputTokens": 2, "totalTokens": 3,
                                "cacheReadInputTokens": 4, "cacheWriteInputTokens": 5}),
     '{"inputTokens":1,"outputTokens":2,"totalTokens":3,"cacheReadInputTokens":4,'
     '"cacheWriteInputTokens":5}'),
    ("sources", Chat.sources([{"url": "https://a.example", "title": "A"},
                              {"url": "https://b.example", "title": "B", "snippet": "b"}]),
     '[{"url":"https://a.example","title":"A"},{"url":"https://b.example","title":"B","snippet":"b"}]'),
    ("sources.empty", Chat.sources([]), "[]"),
    ("suggestions", Chat.suggestions(["Tell me more", "Why?"]), '["Tell me more","Why?"]'),
    ("attachments", Chat.attachments([{"id": "f1", "filename": "a.png", "mimeType": "image/png",
                                       "dataUrl": "data:image/png;base64,iVBORw0K", "size": 7}]),
     '[{"id":"f1","filename":"a.png","mimeType":"image/png",'
     '"dataUrl":"data:image/png;base64,iVBORw0K","size":7}]'),
    ("title", Chat.title({"title": "Trip to Lisbon"}), '{"title":"Trip to Lisbon"}'),
    ("warnings", Chat.warnings(["Output may be truncated"]), '["Output may be truncated"]'),
    ("compression.start", Chat.compression({"messageCount": 42}), '{"messageCount":42}'),
    ("compression.done", Chat.compression({"done": True}), '{"done":true}'),
    ("selection_required", Chat.selection_required({
        "selectionId": "sel1", "prompt": "Which file?", "multiple": False,
        "options": [{"id": "o1", "label": "a.txt"}, {"id": "o2", "label": "b.txt",
                                                     "description": "newer"}]}),
     '{"selectionId":"sel1","prompt":"Which file?","multiple":false,"options":'
     '[{"id":"o1","label":"a.txt"},{"id":"o2","label":"b.txt","description":"newer"}]}'),
    ("done", Chat.done({"done": True, "messageId": "a1", "userMessageId": "u1",
                        "reason": "complete"}),
     '{"done":true,"messageId":"a1","userMessageId":"u1","reason":"complete"}'),
    ("error", Chat.error({"error": "Model overloaded", "message": "Model overloaded"}),
     '{"error":"Model overloaded","message":"Model overloaded"}'),
    # tool calls and steps: the AI SDK v6 tool chunks' fields
    ("tool_input_start", Chat.tool_input_start({"toolCallId": "c1", "toolName": "get_weather"}),
     '{"toolCallId":"c1","toolName":"get_weather"}'),
    ("tool_input_start.title", Chat.tool_input_start({"toolCallId": "c1", "toolName": "w",
                                                      "title": "Weather"}),
     '{"toolCallId":"c1","toolName":"w","title":"Weather"}'),
    ("tool_input_delta", Chat.tool_input_delta({"toolCallId": "c1", "inputTextDelta": '{"ci'}),
     '{"toolCallId":"c1","inputTextDelta":"{\\"ci"}'),
    ("tool_input_available", Chat.tool_input_available({
        "toolCallId": "c1", "toolName": "get_weather", "input": {"city": "Paris"}}),
     '{"toolCallId":"c1","toolName":"get_weather","input":{"city":"Paris"}}'),
    ("tool_input_available.null", Chat.tool_input_available({
        "toolCallId": "c1", "toolName": "now", "input": None}),
     '{"toolCallId":"c1","toolName":"now","input":null}'),
    ("tool_approval_request", Chat.tool_approval_request({"approvalId": "a1",
                                                          "toolCallId": "c1"}),
     '{"approvalId":"a1","toolCallId":"c1"}'),
    ("tool_output_available", Chat.tool_output_available({"toolCallId": "c1",
                                                          "output": [18, "sunny"]}),
     '{"toolCallId":"c1","output":[18,"sunny"]}'),
    ("tool_output_error", Chat.tool_output_error({"toolCallId": "c1", "errorText": "timeout"}),
     '{"toolCallId":"c1","errorText":"timeout"}'),
    ("tool_output_denied", Chat.tool_output_denied({"toolCallId": "c1"}), '{"toolCallId":"c1"}'),
    ("step_start", Chat.step_start({}), "{}"),
    ("step_finish", Chat.step_finish({}), "{}"),
]

TRD_EVENTS = [
    "chunk", "reasoning", "progress", "clear", "message_start", "usage", "sources", "suggestions",
    "attachments", "title", "warnings", "compression", "selection_required", "done", "error",
]
TOOL_AND_STEP_EVENTS = [
    "tool_input_start", "tool_input_delta", "tool_input_available", "tool_approval_request",
    "tool_output_available", "tool_output_error", "tool_output_denied", "step_start",
    "step_finish",
]
#: The TRD's events with the tool and step events before the terminal ones.
CHAT_EVENTS = [*TRD_EVENTS[:-2], *TOOL_AND_STEP_EVENTS, *TRD_EVENTS[-2:]]


def test_contract_has_exactly_the_trd_events() -> None:
    assert list(Chat.events()) == CHAT_EVENTS
    for name in CHAT_EVENTS:
        assert getattr(Chat, name).name == name  # the wire name is the attribute name


def test_chat_resolves() -> None:
    Chat.resolve()


def test_every_event_and_variant_is_covered() -> None:
    assert {msg.name for _, msg, _ in CASES} == set(CHAT_EVENTS)
    assert {case for case, _, _ in CASES} >= {
        "reasoning.chunk", "reasoning.done", "progress.steps", "progress.done", "progress.chunk",
        "compression.start", "compression.done"}


@pytest.mark.parametrize(("msg", "wire"), [(m, w) for _, m, w in CASES], ids=[c for c, _, _ in CASES])
class TestSerialization:
    def test_exact_json(self, msg: Message[Chat, Any], wire: str) -> None:
        assert msg.encode() == wire.encode()
        assert json.loads(wire) == msg.data

    def test_sse_frame(self, msg: Message[Chat, Any], wire: str) -> None:
        """TRD "SSE Wire Format": ``event: <name>\\ndata: <single-line JSON>\\n\\n``."""
        frame = encode_frame(msg.encode().decode(), event=msg.name)
        assert frame == f"event: {msg.name}\ndata: {wire}\n\n".encode()

    def test_round_trip(self, msg: Message[Chat, Any], wire: str) -> None:
        assert msg.event.decode(wire) == msg.data
        assert msg.event.decode(msg.encode()) == msg.data


def test_special_characters_survive_the_wire() -> None:
    text = 'line1\nline2\r\n"quoted" \\ tab\t émoji 😀 \u2028 NUL\x00'
    msg = Chat.chunk({"chunk": text})
    frame = encode_frame(msg.encode().decode(), event=msg.name)
    assert frame.count(b"\n") == 3  # event line, one data line, blank line
    decoder = SSEDecoder()
    (event,) = decoder.feed(frame)
    assert event.event == "chunk"
    assert Chat.chunk.decode(event.data) == {"chunk": text}


def test_a_whole_chat_stream_decodes_through_the_sse_decoder() -> None:
    body = b"".join(encode_frame(m.encode().decode(), event=m.name) for _, m, _ in CASES)
    decoder = SSEDecoder()
    events = [e for i in range(0, len(body), 7) for e in decoder.feed(body[i:i + 7])]
    assert [e.event for e in events] == [m.name for _, m, _ in CASES]
    for event, (_, msg, _) in zip(events, CASES, strict=True):
        bound = Chat.event_named(event.event)
        assert bound is msg.event
        assert bound.decode(event.data) == msg.data


# --- decode validation, per event ---------------------------------------------------------------

REJECTED: list[tuple[str, str]] = [
    ("chunk", '{"chunk":1}'),
    ("chunk", '{"text":"hi"}'),
    ("chunk", '"hi"'),
    ("reasoning", '{"done":false}'),
    ("reasoning", '{"chunk":"a","done":true}'),
    ("reasoning", "{}"),
    ("progress", '{"steps":[{"id":"1","label":"x"}]}'),                   # step without status
    ("progress", '{"steps":[{"id":"1","label":"x","status":"paused"}]}'),  # unknown status
    ("progress", '{"steps":[],"chunk":"x"}'),
    ("progress", '{"clear":true}'),   # the old protocol's progress
    ("progress", '{"thinking":"x"}'),  # the old protocol's progress
    ("clear", "[]"),
    ("clear", "null"),
    ("message_start", '{"userMessageId":"u","assistantMessageId":"a"}'),
    ("message_start", '{"userMessageId":"u","assistantMessageId":"a","model":{"id":"m","provider":"p"}}'),
    ("message_start", '{"user_message_id":"u","assistant_message_id":"a","model":{}}'),  # snake_case
    ("usage", '{"inputTokens":1,"outputTokens":2}'),
    ("usage", '{"inputTokens":"1","outputTokens":2,"totalTokens":3}'),
    ("sources", '{"sources":[]}'),  # wrapped, the old protocol
    ("sources", '[{"url":"u"}]'),
    ("suggestions", '{"suggestions":["a"]}'),
    ("suggestions", '["a",1]'),
    ("attachments", '[{"id":"f","filename":"a","mimeType":"x/y"}]'),
    ("title", '{"title":null}'),
    ("warnings", '{"warnings":["w"]}'),
    ("compression", '{"messageCount":"3"}'),
    ("compression", '{"messageCount":3,"done":true}'),
    ("compression", '{"done":false}'),
    ("selection_required", '{"selectionId":"s","prompt":"p"}'),
    ("selection_required", '{"selectionId":"s","prompt":"p","options":[{"id":"o"}]}'),
    ("done", '{"done":true,"messageId":"a","userMessageId":"u","reason":"finished"}'),
    ("done", '{"done":false,"messageId":"a","userMessageId":"u","reason":"complete"}'),
    ("done", '{"done":true,"messageId":"a","reason":"complete"}'),
    ("error", '{"error":"x"}'),
    ("error", '{"message":"x"}'),
    ("error", "not json"),
    ("tool_input_start", '{"toolCallId":"c1"}'),
    ("tool_input_start", '{"tool_call_id":"c1","tool_name":"w"}'),  # snake_case
    ("tool_input_delta", '{"toolCallId":"c1","inputTextDelta":{"city":"P"}}'),
    ("tool_input_available", '{"toolCallId":"c1","toolName":"w"}'),  # no input (null is one)
    ("tool_approval_request", '{"toolCallId":"c1"}'),
    ("tool_output_available", '{"toolCallId":"c1"}'),
    ("tool_output_error", '{"toolCallId":"c1","errorText":null}'),
    ("tool_output_denied", '{"toolCallId":1}'),
    ("step_start", "[]"),
    ("step_finish", "null"),
]


@pytest.mark.parametrize(("name", "raw"), REJECTED)
def test_wrong_shapes_are_rejected(name: str, raw: str) -> None:
    bound = Chat.event_named(name)
    assert bound is not None
    with pytest.raises(PayloadError) as info:
        bound.decode(raw)
    assert info.value.event == name
    assert info.value.raw == raw


def test_every_event_has_a_rejection_case() -> None:
    assert {name for name, _ in REJECTED} == set(CHAT_EVENTS)


def test_unknown_keys_are_dropped_so_servers_can_add_fields() -> None:
    assert Chat.clear.decode('{"anything":1}') == {}
    assert Chat.title.decode('{"title":"t","subtitle":"s"}') == {"title": "t"}
    assert Chat.progress.decode('{"done":true,"elapsedMs":3}') == {"done": True}


def test_large_data_url_attachment() -> None:
    """TRD: attachments are data URLs inside JSON, 1-10 MB."""
    url = "data:application/pdf;base64," + "A" * (3 * 1024 * 1024)
    msg = Chat.attachments([{"id": "f", "filename": "big.pdf", "mimeType": "application/pdf",
                             "dataUrl": url}])
    assert Chat.attachments.decode(msg.encode()) == msg.data


# --- end reasons and the stop-reason mapping ------------------------------------------------------

REASONS = ["complete", "max_rounds", "cancelled", "context_limit", "timeout"]


def test_the_five_end_reasons() -> None:
    assert set(REASONS) == STREAM_END_REASONS
    assert isinstance(STREAM_END_REASONS, frozenset)


@pytest.mark.parametrize("reason", REASONS)
def test_is_stream_end_reason_accepts(reason: str) -> None:
    assert is_stream_end_reason(reason)
    assert Chat.done.decode(json.dumps({"done": True, "messageId": "", "userMessageId": "",
                                        "reason": reason}))["reason"] == reason


@pytest.mark.parametrize("value", [
    "", "Complete", "COMPLETE", "complete ", "finished", "end_turn", "error", "aborted",
    None, 0, 1, True, b"complete", ["complete"], {"reason": "complete"}, object(),
])
def test_is_stream_end_reason_rejects(value: object) -> None:
    assert not is_stream_end_reason(value)


def test_is_stream_end_reason_accepts_str_subclasses() -> None:
    from enum import StrEnum

    class Reason(StrEnum):
        TIMEOUT = "timeout"
        OTHER = "other"

    assert is_stream_end_reason(Reason.TIMEOUT)
    assert not is_stream_end_reason(Reason.OTHER)


@pytest.mark.parametrize(("stop", "end"), [
    ("end_turn", "complete"),
    ("max_tokens", "context_limit"),
    ("stop_sequence", "complete"),
    ("tool_use", None),
])
def test_stop_reason_mapping(stop: str, end: str | None) -> None:
    assert stop_reason_to_end_reason(stop) == end
    assert STOP_REASON_TO_END_REASON[stop] == end


def test_stop_reason_mapping_is_the_trd_table() -> None:
    assert dict(STOP_REASON_TO_END_REASON) == {
        "end_turn": "complete", "max_tokens": "context_limit", "stop_sequence": "complete",
        "tool_use": None}
    assert all(v is None or is_stream_end_reason(v) for v in STOP_REASON_TO_END_REASON.values())
    with pytest.raises(TypeError):
        STOP_REASON_TO_END_REASON["x"] = "complete"  # type: ignore[index]


@pytest.mark.parametrize("stop", ["", "END_TURN", "pause_turn", "refusal", "guardrail_intervened"])
def test_unknown_stop_reason_raises(stop: str) -> None:
    with pytest.raises(ValueError, match="unknown stop reason") as info:
        stop_reason_to_end_reason(stop)
    assert "end_turn" in str(info.value)  # the message lists the known ones


def test_non_string_stop_reason_raises() -> None:
    bad: Any = None
    with pytest.raises(ValueError, match="unknown stop reason None"):
        stop_reason_to_end_reason(bad)
    unhashable: Any = ["end_turn"]
    with pytest.raises(ValueError, match="unknown stop reason"):
        stop_reason_to_end_reason(unhashable)


@given(st.text())
def test_any_text_is_an_end_reason_exactly_when_listed(text: str) -> None:
    assert is_stream_end_reason(text) == (text in REASONS)


#: The events whose payload holds ``Any`` (any JSON: test_chat_tools.py draws it as JSON).
JSON_VALUED = ("tool_input_available", "tool_output_available")


@pytest.mark.parametrize("name", [name for name in CHAT_EVENTS if name not in JSON_VALUED])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_valid_payload_round_trips(name: str, data: st.DataObject) -> None:
    """Hypothesis builds payloads from the declared types: each encodes and decodes to itself, or
    encoding refuses it with PayloadError (a lone surrogate, an int beyond 64 bits)."""
    bound = Chat.event_named(name)
    assert bound is not None
    payload = data.draw(st.from_type(bound.payload_type))
    try:
        raw = bound.encode(payload)
    except PayloadError:
        return
    assert bound.decode(raw) == payload
    assert json.loads(raw) == payload
