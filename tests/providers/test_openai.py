"""``streamwire.providers.openai.relay`` with the official ``openai`` SDK pointed at the replay
server: Chat Completions chunks and Responses events become the run's chat events, the AI SDK
stream ``useChat`` reads, and ``/status`` with the usage and the finish reason; an error mid-way
fails the run in the user's words after closing the open tool part; a stop closes the
provider's connection mid-stream."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from helpers.provider_replay import ReplayServer
from providers.relayed import Relayed, assert_failed_in_users_words, run_relay, ui_types
from streamwire.chat import Chat
from streamwire.providers import Turn
from streamwire.providers.openai import relay
from streamwire.runs import Completed, RunContext

pytestmark = pytest.mark.anyio

PROMPT = [{"role": "user", "content": "hi"}]
CHAT_USAGE = {"inputTokens": 21, "outputTokens": 9, "totalTokens": 30, "cacheReadInputTokens": 4}


def client(replay: ReplayServer, fixture: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{replay.base}/{fixture}", api_key="sk-test",
                              max_retries=0)


async def chat(replay: ReplayServer, fixture: str, **run: Any) -> Relayed:
    async def call(ctx: RunContext[Chat]) -> Completed:
        stream = await client(replay, fixture).chat.completions.create(
            model="gpt-4.1-mini", messages=PROMPT,  # type: ignore[arg-type]
            stream=True, stream_options={"include_usage": True})
        return await relay(ctx, stream)

    return await run_relay(call, **run)


async def responses(replay: ReplayServer, fixture: str) -> Relayed:
    async def call(ctx: RunContext[Chat]) -> Completed:
        stream = await client(replay, fixture).responses.create(model="o4-mini", input="hi",
                                                                stream=True)
        return await relay(ctx, stream)

    return await run_relay(call)


async def test_chat_completions_text_and_usage(replay: ReplayServer) -> None:
    relayed = await chat(replay, "chat_text")
    assert relayed.events == [("chunk", {"chunk": "Hello"}), ("chunk", {"chunk": ", "}),
                              ("chunk", {"chunk": "world"}), ("chunk", {"chunk": "!"}),
                              ("usage", CHAT_USAGE)]
    assert ui_types(relayed.ui) == ["start", "start-step", "text-start", "text-delta",
                                    "text-delta", "text-delta", "text-delta", "data-usage",
                                    "text-end", "finish-step", "finish"]
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "stop"}
    status = relayed.status
    assert (status["status"], status["usage"]) == ("completed", CHAT_USAGE)
    assert status["output"] == {"text": "Hello, world!", "reasoning": "", "toolCalls": [],
                                "finishReason": "stop", "rawFinishReason": "stop",
                                "reason": "complete", "usage": CHAT_USAGE}
    sent = replay.requests[-1]
    assert sent.path == "/chat_text/chat/completions"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}


async def test_chat_completions_parallel_tool_calls_with_fragmented_arguments(
        replay: ReplayServer) -> None:
    relayed = await chat(replay, "chat_tools")
    # both calls start as the model opens them; each call's input arrives in its fragments
    assert relayed.names() == ["tool_input_start", "tool_input_delta", "tool_input_start",
                               "tool_input_delta", "tool_input_delta", "tool_input_delta",
                               "tool_input_available", "tool_input_available", "usage"]
    for call_id, city in (("call_paris", "Paris"), ("call_tokyo", "Tokyo")):
        pieces = [d["inputTextDelta"] for d in relayed.of("tool_input_delta")
                  if d["toolCallId"] == call_id]
        assert len(pieces) > 1
        assert "".join(pieces).replace(" ", "") == f'{{"city":"{city}"}}'
    assert relayed.of("tool_input_available") == [
        {"toolCallId": "call_paris", "toolName": "get_weather", "input": {"city": "Paris"}},
        {"toolCallId": "call_tokyo", "toolName": "get_weather", "input": {"city": "Tokyo"}}]
    assert ui_types(relayed.ui).count("tool-input-available") == 2
    output = relayed.status["output"]
    assert output["finishReason"] == "tool-calls"
    assert output["rawFinishReason"] == "tool_calls"
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "tool-calls"}  # useChat sees it
    assert output["toolCalls"] == [
        {"toolCallId": "call_paris", "toolName": "get_weather", "input": {"city": "Paris"}},
        {"toolCallId": "call_tokyo", "toolName": "get_weather", "input": {"city": "Tokyo"}}]


async def test_chat_completions_length_stop(replay: ReplayServer) -> None:
    relayed = await chat(replay, "chat_length")
    assert relayed.text() == "Once upon a time"
    assert relayed.status["output"]["finishReason"] == "length"
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "length"}


async def test_chat_completions_error_mid_stream(replay: ReplayServer) -> None:
    relayed = await chat(replay, "chat_error")
    assert relayed.names() == ["tool_input_start", "tool_input_delta", "tool_output_error"]
    assert_failed_in_users_words(
        relayed, provider="openai", kind="server_error",
        words="The model could not finish this reply. Please send your message again.")
    assert relayed.status["recoverable"] is True


async def test_responses_reasoning_summary_and_text(replay: ReplayServer) -> None:
    relayed = await responses(replay, "responses_reasoning")
    usage = {"inputTokens": 35, "outputTokens": 120, "totalTokens": 155}
    assert relayed.events == [
        ("reasoning", {"chunk": "Thinking "}), ("reasoning", {"chunk": "about life."}),
        ("reasoning", {"done": True}), ("chunk", {"chunk": "The answer"}),
        ("chunk", {"chunk": " is "}), ("chunk", {"chunk": "42."}), ("usage", usage)]
    assert ui_types(relayed.ui)[:6] == ["start", "start-step", "reasoning-start",
                                        "reasoning-delta", "reasoning-delta", "reasoning-end"]
    assert relayed.status["usage"] == usage
    assert relayed.status["output"]["reasoning"] == "Thinking about life."
    assert relayed.status["output"]["finishReason"] == "stop"
    assert replay.requests[-1].path == "/responses_reasoning/responses"


async def test_responses_tool_calls_are_named_by_call_id(replay: ReplayServer) -> None:
    relayed = await responses(replay, "responses_tools")
    starts = relayed.of("tool_input_start")
    # deltas name the item (fc_1); the call's id, which its result must quote, is call_id
    assert [s["toolCallId"] for s in starts] == ["call_paris", "call_tokyo"]
    assert [len([d for d in relayed.of("tool_input_delta") if d["toolCallId"] == s["toolCallId"]])
            for s in starts] == [3, 3]
    assert relayed.status["output"]["finishReason"] == "tool-calls"
    assert [c["input"] for c in relayed.status["output"]["toolCalls"]] == [
        {"city": "Paris"}, {"city": "Tokyo"}]


async def test_responses_incomplete_is_a_length_stop(replay: ReplayServer) -> None:
    relayed = await responses(replay, "responses_length")
    assert relayed.status["output"]["finishReason"] == "length"
    assert relayed.status["output"]["rawFinishReason"] == "max_output_tokens"
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "length"}


async def test_responses_error_event_mid_stream(replay: ReplayServer) -> None:
    relayed = await responses(replay, "responses_error")
    assert relayed.names()[:2] == ["chunk", "chunk"]
    assert_failed_in_users_words(
        relayed, provider="openai", kind="server_error",
        words="The model could not finish this reply. Please send your message again.")


async def test_responses_failed_response(replay: ReplayServer) -> None:
    relayed = await responses(replay, "responses_failed")
    assert relayed.status["status"] == "failed"
    assert relayed.status["error"] == ("The model is busy right now. Please send your message "
                                       "again in a moment.")
    assert relayed.status["errorDetail"]["kind"] == "rate_limit_exceeded"
    assert relayed.status["recoverable"] is True
    assert "org-123" not in str(relayed.status)


async def test_a_stop_closes_the_provider_connection(replay: ReplayServer) -> None:
    before = replay.cut.count("chat_long")
    relayed = await chat(replay, "slow/chat_long", stop_after=0.4)
    assert relayed.status["status"] == "interrupted"
    assert 0 < len(relayed.of("chunk")) < 60
    assert relayed.ui[-2:] == [{"type": "abort", "reason": "interrupted"},
                               {"type": "finish", "finishReason": "stop"}]
    assert replay.cut.count("chat_long") == before + 1, "the replay still had events to send"


async def test_relay_returns_the_turn(replay: ReplayServer) -> None:
    got: list[Any] = []

    async def call(ctx: RunContext[Chat]) -> Completed:
        stream = await client(replay, "chat_tools").chat.completions.create(
            model="m", messages=PROMPT, stream=True)  # type: ignore[arg-type]
        done = await relay(ctx, stream)
        got.append(done)
        return done

    await run_relay(call)
    turn = got[0].output
    assert isinstance(turn, Turn)
    assert [(c.tool_call_id, c.tool_name, c.input) for c in turn.tool_calls] == [
        ("call_paris", "get_weather", {"city": "Paris"}),
        ("call_tokyo", "get_weather", {"city": "Tokyo"})]
    assert turn.finish_reason == "tool-calls"


async def test_a_refused_request_is_the_relays_error_too(replay: ReplayServer) -> None:
    async def call(ctx: RunContext[Chat]) -> Completed:
        # not awaited: relay makes the request, so its refusal fails the run in user's words
        return await relay(ctx, client(replay, "chat_refused").chat.completions.create(
            model="gpt-4.1-mini", messages=PROMPT, stream=True))  # type: ignore[arg-type]

    relayed = await run_relay(call)
    assert relayed.events == []
    assert relayed.status["status"] == "failed"
    assert relayed.status["errorDetail"] == {"code": "PROVIDER_ERROR", "provider": "openai",
                                             "kind": "rate_limit_exceeded"}
    assert relayed.status["error"].startswith("The model is busy right now.")
    assert relayed.status["recoverable"] is True
    assert "org-123" not in str(relayed.status) + str(relayed.ui)


async def test_a_compatible_servers_reasoning_and_a_refusal(replay: ReplayServer) -> None:
    relayed = await chat(replay, "chat_reasoning")
    assert relayed.events == [("reasoning", {"chunk": "Two plus two "}),
                              ("reasoning", {"chunk": "is four."}), ("reasoning", {"done": True}),
                              ("chunk", {"chunk": "4"})]
    assert "usage" not in relayed.status  # the server sent none
    refused = await chat(replay, "chat_refusal")
    assert refused.text() == "I can't help with that."
    assert refused.status["output"]["finishReason"] == "content-filter"
    assert refused.ui[-1] == {"type": "finish", "finishReason": "content-filter"}
    assert refused.status["output"]["rawFinishReason"] == "stop"


async def test_tool_input_that_is_not_json(replay: ReplayServer) -> None:
    relayed = await chat(replay, "chat_bad_args")
    assert relayed.names() == ["tool_input_start", "tool_input_delta", "tool_output_error"]
    assert relayed.events[-1][1] == {
        "toolCallId": "call_paris",
        "errorText": "The model sent this tool call's input as invalid JSON."}
    output = relayed.status["output"]
    assert output["finishReason"] == "length"
    assert output["toolCalls"] == [{
        "toolCallId": "call_paris", "toolName": "get_weather", "input": '{"city": "Par',
        "error": "The model sent this tool call's input as invalid JSON."}]
    assert "tool-output-error" in ui_types(relayed.ui)
