"""Model providers: a provider's streamed model call relayed into a chat run's events, and a
thread's UIMessages as the provider's input.

* ``streamwire.providers.openai`` (``pip install 'streamwire[openai]'``): Chat Completions and
  the Responses API;
* ``streamwire.providers.anthropic`` (``pip install 'streamwire[anthropic]'``): the Messages
  API, raw events or ``MessageStream``.

Each has ``relay(run, stream) -> Completed`` (whose ``output`` is a ``Turn``: text, reasoning,
the tool calls the model asked for, the finish reason in the AI SDK's words, usage) and
``messages_from_ui``; ``run_tools(run, model, tools)`` runs the model's tool loop over either
(``Tool(execute, needs_approval=...)``: approvals and client tools pause the run). A failed call raises ``ProviderError`` (``PROVIDER_ERROR``), in the user's
words. This package imports neither SDK: the shared types are here.
"""

from __future__ import annotations

from .._public import publish
from ._loop import DEFAULT_MAX_ROUNDS, ModelCall, Tool, run_tools
from ._relay import PROVIDER_ERROR, FinishReason, ProviderError, ToolCallRequest, Turn
from ._ui import DENIED, UIMessageError

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "DENIED",
    "PROVIDER_ERROR",
    "FinishReason",
    "ModelCall",
    "ProviderError",
    "Tool",
    "ToolCallRequest",
    "Turn",
    "UIMessageError",
    "run_tools",
]

publish(globals(), __all__)
