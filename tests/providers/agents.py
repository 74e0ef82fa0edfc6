"""Chat agents that relay a provider's stream, for ``streamwire serve --agent
providers.agents:gpt`` in the end-to-end test: the provider is the replay server whose address
is ``$STREAMWIRE_TEST_REPLAY``; ``gpt`` gets ``chat_text``, ``claude`` gets
``anthropic_thinking``, each with the thread's history as its input."""

from __future__ import annotations

import os

import anthropic
import openai

from streamwire.chat import Chat
from streamwire.providers import anthropic as claude_adapter
from streamwire.providers import openai as gpt_adapter
from streamwire.runs import Completed, RunContext


def _base() -> str:
    return os.environ["STREAMWIRE_TEST_REPLAY"]


async def gpt(run: RunContext[Chat]) -> Completed:
    client = openai.AsyncOpenAI(base_url=f"{_base()}/chat_text", api_key="k", max_retries=0)
    return await gpt_adapter.relay(run, client.chat.completions.create(
        model="gpt-4.1-mini", messages=gpt_adapter.messages_from_ui(run.input["messages"]),  # type: ignore[arg-type]
        stream=True, stream_options={"include_usage": True}))


async def claude(run: RunContext[Chat]) -> Completed:
    client = anthropic.AsyncAnthropic(base_url=f"{_base()}/anthropic_thinking", api_key="k",
                                      max_retries=0)
    prompt = claude_adapter.messages_from_ui(run.input["messages"])
    return await claude_adapter.relay(run, client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=256, **prompt.kwargs()))
