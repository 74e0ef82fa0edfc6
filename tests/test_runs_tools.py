"""The tool helper (``streamwire.runs._tools``): ``tool_call`` emits a whole tool call as chat
events (start, the input's JSON text in fragments, input, output or error), ``ToolCall`` refuses
an event out of order before emitting it, the step helpers; and through a real ``RunContext`` on a
memory log, the stream it writes is the UI message stream of a two-step tool reply."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.chat import Chat
from streamwire.contract import Message
from streamwire.errors import UsageError
from streamwire.log.memory import MemoryLog
from streamwire.runs import AgentError, RunContext
from streamwire.runs._tools import (
    ChatEmitter,
    ToolCall,
    ToolCallError,
    input_fragments,
    step_boundary,
    step_finish,
    step_start,
    tool_call,
)

pytestmark = pytest.mark.anyio


class Recorder:
    """A run that records what it is asked to emit."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def emit(self, msg: Message[Chat, Any]) -> int:
        self.sent.append((msg.name, msg.data))
        return len(self.sent)


async def get_weather(args: Any) -> Any:
    return {"city": args["city"], "celsius": 18}


async def test_tool_call_emits_the_whole_call_and_returns_the_output() -> None:
    run = Recorder()
    result = await tool_call(run, "get_weather", {"city": "Paris"}, execute=get_weather,
                             call_id="c1")
    assert result == {"city": "Paris", "celsius": 18}
    assert run.sent == [
        ("tool_input_start", {"toolCallId": "c1", "toolName": "get_weather"}),
        ("tool_input_delta", {"toolCallId": "c1", "inputTextDelta": '{"city'}),
        ("tool_input_delta", {"toolCallId": "c1", "inputTextDelta": '":"Pa'}),
        ("tool_input_delta", {"toolCallId": "c1", "inputTextDelta": 'ris"}'}),
        ("tool_input_available", {"toolCallId": "c1", "toolName": "get_weather",
                                  "input": {"city": "Paris"}}),
        ("tool_output_available", {"toolCallId": "c1",
                                   "output": {"city": "Paris", "celsius": 18}}),
    ]


async def test_one_fragment_a_title_and_a_fresh_call_id() -> None:
    run = Recorder()
    await tool_call(run, "now", None, execute=lambda _: _answer("noon"), fragments=1,
                    title="The time")
    names = [name for name, _ in run.sent]
    assert names == ["tool_input_start", "tool_input_delta", "tool_input_available",
                     "tool_output_available"]
    start, piece, available, _ = (data for _, data in run.sent)
    assert start["title"] == available["title"] == "The time"
    assert piece["inputTextDelta"] == "null"
    assert start["toolCallId"].startswith("call_")
    assert len({data["toolCallId"] for _, data in run.sent}) == 1
    other = Recorder()
    await tool_call(other, "now", None, execute=lambda _: _answer("noon"))
    assert other.sent[0][1]["toolCallId"] != start["toolCallId"]


async def _answer(value: Any) -> Any:
    return value


async def test_a_failing_tool_ends_with_output_error_and_raises_tool_call_error() -> None:
    async def broken(_: Any) -> Any:
        raise ConnectionError("the weather service is down")

    run = Recorder()
    with pytest.raises(ToolCallError) as caught:
        await tool_call(run, "get_weather", {"city": "Paris"}, execute=broken, call_id="c1")
    assert run.sent[-1] == ("tool_output_error", {"toolCallId": "c1",
                                                  "errorText": "the weather service is down"})
    error = caught.value
    assert isinstance(error, AgentError), "uncaught, it fails the run with its text"
    assert isinstance(error.__cause__, ConnectionError)
    assert (error.error_text, error.tool_name, error.call_id) == (
        "the weather service is down", "get_weather", "c1")
    assert (error.code, error.detail) == ("TOOL_ERROR", {"toolName": "get_weather",
                                                         "toolCallId": "c1"})


async def test_an_exception_without_text_is_named_by_its_class() -> None:
    async def broken(_: Any) -> Any:
        raise KeyError

    run = Recorder()
    with pytest.raises(ToolCallError, match="KeyError"):
        await tool_call(run, "t", 1, execute=broken)
    assert run.sent[-1][1]["errorText"] == "KeyError"


async def test_an_output_that_is_not_json_is_a_tool_error() -> None:
    run = Recorder()
    with pytest.raises(ToolCallError) as caught:
        await tool_call(run, "t", 1, execute=lambda _: _answer(object()))
    assert run.sent[-1][0] == "tool_output_error"
    assert isinstance(caught.value.__cause__, TypeError)


async def test_an_input_that_is_not_json_emits_nothing() -> None:
    run = Recorder()
    with pytest.raises(UsageError, match="the input of tool 't' is not JSON"):
        await tool_call(run, "t", {"x": object()}, execute=_answer)
    with pytest.raises(UsageError, match="fragments must be at least 1"):
        await tool_call(run, "t", 1, execute=_answer, fragments=0)
    assert run.sent == []


async def test_a_stop_while_the_tool_runs_propagates_without_an_output() -> None:
    run = Recorder()
    started = anyio.Event()

    async def slow(_: Any) -> Any:
        started.set()
        await anyio.sleep(60)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: tool_call(run, "slow", {}, execute=slow, call_id="c1"))
        await started.wait()
        tg.cancel_scope.cancel()
    assert run.sent[-1][0] == "tool_input_available", "the reply's end closes the part"


async def test_tool_call_refuses_events_out_of_order_before_emitting_them() -> None:
    run = Recorder()
    call = await ToolCall.start(run, "delete_file", call_id="c1")
    assert call.state == "input-streaming"
    await call.input_delta('{"path":"notes.txt"}')
    with pytest.raises(UsageError, match="tool_output_available for tool call 'c1'"):
        await call.output("done")
    await call.input_available({"path": "notes.txt"})
    with pytest.raises(UsageError, match="tool_input_delta"):
        await call.input_delta("x")
    with pytest.raises(UsageError, match="tool_output_denied"):
        await call.deny()
    assert await call.request_approval("a1") == "a1"
    assert call.state == "approval-requested"
    await call.deny()
    assert call.state == "output-denied"
    with pytest.raises(UsageError):
        await call.error("late")
    assert [name for name, _ in run.sent] == [
        "tool_input_start", "tool_input_delta", "tool_input_available", "tool_approval_request",
        "tool_output_denied"]
    assert run.sent[3][1] == {"approvalId": "a1", "toolCallId": "c1"}
    assert repr(call) == "ToolCall('delete_file', call_id='c1', state='output-denied')"


async def test_an_approved_call_gets_its_output_and_an_approval_id_by_default() -> None:
    run = Recorder()
    call = await ToolCall.start(run, "delete_file", title="Delete a file")
    await call.input_available({"path": "notes.txt"})
    approval = await call.request_approval()
    assert approval.startswith("approval_")
    await call.output({"deleted": True})
    assert call.state == "output-available"
    assert run.sent[0][1]["title"] == "Delete a file"


async def test_the_step_helpers() -> None:
    run = Recorder()
    await step_start(run)
    await step_finish(run)
    assert run.sent == [("step_start", {}), ("step_finish", {})]
    assert [(m.name, m.data) for m in step_boundary()] == [("step_finish", {}), ("step_start", {})]


@given(st.text(), st.integers(min_value=1, max_value=8))
def test_input_fragments_rebuild_the_text(text: str, count: int) -> None:
    pieces = input_fragments(text, count)
    assert "".join(pieces) == text
    assert len(pieces) == max(1, min(count, len(text)))
    assert max(map(len, pieces)) - min(map(len, pieces)) <= 1


def test_input_fragments_needs_one() -> None:
    with pytest.raises(ValueError, match="count must be at least 1"):
        input_fragments("x", 0)


async def test_through_a_run_context_the_stream_is_a_two_step_tool_reply() -> None:
    """A real ``RunContext[Chat]`` is a ``ChatEmitter``; what the helpers write into its stream
    reads back as the UI message stream of a two-step tool reply."""
    log = MemoryLog()
    await log.create_stream("r1")
    run: RunContext[Chat] = RunContext(log, run_id="r1", agent="a", stream_id="r1", input={})
    emitter: ChatEmitter = run
    await step_start(emitter)
    await tool_call(emitter, "get_weather", {"city": "Paris"}, execute=get_weather,
                    call_id="c1")
    await step_finish(emitter)
    await step_start(emitter)
    await run.emit(Chat.chunk({"chunk": "It is 18 °C in Paris."}))
    await step_finish(emitter)
    await log.end_stream("r1", "completed")
    encoder = UIMessageStreamEncoder("m1")
    chunks: list[Any] = []
    async for frame in log.read("r1"):
        chunks += encoder.chunks(frame)
    assert [c["type"] for c in chunks] == [
        "start", "start-step", "tool-input-start", "tool-input-delta", "tool-input-delta",
        "tool-input-delta", "tool-input-available", "tool-output-available", "finish-step",
        "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]
    assert encoder.skipped == 0
    await log.aclose()
