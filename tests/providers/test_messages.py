"""``messages_from_ui`` for each provider: a thread's UIMessages (text, an image, a tool call and
its result, a denied call, steps) in the provider's message shape, checked by sending them
through the real SDK to the replay server and reading the request body it recorded."""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import openai
import pytest

from helpers.provider_replay import ReplayServer
from streamwire.errors import UsageError
from streamwire.providers import DENIED, UIMessageError
from streamwire.providers import anthropic as anthropic_adapter
from streamwire.providers import openai as openai_adapter

pytestmark = pytest.mark.anyio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
IMAGE = f"data:image/png;base64,{PNG}"
WEATHER_ARGS = '{"city":"Paris"}'

HISTORY: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "parts": [{"type": "text", "text": "You are terse."}]},
    {"id": "u1", "role": "user", "parts": [
        {"type": "text", "text": "What is in this picture, and the weather in Paris?"},
        {"type": "file", "mediaType": "image/png", "url": IMAGE, "filename": "dot.png"}]},
    {"id": "a1", "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "reasoning", "text": "Look at it first.", "state": "done"},
        {"type": "text", "text": "A red dot. Checking the weather.", "state": "done"},
        {"type": "tool-get_weather", "toolCallId": "call_1", "state": "output-available",
         "input": {"city": "Paris"}, "output": {"celsius": 18}},
        {"type": "tool-delete_files", "toolCallId": "call_2", "state": "output-denied",
         "input": {"path": "/"}, "approval": {"id": "ap1", "approved": False}},
        {"type": "step-start"},
        {"type": "text", "text": "It is 18 °C in Paris.", "state": "done"},
        {"type": "data-usage", "id": "usage", "data": {"inputTokens": 3}}]},
    {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Thanks!"}]},
]


def sent(replay: ReplayServer, path: str) -> Any:
    recorded = [r for r in replay.requests if r.path == path]
    assert recorded, f"no request to {path}"
    return recorded[-1].body


async def test_openai_chat_completions_messages(replay: ReplayServer) -> None:
    messages = openai_adapter.messages_from_ui(HISTORY)
    expected = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture, and the weather in Paris?"},
            {"type": "image_url", "image_url": {"url": IMAGE}}]},
        {"role": "assistant", "content": "A red dot. Checking the weather.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
            {"id": "call_2", "type": "function",
             "function": {"name": "delete_files", "arguments": '{"path":"/"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"celsius":18}'},
        {"role": "tool", "tool_call_id": "call_2", "content": DENIED},
        {"role": "assistant", "content": "It is 18 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ]
    assert messages == expected
    client = openai.AsyncOpenAI(base_url=f"{replay.base}/chat_text", api_key="k", max_retries=0)
    stream = await client.chat.completions.create(model="gpt-4.1-mini", messages=messages,  # type: ignore[arg-type]
                                                  stream=True)
    async with stream:
        async for _ in stream:
            pass
    assert sent(replay, "/chat_text/chat/completions")["messages"] == expected


async def test_openai_responses_input(replay: ReplayServer) -> None:
    items = openai_adapter.messages_from_ui(HISTORY, api="responses")
    assert items == openai_adapter.responses_input_from_ui(HISTORY)
    expected = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is in this picture, and the weather in Paris?"},
            {"type": "input_image", "image_url": IMAGE, "detail": "auto"}]},
        {"role": "assistant", "content": "A red dot. Checking the weather."},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": WEATHER_ARGS},
        {"type": "function_call", "call_id": "call_2", "name": "delete_files",
         "arguments": '{"path":"/"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"celsius":18}'},
        {"type": "function_call_output", "call_id": "call_2", "output": DENIED},
        {"role": "assistant", "content": "It is 18 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ]
    assert items == expected
    client = openai.AsyncOpenAI(base_url=f"{replay.base}/responses_reasoning", api_key="k",
                                max_retries=0)
    stream = await client.responses.create(model="o4-mini", input=items, stream=True)  # type: ignore[arg-type]
    async with stream:
        async for _ in stream:
            pass
    assert sent(replay, "/responses_reasoning/responses")["input"] == expected


async def test_anthropic_messages_and_system(replay: ReplayServer) -> None:
    prompt = anthropic_adapter.messages_from_ui(HISTORY)
    expected = [
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture, and the weather in Paris?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "A red dot. Checking the weather."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather",
             "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_2", "name": "delete_files", "input": {"path": "/"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": '{"celsius":18}'},
            {"type": "tool_result", "tool_use_id": "call_2", "content": DENIED,
             "is_error": True}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is 18 °C in Paris."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    ]
    assert prompt.system == "You are terse."
    assert prompt.messages == expected
    client = anthropic.AsyncAnthropic(base_url=f"{replay.base}/anthropic_length", api_key="k",
                                      max_retries=0)
    async with client.messages.stream(model="claude-sonnet-4-6", max_tokens=64,
                                      **prompt.kwargs()) as stream:
        await stream.until_done()
    body = sent(replay, "/anthropic_length/v1/messages")
    assert (body["system"], body["messages"]) == ("You are terse.", expected)


def test_tool_results_and_leftovers() -> None:
    history = [{"role": "assistant", "parts": [
        {"type": "dynamic-tool", "toolName": "search", "toolCallId": "c1",
         "state": "output-error", "input": {"q": "x"}, "errorText": "search is down"},
        {"type": "tool-pending", "toolCallId": "c2", "state": "input-available", "input": {}},
        {"type": "tool-waiting", "toolCallId": "c3", "state": "approval-requested", "input": {}},
        {"type": "text", "text": "Search failed."}]}]
    # the error goes back as an error; calls with no result yet are left out; text after a
    # tool call is the next step
    assert openai_adapter.messages_from_ui(history) == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search",
                                                          "arguments": '{"q":"x"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "search is down"},
        {"role": "assistant", "content": "Search failed."}]
    prompt = anthropic_adapter.messages_from_ui(history)
    assert prompt.system is None
    assert prompt.kwargs() == {"messages": prompt.messages}
    assert prompt.messages[1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "search is down",
         "is_error": True}]}


def test_files_each_provider_reads() -> None:
    pdf = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode()
    user = [{"role": "user", "parts": [
        {"type": "file", "mediaType": "application/pdf", "url": pdf, "filename": "a.pdf"},
        {"type": "file", "mediaType": "image/jpeg", "url": "https://example.com/cat.jpg"}]}]
    assert openai_adapter.messages_from_ui(user)[0]["content"] == [
        {"type": "file", "file": {"filename": "a.pdf", "file_data": pdf}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]
    assert anthropic_adapter.messages_from_ui(user).messages[0]["content"] == [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": pdf.split(",", 1)[1]}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}]


@pytest.mark.parametrize(("history", "words"), [
    ({"role": "user"}, "a list of UIMessages"),
    (["hello"], "message 0 is not an object"),
    ([{"role": "robot", "parts": []}], "needs a role"),
    ([{"role": "user", "parts": ["x"]}], "message 0, part 0"),
    ([{"role": "user", "parts": [{"type": "text"}]}], "text string"),
    ([{"role": "user", "parts": [{"type": "file", "mediaType": "text/csv",
                                   "url": "data:text/csv;base64,YQ=="}]}], "text/csv"),
    ([{"role": "user", "parts": [{"type": "file", "mediaType": "image/png",
                                   "url": "data:image/png,rawbytes"}]}], "base64"),
    ([{"role": "user", "parts": [{"type": "file", "mediaType": "image/png",
                                   "url": "data:image/png;base64,***"}]}], "invalid base64"),
    ([{"role": "assistant", "parts": [{"type": "tool-x", "state": "output-available"}]}],
     "toolCallId"),
])
def test_bad_histories_raise_a_clear_error(history: Any, words: str) -> None:
    for convert in (openai_adapter.messages_from_ui, anthropic_adapter.messages_from_ui):
        with pytest.raises(UIMessageError, match=words) as caught:
            convert(history)
        assert isinstance(caught.value, UsageError | ValueError)
