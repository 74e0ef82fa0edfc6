"""Tool calls and steps on the AI SDK wire: each chat tool/step event's UI chunks, the closings at a
step's end and at the reply's end (D-4: open tool parts closed before ``error`` and ``finish``),
events out of order skipped (never sent), resuming a tool reply after any event id, and (hypothesis)
any sequence of text, reasoning, tool and step events maps to a stream the AI SDK client accepts:
every delta after its start, every tool event on an existing part, every tool part closed at a
failure's end."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.chat_samples import MyChat
from streamwire.aisdk import (
    INPUT_NEVER_COMPLETED,
    STOPPED_BEFORE_OUTPUT,
    TOOL_CHUNKS,
    ChatReplyDecoder,
    UIMessageStreamEncoder,
    open_tool_ending,
)
from streamwire.chat import TOOL_TRANSITIONS, Chat, ToolCallState, advance_tool_call
from streamwire.contract import Message
from streamwire.errors import UsageError
from streamwire.frames import (
    ChunkCodec,
    ChunkFrame,
    EndFrame,
    FailFrame,
    StreamFrame,
    TerminalFrame,
    TruncatedFrame,
    UnknownFrame,
)
from streamwire.sse import SSEDecoder

CODEC = ChunkCodec(Chat)
PREAMBLE = [{"type": "start", "messageId": "m1"}, {"type": "start-step"}]
FINISH = [{"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}]
CITY = {"city": "Paris"}
WEATHER = {"celsius": 18, "sky": "clear"}


def frames_of(*messages: Message[Chat, Any]) -> list[StreamFrame | UnknownFrame]:
    return [CODEC.frame(i, msg) for i, msg in enumerate(messages, 1)]


def ui_chunks(frames: list[StreamFrame | UnknownFrame]) -> tuple[list[dict[str, Any]], int]:
    encoder = UIMessageStreamEncoder("m1")
    out: list[Any] = []
    for frame in frames:
        out += encoder.chunks(frame)
    return out, encoder.skipped


def start(call: str = "c1", name: str = "get_weather") -> Message[Chat, Any]:
    return Chat.tool_input_start({"toolCallId": call, "toolName": name})


def delta(text: str, call: str = "c1") -> Message[Chat, Any]:
    return Chat.tool_input_delta({"toolCallId": call, "inputTextDelta": text})


def available(call: str = "c1", value: Any = None, name: str = "get_weather") -> Message[Chat, Any]:
    return Chat.tool_input_available({"toolCallId": call, "toolName": name,
                                      "input": CITY if value is None else value})


def output(call: str = "c1", value: Any = None) -> Message[Chat, Any]:
    return Chat.tool_output_available({"toolCallId": call,
                                       "output": WEATHER if value is None else value})


def text(chunk: str) -> Message[Chat, Any]:
    return Chat.chunk({"chunk": chunk})


STEP_START = Chat.step_start({})
STEP_FINISH = Chat.step_finish({})

#: A two-step reply: text, the tool call (step 1), then the answer (step 2).
TWO_STEPS: list[Message[Chat, Any]] = [
    STEP_START, text("Let me check."), start(), delta('{"city":'), delta('"Paris"}'), available(),
    output(), STEP_FINISH, STEP_START, text("It is 18 °C."), STEP_FINISH]


def test_a_two_step_tool_reply() -> None:
    got, skipped = ui_chunks([*frames_of(*TWO_STEPS), EndFrame("completed")])
    assert skipped == 0
    assert got == [
        *PREAMBLE,  # the agent's first step_start adds nothing: the preamble's step is empty
        {"type": "text-start", "id": "t2"}, {"type": "text-delta", "id": "t2", "delta": "Let me check."},
        {"type": "text-end", "id": "t2"},  # closed by the tool part, which goes below it
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '"Paris"}'},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "get_weather",
         "input": CITY},
        {"type": "tool-output-available", "toolCallId": "c1", "output": WEATHER},
        {"type": "finish-step"}, {"type": "start-step"},
        {"type": "text-start", "id": "t10"}, {"type": "text-delta", "id": "t10", "delta": "It is 18 °C."},
        {"type": "text-end", "id": "t10"}, {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"}]  # no second finish-step: no step is open


def test_approval_requested_then_output_or_denied() -> None:
    approval = Chat.tool_approval_request({"approvalId": "a1", "toolCallId": "c1"})
    got, _ = ui_chunks([*frames_of(start("c1", "delete_file"), available("c1", name="delete_file"),
                                   approval), EndFrame("paused")])
    assert got[2:] == [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "delete_file"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "delete_file",
         "input": CITY},
        {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"},
        *FINISH], "a paused reply leaves the request open: the user answers it"
    denied, _ = ui_chunks([*frames_of(available(), approval, Chat.tool_output_denied(
        {"toolCallId": "c1"})), EndFrame("completed")])
    assert denied[-3:] == [{"type": "tool-output-denied", "toolCallId": "c1"}, *FINISH]
    approved, _ = ui_chunks([*frames_of(available(), approval, output()), EndFrame("completed")])
    assert approved[-3] == {"type": "tool-output-available", "toolCallId": "c1", "output": WEATHER}


def test_tool_output_error_and_title() -> None:
    got, _ = ui_chunks([*frames_of(
        Chat.tool_input_start({"toolCallId": "c1", "toolName": "w", "title": "Weather"}),
        Chat.tool_input_available({"toolCallId": "c1", "toolName": "w", "input": None,
                                   "title": "Weather"}),
        Chat.tool_output_error({"toolCallId": "c1", "errorText": "no network"})),
        EndFrame("completed")])
    assert got[2:-2] == [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "w", "title": "Weather"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "w", "input": None,
         "title": "Weather"},
        {"type": "tool-output-error", "toolCallId": "c1", "errorText": "no network"}]


def test_extra_keys_never_reach_the_wire() -> None:
    """Decoding drops undeclared keys, so a chunk carries only v6 keys."""
    raw = ChunkFrame(1, msgspec.Raw(b'{"event":"tool_input_start","data":{"toolCallId":"c1",'
                                    b'"toolName":"w","providerExecuted":true,"secret":1}}'))
    got, _ = ui_chunks([raw, EndFrame("completed")])
    assert got[2] == {"type": "tool-input-start", "toolCallId": "c1", "toolName": "w"}


@pytest.mark.parametrize(("case", "events"), [
    ("delta before its start", [delta("{")]),
    ("output before its input", [start(), output()]),
    ("output of an unknown call", [output("nope")]),
    ("a second start", [start(), start()]),
    ("a delta after the input", [start(), available(), delta("{")]),
    ("a second output", [available(), output(), output()]),
    ("denied without a request", [available(), Chat.tool_output_denied({"toolCallId": "c1"})]),
])
def test_an_event_out_of_order_is_skipped_never_sent(case: str, events: list[Any]) -> None:
    got, skipped = ui_chunks([*frames_of(*events), EndFrame("completed")])
    assert skipped == 1, case
    without, _ = ui_chunks([*frames_of(*events[:-1]), EndFrame("completed")])
    assert got == without, "the last event (out of order) sent nothing"
    calls: dict[str, ToolCallState] = {}
    for msg in events[:-1]:
        advance_tool_call(calls, msg.name, msg.data)
    with pytest.raises(UsageError, match="tool call"):
        advance_tool_call(calls, events[-1].name, events[-1].data)


def test_the_usage_error_says_what_is_wrong() -> None:
    with pytest.raises(UsageError, match="tool_input_delta for tool call 'c9' before its "
                                         "tool_input_start"):
        advance_tool_call({}, "tool_input_delta", {"toolCallId": "c9", "inputTextDelta": "{"})
    calls: dict[str, ToolCallState] = {"c9": "output-available"}
    with pytest.raises(UsageError, match="whose state is already 'output-available'"):
        advance_tool_call(calls, "tool_output_error", {"toolCallId": "c9", "errorText": "x"})
    assert calls == {"c9": "output-available"}, "a refused event changes nothing"


# -- steps ---------------------------------------------------------------------------------------

def test_step_finish_closes_the_open_text_first() -> None:
    got, _ = ui_chunks([*frames_of(text("a"), STEP_FINISH), EndFrame("completed")])
    assert got == [*PREAMBLE, {"type": "text-start", "id": "t1"},
                   {"type": "text-delta", "id": "t1", "delta": "a"},
                   {"type": "text-end", "id": "t1"}, {"type": "finish-step"},
                   {"type": "finish", "finishReason": "stop"}]


def test_content_after_a_step_finish_opens_a_step_data_parts_do_not() -> None:
    got, _ = ui_chunks([*frames_of(
        STEP_FINISH, Chat.usage({"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}),
        Chat.reasoning({"chunk": "r"}), STEP_FINISH, STEP_FINISH,
        Chat.sources([{"url": "u", "title": "t"}])), EndFrame("completed")])
    assert [c["type"] for c in got] == [
        "start", "start-step", "finish-step", "data-usage", "start-step", "reasoning-start",
        "reasoning-delta", "reasoning-end", "finish-step", "start-step", "source-url",
        "finish-step", "finish"]


def test_step_start_in_a_step_with_content_ends_it_first() -> None:
    got, _ = ui_chunks([*frames_of(text("a"), STEP_START, STEP_START, text("b")),
                        EndFrame("completed")])
    assert [c["type"] for c in got] == [
        "start", "start-step", "text-start", "text-delta", "text-end", "finish-step",
        "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]


# -- the reply's end -----------------------------------------------------------------------------

OPEN_CALLS = [start("streaming"), delta("{", "streaming"), available("waiting"),
              available("asking"), Chat.tool_approval_request({"approvalId": "a",
                                                               "toolCallId": "asking"}),
              available("done"), output("done")]


def _closings(terminal: TerminalFrame) -> list[dict[str, Any]]:
    got, _ = ui_chunks([*frames_of(*OPEN_CALLS), terminal])
    return got[got.index({"type": "tool-output-available", "toolCallId": "done",
                          "output": WEATHER}) + 1:]


def test_d4_a_failure_closes_every_open_tool_part_before_error_and_finish() -> None:
    closing = [{"type": "tool-output-error", "toolCallId": call, "errorText": "boom"}
               for call in ("streaming", "waiting", "asking")]
    assert _closings(FailFrame("boom", False)) == [
        *closing, {"type": "finish-step"},
        {"type": "message-metadata",
         "messageMetadata": {"error": {"code": None, "recoverable": False}}},
        {"type": "error", "errorText": "boom"}, {"type": "finish", "finishReason": "error"}]
    truncated = _closings(TruncatedFrame(3))
    assert [c["type"] for c in truncated] == ["tool-output-error"] * 3 + [
        "finish-step", "message-metadata", "error", "finish"]


def test_a_stop_closes_every_open_tool_part() -> None:
    closing = [{"type": "tool-output-error", "toolCallId": call,
                "errorText": STOPPED_BEFORE_OUTPUT} for call in ("streaming", "waiting", "asking")]
    assert _closings(EndFrame("interrupted")) == [
        *closing, {"type": "finish-step"}, {"type": "abort", "reason": "interrupted"},
        {"type": "finish", "finishReason": "stop"}]


@pytest.mark.parametrize("status", ["completed", "paused"])
def test_a_completed_or_paused_end_closes_only_an_unfinished_input(status: Any) -> None:
    """A client-side tool (input available) and an approval wait for the user."""
    assert _closings(EndFrame(status)) == [
        {"type": "tool-output-error", "toolCallId": "streaming",
         "errorText": INPUT_NEVER_COMPLETED}, *FINISH]


def test_open_tool_ending_table() -> None:
    fail, stop, done = FailFrame("x", True), EndFrame("interrupted"), EndFrame("completed")
    for state in ("output-available", "output-error", "output-denied"):
        assert {open_tool_ending(f, state) for f in (fail, stop, done)} == {None}
    assert open_tool_ending(done, "input-available") is None
    assert open_tool_ending(EndFrame("paused"), "approval-requested") is None
    assert open_tool_ending(fail, "approval-requested") == "x"


# -- ids, resuming, the reader side --------------------------------------------------------------

def test_resuming_a_tool_reply_after_any_event_id_gives_exactly_the_rest() -> None:
    frames = [*frames_of(*TWO_STEPS), FailFrame("late", False)]

    def body(after: str | None = None) -> list[tuple[str, str]]:
        encoder = UIMessageStreamEncoder("m1", after=after)
        raw = encoder.encode_start() + b"".join(encoder.feed(f) for f in frames)
        decoder = SSEDecoder()
        return [(e.id, e.data) for e in decoder.feed(raw) + decoder.flush()]

    full = body()
    assert full[-1][1] == "[DONE]"
    for k, (event_id, _) in enumerate(full):
        assert body(event_id) == full[k + 1:], event_id


def test_the_reader_side_passes_tool_events_and_counts_undeclared_ones() -> None:
    decoder = ChatReplyDecoder()
    for frame in frames_of(*TWO_STEPS):
        assert isinstance(frame, ChunkFrame)
        event = decoder.event(frame)
        assert event is not None
        bound = Chat.event_named(event.event)
        assert bound is not None
        bound.decode(event.data)
    for sequence in (20, 21):
        invoice = ChunkFrame(sequence, msgspec.Raw(b'{"event":"invoice","data":{}}'))
        assert decoder.event(invoice) is None
    assert decoder.undeclared == {"invoice": 2}


def test_the_reader_side_passes_an_extended_contracts_events() -> None:
    decoder = ChatReplyDecoder(contract=MyChat)
    event = decoder.event(ChunkFrame(1, msgspec.Raw(b'{"event":"invoice",'
                                                    b'"data":{"id":"i","cents":1}}')))
    assert event is not None
    assert (event.event, json.loads(event.data)) == ("invoice", {"id": "i", "cents": 1})
    assert decoder.undeclared == {}


# -- any sequence (hypothesis): the client's rules hold -----------------------------------------

CALL_IDS = ("c1", "c2")
_TOOL_EVENT = st.sampled_from(list(TOOL_TRANSITIONS))


def _tool_message(event: str, call: str) -> Message[Chat, Any]:
    payloads: dict[str, Any] = {
        "tool_input_start": {"toolCallId": call, "toolName": "get_weather"},
        "tool_input_delta": {"toolCallId": call, "inputTextDelta": '{"a":'},
        "tool_input_available": {"toolCallId": call, "toolName": "get_weather", "input": CITY},
        "tool_approval_request": {"approvalId": f"a-{call}", "toolCallId": call},
        "tool_output_available": {"toolCallId": call, "output": WEATHER},
        "tool_output_error": {"toolCallId": call, "errorText": "failed"},
        "tool_output_denied": {"toolCallId": call},
    }
    bound = Chat.event_named(event)
    assert bound is not None
    return Message(bound, payloads[event])


EVENTS = st.one_of(
    st.builds(_tool_message, _TOOL_EVENT, st.sampled_from(CALL_IDS)),
    st.sampled_from([STEP_START, STEP_FINISH, text("x"), Chat.reasoning({"chunk": "r"}),
                     Chat.reasoning({"done": True}), Chat.clear({}),
                     Chat.sources([{"url": "u", "title": "t"}]),
                     Chat.progress({"done": True})]))
TERMINALS = st.sampled_from([EndFrame("completed"), EndFrame("interrupted"), EndFrame("paused"),
                             FailFrame("boom", False), TruncatedFrame(1)])
OPEN_STATES = {"input-streaming", "input-available", "approval-requested"}
#: The keys ai@6's uiMessageChunkSchema declares for the chunk types streamwire sends.
V6_KEYS: dict[str, set[str]] = {
    "start": {"messageId"}, "start-step": set(), "finish-step": set(), "finish": {"finishReason"},
    "abort": {"reason"}, "error": {"errorText"}, "message-metadata": {"messageMetadata"},
    "text-start": {"id"}, "text-delta": {"id", "delta"},
    "text-end": {"id"}, "reasoning-start": {"id"}, "reasoning-delta": {"id", "delta"},
    "reasoning-end": {"id"}, "source-url": {"sourceId", "url", "title"},
    "tool-input-start": {"toolCallId", "toolName", "title"},
    "tool-input-delta": {"toolCallId", "inputTextDelta"},
    "tool-input-available": {"toolCallId", "toolName", "input", "title"},
    "tool-approval-request": {"approvalId", "toolCallId"},
    "tool-output-available": {"toolCallId", "output"},
    "tool-output-error": {"toolCallId", "errorText"}, "tool-output-denied": {"toolCallId"},
}


def client_parts(chunks: list[dict[str, Any]]) -> dict[str, str]:
    """Run ``chunks`` through the AI SDK client's rules (``processUIMessageStream``, ai@6) and
    fail where the client would throw; returns each tool part's final state."""
    text_parts: set[str] = set()
    reasoning_parts: set[str] = set()
    partial: set[str] = set()
    tools: dict[str, str] = {}
    step_open = False
    after = {"tool-input-available": "input-available", "tool-output-available": "output-available",
             "tool-output-error": "output-error", "tool-output-denied": "output-denied",
             "tool-approval-request": "approval-requested"}
    for chunk in chunks:
        kind = chunk["type"]
        if not kind.startswith("data-"):
            assert set(chunk) - {"type"} <= V6_KEYS[kind], chunk
        if kind == "start-step":
            assert not step_open, "a step inside a step"
            step_open = True
        elif kind == "finish-step":
            assert step_open, "finish-step without a step"
            assert not text_parts, "a text part left streaming"
            assert not reasoning_parts, "a reasoning part left streaming"
            step_open = False
        elif kind in ("text-start", "reasoning-start"):
            (text_parts if kind == "text-start" else reasoning_parts).add(chunk["id"])
        elif kind in ("text-delta", "text-end"):
            assert chunk["id"] in text_parts, chunk
            if kind == "text-end":
                text_parts.remove(chunk["id"])
        elif kind in ("reasoning-delta", "reasoning-end"):
            assert chunk["id"] in reasoning_parts, chunk
            if kind == "reasoning-end":
                reasoning_parts.remove(chunk["id"])
        elif kind == "tool-input-start":
            partial.add(chunk["toolCallId"])
            tools[chunk["toolCallId"]] = "input-streaming"
        elif kind == "tool-input-delta":
            assert chunk["toolCallId"] in partial, "delta before its start"
        elif kind == "tool-input-available":
            tools[chunk["toolCallId"]] = "input-available"
        elif kind in after:
            assert chunk["toolCallId"] in tools, f"{kind} of no tool part"
            tools[chunk["toolCallId"]] = after[kind]
        if kind in ("text-delta", "reasoning-delta", "source-url", "tool-input-start"):
            assert step_open, f"{kind} outside a step"
    assert chunks[-1]["type"] == "finish"
    assert [c["type"] for c in chunks].count("finish") == 1
    return tools


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENTS, max_size=25), terminal=TERMINALS)
def test_any_sequence_maps_to_a_stream_the_client_accepts(events: list[Message[Chat, Any]],
                                                          terminal: TerminalFrame) -> None:
    got, skipped = ui_chunks([*frames_of(*events), terminal])
    # the model: exactly the events out of their call's order are skipped
    calls: dict[str, ToolCallState] = {}
    refused = 0
    for msg in events:
        if msg.name in TOOL_TRANSITIONS:
            try:
                advance_tool_call(calls, msg.name, msg.data)
            except UsageError:
                refused += 1
    assert skipped == refused
    tools = client_parts(got)
    assert tools == {call: state if open_tool_ending(terminal, state) is None else "output-error"
                     for call, state in calls.items()}
    assert sum(c["type"] in TOOL_CHUNKS.values() for c in got) == sum(
        msg.name in TOOL_TRANSITIONS for msg in events) - refused + sum(
        open_tool_ending(terminal, state) is not None for state in calls.values())
    failed = isinstance(terminal, FailFrame | TruncatedFrame)
    if failed or (isinstance(terminal, EndFrame) and terminal.status == "interrupted"):
        assert not OPEN_STATES & set(tools.values()), "every tool part closed"
    else:
        assert "input-streaming" not in tools.values()
    if failed:
        assert [c["type"] for c in got[-2:]] == ["error", "finish"]
