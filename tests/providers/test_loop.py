"""``streamwire.providers.run_tools``, the model's tool loop, with the official SDKs against the
replay server: round 1 asks for two ``get_weather`` calls (fragmented arguments), the tools run,
round 2 gets their results in the provider's own shape and answers; approvals pause the run and the
resume goes on without calling the model again for round 1; ``max_rounds`` ends the reply; an
unknown tool's error goes back to the model."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import anyio
import openai
import pytest

from helpers.provider_replay import ReplayServer
from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.chat import Chat
from streamwire.frames import ChunkFrame
from streamwire.log.memory import MemoryLog
from streamwire.providers import Tool, run_tools
from streamwire.providers import anthropic as sw_anthropic
from streamwire.providers import openai as sw_openai
from streamwire.runs import Completed, Paused, RunContext, RunRecord, Runs

pytestmark = pytest.mark.anyio

HISTORY = [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]}]


async def get_weather(args: Any) -> Any:
    return {"city": args["city"], "celsius": 18}


def answered(messages: list[dict[str, Any]]) -> bool:
    """Whether the reply so far holds tool results (then the model answers in text)."""
    return any(p.get("state", "").startswith("output-") for p in messages[-1]["parts"])


def openai_agent(replay: ReplayServer, tools: dict[str, Any], max_rounds: int = 8) -> Any:
    async def weather(run: RunContext[Chat]) -> Completed | Paused:
        async def model(messages: list[dict[str, Any]]) -> Completed:
            fixture = "chat_text" if answered(messages) else "chat_tools"
            client = openai.AsyncOpenAI(base_url=f"{replay.base}/{fixture}", api_key="sk-test",
                                        max_retries=0)
            return await sw_openai.relay(run, client.chat.completions.create(
                model="gpt-4.1-mini", messages=sw_openai.messages_from_ui(messages),  # type: ignore[arg-type]
                stream=True, stream_options={"include_usage": True}))

        return await run_tools(run, model, tools, max_rounds=max_rounds)

    return weather


def anthropic_agent(replay: ReplayServer, tools: dict[str, Any]) -> Any:
    async def weather(run: RunContext[Chat]) -> Completed | Paused:
        async def model(messages: list[dict[str, Any]]) -> Completed:
            fixture = "anthropic_thinking" if answered(messages) else "anthropic_tools"
            client = anthropic.AsyncAnthropic(base_url=f"{replay.base}/{fixture}",
                                              api_key="sk-test", max_retries=0)
            system, turns = sw_anthropic.messages_from_ui(messages)
            return await sw_anthropic.relay(run, client.messages.create(
                model="claude-sonnet-4-6", max_tokens=1024, messages=turns,  # type: ignore[arg-type]
                stream=True, **({"system": system} if system else {})))

        return await run_tools(run, model, tools)

    return weather


async def settled(runs: Runs, run_id: str) -> RunRecord:
    with anyio.fail_after(10):
        while (record := await runs.get(run_id)).status == "running":  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return record


async def events(log: MemoryLog, run_id: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    async for frame in log.read(run_id):
        if not isinstance(frame, ChunkFrame):
            break
        envelope = json.loads(bytes(frame.chunk))
        out.append((envelope["event"], envelope["data"]))
    return out


async def ui(log: MemoryLog, run_id: str) -> list[dict[str, Any]]:
    encoder = UIMessageStreamEncoder("m1")
    out: list[dict[str, Any]] = []
    async for frame in log.read(run_id):
        out += encoder.chunks(frame)
        if encoder.finished:
            break
    assert encoder.skipped == 0
    return out


async def test_two_tool_calls_then_the_answer_in_two_steps(replay: ReplayServer) -> None:
    log = MemoryLog()
    agent = openai_agent(replay, {"get_weather": get_weather})
    async with Runs(log, [agent]) as runs:
        await runs.start("weather", {"messages": HISTORY}, "loop1")
        record = await settled(runs, "loop1")
        assert record.status == "completed", record
        assert record.output["finishReason"] == "stop"
        assert record.output["rounds"] == 2
        assert record.output["text"] == "Hello, world!"
        # the usage of both rounds, summed
        assert record.usage is not None
        assert record.usage["inputTokens"] == 2 * 21
        names = [name for name, _ in await events(log, "loop1")]
    assert names.count("tool_output_available") == 2
    assert names.index("step_finish") > names.index("tool_output_available")
    # round 2 got both results, in Chat Completions' shape, after the assistant's tool_calls
    sent = replay.requests[-1].body["messages"]
    assert sent[0]["role"] == "user"
    assert [m["role"] for m in sent[1:]] == ["assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_paris", "call_tokyo"]
    assert json.loads(sent[2]["content"]) == {"city": "Paris", "celsius": 18}
    chunks = await ui(log, "loop1")
    assert [c["type"] for c in chunks].count("start-step") == 2


async def test_approvals_pause_and_the_resume_goes_on_without_a_second_round_one(
        replay: ReplayServer) -> None:
    log = MemoryLog()
    agent = openai_agent(replay, {"get_weather": Tool(get_weather, needs_approval=True)})
    async with Runs(log, [agent]) as runs:
        before = len(replay.requests)
        await runs.start("weather", {"messages": HISTORY}, "loop2")
        paused = await settled(runs, "loop2")
        assert paused.status == "paused"
        pending = paused.pending_tools or []
        assert [p["toolCallId"] for p in pending] == ["call_paris", "call_tokyo"]
        assert len(replay.requests) == before + 1
        # one answer only: the run pauses again, waiting for the other
        paris, tokyo = pending
        await runs.resume("loop2", {"toolAnswers": [{
            "toolCallId": "call_paris", "approvalId": paris["approvalId"], "approved": True}]},
            "a1")
        again = await settled(runs, "loop2")
        assert again.status == "paused"
        assert [p["toolCallId"] for p in again.pending_tools or []] == ["call_tokyo"]
        assert len(replay.requests) == before + 1, "no model call while a call waits"
        await runs.resume("loop2", {"toolAnswers": [{
            "toolCallId": "call_tokyo", "approvalId": tokyo["approvalId"], "approved": False}]},
            "a2")
        done = await settled(runs, "loop2")
        assert done.status == "completed", done
        assert len(replay.requests) == before + 2, "round 1 was not repeated"
        names = [name for name, _ in await events(log, "loop2")]
    assert names.count("tool_output_available") == 1
    assert names.count("tool_output_denied") == 1
    sent = replay.requests[-1].body["messages"]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert json.loads(results["call_paris"]) == {"city": "Paris", "celsius": 18}
    assert "denied" in results["call_tokyo"]


async def test_max_rounds_ends_the_reply_max_rounds(replay: ReplayServer) -> None:
    log = MemoryLog()
    agent = openai_agent(replay, {"get_weather": get_weather}, max_rounds=1)
    async with Runs(log, [agent]) as runs:
        await runs.start("weather", {"messages": HISTORY}, "loop3")
        record = await settled(runs, "loop3")
        assert record.status == "completed"
        assert record.output["reason"] == "max_rounds"
        chunks = await ui(log, "loop3")
    assert chunks[-1] == {"type": "finish", "finishReason": "other"}


async def test_an_unknown_tool_is_an_error_the_model_reads(replay: ReplayServer) -> None:
    log = MemoryLog()
    agent = openai_agent(replay, {})
    async with Runs(log, [agent]) as runs:
        await runs.start("weather", {"messages": HISTORY}, "loop4")
        record = await settled(runs, "loop4")
        assert record.status == "completed"
        errors = [d for name, d in await events(log, "loop4") if name == "tool_output_error"]
    assert [e["errorText"] for e in errors] == ["There is no tool named 'get_weather'."] * 2
    sent = replay.requests[-1].body["messages"]
    assert all("no tool named" in m["content"] for m in sent if m["role"] == "tool")


async def test_anthropic_tool_use_then_the_answer(replay: ReplayServer) -> None:
    log = MemoryLog()
    agent = anthropic_agent(replay, {"get_weather": get_weather})
    async with Runs(log, [agent]) as runs:
        await runs.start("weather", {"messages": HISTORY}, "loop5")
        record = await settled(runs, "loop5")
        assert record.status == "completed", record
        assert record.output["rounds"] == 2
    sent = replay.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    kinds = [b["type"] for b in sent[1]["content"]]
    assert kinds.count("tool_use") == 2
    assert [b["type"] for b in sent[2]["content"]] == ["tool_result", "tool_result"]
