"""Static checks of the tool-call and step events and of the tool helper (mypy --strict and
pyright strict; see ``pyproject.toml`` here), never run. Each negative line carries the exact code
of both checkers, so an error that disappears fails the run.
"""

from __future__ import annotations

from typing import Any, TypedDict, assert_type, final

from streamwire.aisdk import ToolInputStartChunk, UIMessageChunk
from streamwire.chat import (
    Chat,
    StepPayload,
    ToolApprovalRequest,
    ToolCallState,
    ToolInputAvailable,
    ToolInputDelta,
    ToolInputStart,
    ToolOutputAvailable,
    ToolOutputDenied,
    ToolOutputError,
    advance_tool_call,
)
from streamwire.contract import BoundEvent, Contract, Event, Message, is_event
from streamwire.runs import RunContext
from streamwire.runs._tools import (
    ChatEmitter,
    ToolCall,
    ToolCallError,
    step_boundary,
    step_finish,
    step_start,
    tool_call,
)


@final
class Invoice(TypedDict):
    id: str
    cents: int


class Billing(Contract):
    invoice: Event[Invoice] = Event()


class MyChat(Chat):
    invoice: Event[Invoice] = Event()


# --- positive ---------------------------------------------------------------------------------


def descriptors() -> None:
    assert_type(Chat.tool_input_start, BoundEvent[Chat, ToolInputStart])
    assert_type(Chat.tool_input_delta, BoundEvent[Chat, ToolInputDelta])
    assert_type(Chat.tool_input_available, BoundEvent[Chat, ToolInputAvailable])
    assert_type(Chat.tool_approval_request, BoundEvent[Chat, ToolApprovalRequest])
    assert_type(Chat.tool_output_available, BoundEvent[Chat, ToolOutputAvailable])
    assert_type(Chat.tool_output_error, BoundEvent[Chat, ToolOutputError])
    assert_type(Chat.tool_output_denied, BoundEvent[Chat, ToolOutputDenied])
    assert_type(Chat.step_start, BoundEvent[Chat, StepPayload])
    assert_type(Chat.step_finish, BoundEvent[Chat, StepPayload])
    assert_type(MyChat.tool_input_start, BoundEvent[MyChat, ToolInputStart])


def messages() -> None:
    """Every tool and step event accepts its payload as a dict literal."""
    assert_type(Chat.tool_input_start({"toolCallId": "c1", "toolName": "get_weather"}),
                Message[Chat, ToolInputStart])
    Chat.tool_input_start({"toolCallId": "c1", "toolName": "w", "title": "Weather"})
    Chat.tool_input_delta({"toolCallId": "c1", "inputTextDelta": '{"city":'})
    Chat.tool_input_available({"toolCallId": "c1", "toolName": "w", "input": {"city": "Paris"}})
    Chat.tool_input_available({"toolCallId": "c1", "toolName": "w", "input": None})
    Chat.tool_approval_request({"approvalId": "a1", "toolCallId": "c1"})
    Chat.tool_output_available({"toolCallId": "c1", "output": [18, "clear"]})
    Chat.tool_output_error({"toolCallId": "c1", "errorText": "down"})
    Chat.tool_output_denied({"toolCallId": "c1"})
    Chat.step_start({})
    Chat.step_finish({})


def decoding(raw: bytes) -> None:
    assert_type(Chat.tool_input_delta.decode(raw)["inputTextDelta"], str)
    assert_type(Chat.tool_output_available.decode(raw)["output"], Any)
    assert_type(Chat.tool_input_start.decode(raw), ToolInputStart)


def narrowing(m: Message[Chat, Any]) -> None:
    if is_event(m, Chat.tool_output_error):
        assert_type(m.data["errorText"], str)


def states(calls: dict[str, ToolCallState]) -> None:
    assert_type(advance_tool_call(calls, "tool_input_start",
                                  {"toolCallId": "c", "toolName": "w"}), ToolCallState)


def ui_chunks() -> None:
    chunk: UIMessageChunk = {"type": "tool-input-start", "toolCallId": "c1", "toolName": "w"}
    start: ToolInputStartChunk = {"type": "tool-input-start", "toolCallId": "c1", "toolName": "w"}
    del chunk, start


async def helpers(run: RunContext[Chat], mine: RunContext[MyChat]) -> None:
    """A run context of ``Chat``, or of a contract extending it, is a ``ChatEmitter``."""
    emitter: ChatEmitter = run
    extended: ChatEmitter = mine
    del extended

    async def execute(args: Any) -> Any:
        return {"celsius": 18}

    assert_type(await tool_call(emitter, "get_weather", {"city": "Paris"}, execute=execute), Any)
    call = await ToolCall.start(run, "delete_file", call_id="c1", title="Delete")
    assert_type(call, ToolCall)
    assert_type(await call.request_approval(), str)
    assert_type(call.state, ToolCallState | None)
    await step_start(run)
    await step_finish(mine)
    assert_type(step_boundary(), list[Message[Chat, Any]])
    try:
        await tool_call(run, "t", 1, execute=execute)
    except ToolCallError as exc:
        assert_type(exc.error_text, str)
    # the same helper as a method of the run
    assert_type(await run.tool_call("get_weather", {"city": "Paris"}, execute=execute), Any)
    assert_type(await mine.tool_call("t", 1, execute=execute, call_id="c2", title="T"), Any)
    assert_type(run.next_step(), int)


# --- negative: each line must keep its error in both checkers ---------------------------------


def wrong_payloads() -> None:
    # missing toolName
    Chat.tool_input_start({"toolCallId": "c1"})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # snake_case keys are not the wire's
    Chat.tool_input_start({"tool_call_id": "c1", "tool_name": "w"})  # type: ignore[typeddict-unknown-key, typeddict-item]  # pyright: ignore[reportArgumentType]
    # a delta is JSON text, not a value
    Chat.tool_input_delta({"toolCallId": "c1", "inputTextDelta": {"city": "P"}})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # the input is required (None is a value)
    Chat.tool_input_available({"toolCallId": "c1", "toolName": "w"})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # an approval names its approval id
    Chat.tool_approval_request({"toolCallId": "c1"})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    Chat.tool_output_error({"toolCallId": "c1", "errorText": None})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    Chat.tool_output_denied({"toolCallId": 1})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # a step boundary carries nothing
    Chat.step_start({"step": 1})  # type: ignore[typeddict-unknown-key]  # pyright: ignore[reportArgumentType]
    # a UI chunk of the wrong shape
    chunk: ToolInputStartChunk = {"type": "tool-input-start", "toolCallId": "c1"}  # type: ignore[typeddict-item]  # pyright: ignore[reportAssignmentType]
    del chunk


def wrong_states() -> None:
    state: ToolCallState = "approval-responded"  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
    del state


def wrong_emitters(run: RunContext[Billing]) -> None:
    # a run of a contract without the chat events cannot take them
    emitter: ChatEmitter = run  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
    del emitter


async def wrong_tool_call_run(run: RunContext[Billing]) -> None:
    async def execute(args: Any) -> Any:
        return args

    # run.tool_call is offered only to runs whose contract has the chat events
    await run.tool_call("t", 1, execute=execute)  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
