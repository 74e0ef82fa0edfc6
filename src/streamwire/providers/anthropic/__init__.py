"""Anthropic: a streamed Messages call relayed into a chat run, and a thread's UIMessages as the
Messages API's input (``pip install 'streamwire[anthropic]'``).

::

    from anthropic import AsyncAnthropic
    from streamwire.providers.anthropic import messages_from_ui, relay

    client = AsyncAnthropic()

    async def chat(run: RunContext[Chat]) -> Completed:
        prompt = messages_from_ui(run.input["messages"])
        async with client.messages.stream(model="claude-sonnet-4-6", max_tokens=1024,
                                          **prompt.kwargs()) as stream:
            return await relay(run, stream)

``relay`` takes the raw events of ``client.messages.create(..., stream=True)`` too. The mapping
is in ``docs/guides/providers.md``.
"""

from __future__ import annotations

from ..._public import publish
from .._relay import PROVIDER_ERROR, FinishReason, ProviderError, ToolCallRequest, Turn
from .._ui import UIMessageError
from ._messages import AnthropicInput, messages_from_ui
from ._relay import STOP_REASONS, relay

__all__ = [
    "PROVIDER_ERROR",
    "STOP_REASONS",
    "AnthropicInput",
    "FinishReason",
    "ProviderError",
    "ToolCallRequest",
    "Turn",
    "UIMessageError",
    "messages_from_ui",
    "relay",
]

publish(globals(), ["AnthropicInput", "messages_from_ui", "relay"])
