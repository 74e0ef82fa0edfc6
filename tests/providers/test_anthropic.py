"""``streamwire.providers.anthropic.relay`` with the official ``anthropic`` SDK pointed at the
replay server, both over the raw events (``messages.create(stream=True)``) and the SDK's
``MessageStream`` (``messages.stream(...)``): thinking, text, parallel ``tool_use`` blocks with
``input_json_delta`` fragments, usage and stop reasons; an ``error`` event fails the run in the
user's words after closing the open tool part; a stop closes the provider's connection."""

from __future__ import annotations

from typing import Any, Literal

import anthropic
import pytest

from helpers.provider_replay import ReplayServer
from providers.relayed import Relayed, assert_failed_in_users_words, run_relay, ui_types
from streamwire.chat import Chat
from streamwire.providers.anthropic import STOP_REASONS, relay
from streamwire.runs import Completed, RunContext

pytestmark = pytest.mark.anyio

Mode = Literal["raw", "helper"]
MODES: list[Mode] = ["raw", "helper"]
PROMPT = [{"role": "user", "content": "hi"}]


async def messages(replay: ReplayServer, fixture: str, mode: Mode, **run: Any) -> Relayed:
    client = anthropic.AsyncAnthropic(base_url=f"{replay.base}/{fixture}", api_key="sk-test",
                                      max_retries=0)

    async def call(ctx: RunContext[Chat]) -> Completed:
        if mode == "raw":
            stream = await client.messages.create(model="claude-sonnet-4-6", max_tokens=256,
                                                  messages=PROMPT, stream=True)  # type: ignore[arg-type]
            return await relay(ctx, stream)
        async with client.messages.stream(model="claude-sonnet-4-6", max_tokens=256,
                                          messages=PROMPT) as helper:  # type: ignore[arg-type]
            return await relay(ctx, helper)

    return await run_relay(call, **run)


@pytest.mark.parametrize("mode", MODES)
async def test_thinking_then_text_and_usage(replay: ReplayServer, mode: Mode) -> None:
    relayed = await messages(replay, "anthropic_thinking", mode)
    # input: 25 uncached + 10 read from the cache; the output count of message_delta
    usage = {"inputTokens": 35, "outputTokens": 48, "totalTokens": 83,
             "cacheReadInputTokens": 10}
    assert relayed.events == [
        ("reasoning", {"chunk": "The user greets me. "}), ("reasoning", {"chunk": "Greet back."}),
        ("reasoning", {"done": True}), ("chunk", {"chunk": "Hello"}), ("chunk", {"chunk": ", "}),
        ("chunk", {"chunk": "world"}), ("chunk", {"chunk": "!"}), ("usage", usage)]
    assert ui_types(relayed.ui)[:6] == ["start", "start-step", "reasoning-start",
                                        "reasoning-delta", "reasoning-delta", "reasoning-end"]
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "stop"}
    assert relayed.status["usage"] == usage
    assert relayed.status["output"]["rawFinishReason"] == "end_turn"
    assert relayed.status["output"]["finishReason"] == "stop"
    assert replay.requests[-1].path == "/anthropic_thinking/v1/messages"
    assert replay.requests[-1].body["stream"] is True


@pytest.mark.parametrize("mode", MODES)
async def test_parallel_tool_use_blocks(replay: ReplayServer, mode: Mode) -> None:
    relayed = await messages(replay, "anthropic_tools", mode)
    assert relayed.text() == "Let me check both cities."
    assert relayed.names()[2:] == ["tool_input_start", *["tool_input_delta"] * 3,
                                   "tool_input_available", "tool_input_start",
                                   *["tool_input_delta"] * 3, "tool_input_available", "usage"]
    assert relayed.of("tool_input_available") == [
        {"toolCallId": "toolu_paris", "toolName": "get_weather", "input": {"city": "Paris"}},
        {"toolCallId": "toolu_tokyo", "toolName": "get_weather", "input": {"city": "Tokyo"}}]
    output = relayed.status["output"]
    assert (output["finishReason"], output["rawFinishReason"]) == ("tool-calls", "tool_use")
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "tool-calls"}
    assert [c["toolCallId"] for c in output["toolCalls"]] == ["toolu_paris", "toolu_tokyo"]
    assert ui_types(relayed.ui).count("tool-input-delta") == 6


@pytest.mark.parametrize("mode", MODES)
async def test_max_tokens_is_a_length_stop(replay: ReplayServer, mode: Mode) -> None:
    relayed = await messages(replay, "anthropic_length", mode)
    assert relayed.text() == "Once upon a time"
    assert relayed.status["output"]["finishReason"] == "length"
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "length"}


@pytest.mark.parametrize("mode", MODES)
async def test_an_error_event_mid_stream(replay: ReplayServer, mode: Mode) -> None:
    relayed = await messages(replay, "anthropic_error", mode)
    assert relayed.names() == ["chunk", "tool_input_start", "tool_input_delta",
                               "tool_output_error"]
    assert_failed_in_users_words(
        relayed, provider="anthropic", kind="overloaded_error",
        words="The model is busy right now. Please send your message again in a moment.")
    assert relayed.status["recoverable"] is True


@pytest.mark.parametrize("mode", MODES)
async def test_a_stop_closes_the_provider_connection(replay: ReplayServer, mode: Mode) -> None:
    before = replay.cut.count("anthropic_long")
    relayed = await messages(replay, "slow/anthropic_long", mode, stop_after=0.4)
    assert relayed.status["status"] == "interrupted"
    assert 0 < len(relayed.of("chunk")) < 60
    assert replay.cut.count("anthropic_long") == before + 1


def test_stop_reasons_cover_the_sdk() -> None:
    from typing import get_args

    from anthropic.types import StopReason

    assert set(STOP_REASONS) == set(get_args(StopReason))


async def test_the_stream_manager_and_a_refused_request(replay: ReplayServer) -> None:
    def stream_of(fixture: str) -> Any:
        client = anthropic.AsyncAnthropic(base_url=f"{replay.base}/{fixture}", api_key="k",
                                          max_retries=0)
        return client.messages.stream(model="claude-sonnet-4-6", max_tokens=64,
                                      messages=PROMPT)  # type: ignore[arg-type]

    async def manager(ctx: RunContext[Chat]) -> Completed:
        return await relay(ctx, stream_of("anthropic_length"))  # relay enters it

    assert (await run_relay(manager)).text() == "Once upon a time"

    async def refused(ctx: RunContext[Chat]) -> Completed:
        return await relay(ctx, stream_of("anthropic_refused"))

    relayed = await run_relay(refused)
    assert relayed.status["errorDetail"] == {"code": "PROVIDER_ERROR", "provider": "anthropic",
                                             "kind": "overloaded_error"}
    assert relayed.ui[-2] == {"type": "error", "errorText": (
        "The model is busy right now. Please send your message again in a moment.")}
