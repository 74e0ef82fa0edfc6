"""The run side of tool calls and steps, over a real ``RunContext`` on a memory log: for a ``Chat``
run, ``next_step()`` puts the step boundary on the wire with the next emit (``step_finish`` at
the old step, ``step_start`` at the new one, one batch) and adds no empty trailing step; a raw
tool event out of its call's order is refused at the emit with nothing appended; the demo
agent's ``/tool`` reply reads, through the AI SDK mapping, as the parts ``step-start``,
``tool-get_weather`` (``output-available``), ``step-start``, text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from helpers.chat_samples import MyChat
from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.chat import Chat
from streamwire.contract import Contract
from streamwire.errors import UsageError
from streamwire.log.memory import MemoryLog
from streamwire.runs import Completed, RunContext
from streamwire.runs._context import agent_contract
from streamwire.runs.demo_agent import TOOL_ANSWER, demo

pytestmark = pytest.mark.anyio


class RecordingLog:
    """A ``MemoryLog`` that records each append call as its ``(step, event name)`` pairs."""

    def __init__(self) -> None:
        self.log = MemoryLog()
        self.calls: list[list[tuple[int, str]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)

    async def append(self, stream_id: str, step: int, chunk: bytes) -> int:
        self.calls.append([(step, json.loads(chunk)["event"])])
        return await self.log.append(stream_id, step, chunk)

    async def append_many(self, stream_id: str, chunks: Sequence[tuple[int, bytes]]) -> list[int]:
        self.calls.append([(step, json.loads(chunk)["event"]) for step, chunk in chunks])
        return await self.log.append_many(stream_id, chunks)


async def context(contract: type[Contract] | None = Chat) -> tuple[RecordingLog, RunContext[Any]]:
    log = RecordingLog()
    await log.log.create_stream("r1")
    return log, RunContext(log, run_id="r1", agent="a", stream_id="r1", input={},  # type: ignore[arg-type]
                           contract=contract)


async def ui_chunks(log: RecordingLog) -> list[dict[str, Any]]:
    await log.log.end_stream("r1", "completed")
    encoder = UIMessageStreamEncoder("m1")
    out: list[dict[str, Any]] = []
    async for frame in log.log.read("r1"):
        out += encoder.chunks(frame)
    assert encoder.skipped == 0
    await log.log.aclose()
    return out


def text(chunk: str) -> Any:
    return Chat.chunk({"chunk": chunk})


async def test_next_step_sends_the_boundary_with_the_next_emit() -> None:
    log, run = await context()
    await run.emit(text("a"))
    assert run.next_step() == 1
    assert log.calls == [[(0, "chunk")]]  # next_step() itself writes nothing
    seq = await run.emit(text("b"))
    assert log.calls[-1] == [(0, "step_finish"), (1, "step_start"), (1, "chunk")]  # one batch
    assert seq == 4  # the message's own sequence
    await run.emit(text("c"))  # the boundary is sent once
    assert log.calls[-1] == [(1, "chunk")]
    run.next_step()
    run.next_step()  # two in a row: one boundary, from the step last written to the new one
    assert await run.emit_many([text("d"), text("e")]) == [8, 9]
    assert log.calls[-1] == [(1, "step_finish"), (3, "step_start"), (3, "chunk"), (3, "chunk")]
    run.next_step()  # the agent ends right after: no empty step
    assert len(log.calls) == 4
    assert [c["type"] for c in await ui_chunks(log)] == [
        "start", "start-step", "text-start", "text-delta", "text-end", "finish-step",
        "start-step", "text-start", "text-delta", "text-delta", "text-end", "finish-step",
        "start-step", "text-start", "text-delta", "text-delta", "text-end", "finish-step",
        "finish"]


async def test_a_refused_emit_keeps_the_boundary_pending() -> None:
    log, run = await context()
    await run.emit(text("a"))
    run.next_step()
    with pytest.raises(UsageError):
        await run.emit(Chat.tool_input_delta({"toolCallId": "c1", "inputTextDelta": "{"}))
    await run.emit(text("b"))
    assert log.calls == [[(0, "chunk")], [(0, "step_finish"), (1, "step_start"), (1, "chunk")]]


async def test_a_contract_extending_chat_gets_the_boundary_too() -> None:
    log, run = await context(MyChat)
    run.next_step()
    await run.emit(text("a"))
    assert log.calls == [[(0, "step_finish"), (1, "step_start"), (1, "chunk")]]


async def test_a_run_without_the_chat_contract_sends_no_boundary() -> None:
    log, run = await context(None)  # untyped: RunContext[Any]
    assert run.next_step() == 1
    await run.emit(text("a"))
    assert log.calls == [[(1, "chunk")]]


async def test_a_raw_tool_event_out_of_order_is_refused_at_the_emit() -> None:
    log, run = await context()
    start = Chat.tool_input_start({"toolCallId": "c1", "toolName": "get_weather"})
    available = Chat.tool_input_available({"toolCallId": "c1", "toolName": "get_weather",
                                           "input": {"city": "Paris"}})
    output = Chat.tool_output_available({"toolCallId": "c1", "output": {"celsius": 18}})
    with pytest.raises(UsageError, match="before its tool_input_start"):
        await run.emit(Chat.tool_input_delta({"toolCallId": "c1", "inputTextDelta": "{"}))
    with pytest.raises(UsageError, match="tool_output_available"):
        await run.emit_many([start, output])  # an output before the input: the whole batch
    assert log.calls == []
    await run.emit_many([start, available])  # the refused batch left the call unstarted
    await run.emit(output)
    with pytest.raises(UsageError, match="already 'output-available'"):
        await run.emit(output)  # a second output
    assert log.calls == [[(0, "tool_input_start"), (0, "tool_input_available")],
                         [(0, "tool_output_available")]]


async def test_run_tool_call_emits_the_call_in_order() -> None:
    log, run = await context()

    async def execute(args: Any) -> Any:
        return {"echo": args}

    assert await run.tool_call("echo", [1], execute=execute, call_id="c9", title="Echo") == {
        "echo": [1]}
    assert [name for call in log.calls for _, name in call] == [
        "tool_input_start", "tool_input_delta", "tool_input_delta", "tool_input_delta",
        "tool_input_available", "tool_output_available"]


def ui_parts(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The assistant message's parts as the AI SDK client builds them from ``chunks``
    (``processUIMessageStream``, ai@6; text, tool, step and data parts)."""
    parts: list[dict[str, Any]] = []
    texts: dict[str, dict[str, Any]] = {}
    tools: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        kind = chunk["type"]
        if kind == "start-step":
            parts.append({"type": "step-start"})
        elif kind == "text-start":
            texts[chunk["id"]] = {"type": "text", "text": ""}
            parts.append(texts[chunk["id"]])
        elif kind == "text-delta":
            texts[chunk["id"]]["text"] += chunk["delta"]
        elif kind == "tool-input-start":
            tools[chunk["toolCallId"]] = {"type": f"tool-{chunk['toolName']}",
                                          "state": "input-streaming"}
            parts.append(tools[chunk["toolCallId"]])
        elif kind == "tool-input-available":
            tools[chunk["toolCallId"]].update(state="input-available", input=chunk["input"])
        elif kind == "tool-output-available":
            tools[chunk["toolCallId"]].update(state="output-available", output=chunk["output"])
        elif kind.startswith("data-"):
            parts.append({"type": kind})
    return parts


async def test_the_demo_tool_reply_is_two_steps_a_tool_part_then_text() -> None:
    log = RecordingLog()
    await log.log.create_stream("r1")
    run: RunContext[Chat] = RunContext(log, run_id="r1", agent="demo",  # type: ignore[arg-type]
                                       stream_id="r1", input={"prompt": "/tool", "pace": 0},
                                       contract=agent_contract(demo))
    outcome = await demo(run)
    assert outcome == Completed(output={"text": TOOL_ANSWER}, usage=outcome.usage)
    steps = [(step, name) for call in log.calls for step, name in call]
    at = steps.index((0, "step_finish"))
    assert steps[at + 1] == (1, "step_start")
    assert [name for _, name in steps[:at]] == [
        "message_start", "tool_input_start", "tool_input_delta", "tool_input_delta",
        "tool_input_delta", "tool_input_available", "tool_output_available"]
    assert {step for step, _ in steps[:at]} == {0}
    assert steps[at + 2:] == [(1, "chunk")] * 6 + [(1, "usage"), (1, "done")]
    parts = ui_parts(await ui_chunks(log))
    assert [p for p in parts if not p["type"].startswith("data-")] == [
        {"type": "step-start"},
        {"type": "tool-get_weather", "state": "output-available", "input": {"city": "Paris"},
         "output": {"city": "Paris", "temperature": 18, "unit": "C"}},
        {"type": "step-start"},
        {"type": "text", "text": "It is 18 °C in Paris."}]
    assert [p["type"] for p in parts if p["type"].startswith("data-")] == ["data-usage"]
