"""A chat agent on a real model: any OpenAI-compatible server (OpenAI, a local vLLM, llama.cpp's
server, Ollama), with two tools: ``get_weather`` runs on the server, ``delete_file`` asks the user
first (the page shows Approve and Deny).

    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_API_KEY=ollama OPENAI_MODEL=llama3.1 \\
        uvicorn app:app --app-dir examples/react_chat

``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` are read by the ``openai`` package itself;
``OPENAI_MODEL`` names the model (default ``gpt-4.1-mini``). Needs ``pip install
'streamwire[openai]'``. The model must support tool calling for the tools to be used.
"""

from __future__ import annotations

import os
from typing import Any

from openai import AsyncOpenAI

from streamwire.chat import Chat
from streamwire.providers import Tool, run_tools
from streamwire.providers.openai import messages_from_ui, relay
from streamwire.runs import Completed, Paused, RunContext

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
SYSTEM = ("You are a helpful assistant. Use get_weather for the weather in a city. Use "
          "delete_file to delete a file when asked to; the user approves each deletion.")
TOOLS: list[Any] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "delete_file", "description": "Delete a file of the user's (asks them first).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
]

_client: AsyncOpenAI | None = None


def client() -> AsyncOpenAI:
    """One client for the process (made at the first reply: importing this module needs no key)."""
    global _client
    if _client is None:
        _client = AsyncOpenAI()
    return _client


async def get_weather(args: dict[str, Any]) -> dict[str, Any]:
    """A fixed forecast (swap in a real weather API)."""
    return {"city": args.get("city"), "temperature": 18, "unit": "C", "sky": "clear"}


async def delete_file(args: dict[str, Any]) -> dict[str, Any]:
    """Says it deleted the file: this example deletes nothing."""
    return {"path": args.get("path"), "deleted": True}


async def assistant(run: RunContext[Chat]) -> Completed | Paused:
    """The model's tool loop over the thread (``streamwire.providers.run_tools``)."""

    async def model(messages: list[dict[str, Any]]) -> Completed:
        return await relay(run, client().chat.completions.create(
            model=MODEL, messages=[{"role": "system", "content": SYSTEM},
                                   *messages_from_ui(messages)],
            tools=TOOLS, stream=True, stream_options={"include_usage": True}))

    return await run_tools(run, model, {
        "get_weather": get_weather,
        "delete_file": Tool(delete_file, needs_approval=True),
    })
