"""OpenAI: a streamed model call relayed into a chat run, and a thread's UIMessages as OpenAI's
input (``pip install 'streamwire[openai]'``).

::

    from openai import AsyncOpenAI
    from streamwire.providers.openai import messages_from_ui, relay

    client = AsyncOpenAI()

    async def chat(run: RunContext[Chat]) -> Completed:
        stream = await client.chat.completions.create(
            model="gpt-4.1-mini", messages=messages_from_ui(run.input["messages"]),
            stream=True, stream_options={"include_usage": True})
        return await relay(run, stream)

``relay`` takes Chat Completions chunks and Responses API events alike (``client.responses.
create(..., stream=True)``, with ``messages_from_ui(..., api="responses")`` or
``responses_input_from_ui`` as its ``input``). The mapping is in ``docs/guides/providers.md``.
"""

from __future__ import annotations

from ..._public import publish
from .._relay import PROVIDER_ERROR, FinishReason, ProviderError, ToolCallRequest, Turn
from .._ui import UIMessageError
from ._messages import messages_from_ui, responses_input_from_ui
from ._relay import CHAT_FINISH_REASONS, INCOMPLETE_REASONS, relay

__all__ = [
    "CHAT_FINISH_REASONS",
    "INCOMPLETE_REASONS",
    "PROVIDER_ERROR",
    "FinishReason",
    "ProviderError",
    "ToolCallRequest",
    "Turn",
    "UIMessageError",
    "messages_from_ui",
    "relay",
    "responses_input_from_ui",
]

publish(globals(), ["messages_from_ui", "relay", "responses_input_from_ui"])
