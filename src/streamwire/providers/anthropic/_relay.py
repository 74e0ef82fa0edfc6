"""``relay``: an ``anthropic`` Messages stream (raw events, or the SDK's ``MessageStream``) into a
chat run's events."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any, Final

from ...runs import ChatEmitter, Completed
from .._relay import (
    FinishReason,
    ProviderError,
    Relay,
    drive,
    error_kind,
)

try:
    import anthropic
except ImportError as exc:  # tested in a subprocess without the package
    raise ImportError("streamwire.providers.anthropic needs the anthropic package: "
                      "pip install 'streamwire[anthropic]'") from exc

__all__ = ["STOP_REASONS", "relay"]

PROVIDER: Final = "anthropic"

#: Anthropic ``stop_reason`` -> the AI SDK's ``finishReason`` (any other: ``other``).
STOP_REASONS: Final[dict[str, FinishReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
    "pause_turn": "other",
}
#: Error types worth sending the message again for (``recoverable``).
_TRANSIENT: Final = frozenset({"overloaded_error", "rate_limit_error", "api_error",
                               "connection", "timeout"})


async def relay(run: ChatEmitter, stream: AsyncIterable[Any] | Any) -> Completed:
    """Relay ``stream`` into ``run``'s chat events: the raw events of
    ``client.messages.create(..., stream=True)`` (awaited or not: not yet awaited, an error
    answering the request is the relay's too), or the SDK's ``MessageStream``
    (``async with client.messages.stream(...) as stream``, or the ``stream(...)`` manager itself);
    returns the ``Completed`` whose ``output`` is the model's ``Turn`` and whose
    ``usage`` is the call's.

    The relay sends no ``done``: a tool loop relays several calls into one run. The stream's
    HTTP response is closed when the relay ends, however it ends (a stop's cancellation too).

    Raises:
        ProviderError: an ``error`` event (``overloaded_error``...) or an
            ``anthropic.APIError`` while reading (open tool parts are closed first).
    """
    state = _State(Relay(run, PROVIDER))
    return await drive(state.relay, stream, state.feed, state.finish, anthropic.APIError,
                       _failure)


def _failure(exc: anthropic.APIError) -> ProviderError:
    kind = _api_error_kind(exc)
    return ProviderError(PROVIDER, kind, provider_message=str(exc.message),
                         recoverable=kind in _TRANSIENT or kind.startswith("http_5"))


def _api_error_kind(exc: anthropic.APIError) -> str:
    if isinstance(exc, anthropic.APITimeoutError):
        return "timeout"
    if isinstance(exc, anthropic.APIConnectionError):
        return "connection"
    kind = error_kind(exc.body, "")
    if kind:
        return kind
    if isinstance(exc, anthropic.APIStatusError):
        return f"http_{exc.status_code}"
    return "api_error"


#: The raw events the relay reads besides ``content_block_delta`` (the ``MessageStream``'s own
#: ``text``, ``input_json``, ``thinking``... events repeat those deltas, so they are skipped).
_HANDLED: Final = frozenset({"message_start", "content_block_start", "content_block_stop",
                             "message_delta"})


class _State:
    __slots__ = ("blocks", "feed", "raw", "relay", "usage_start")

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.raw: str | None = None
        self.feed = self._feed
        self.usage_start: Any = None
        #: content block index -> its type
        self.blocks: dict[int, str] = {}

    async def _feed(self, event: Any) -> None:
        kind = event.type
        if kind == "content_block_delta":  # the most frequent first
            await self.delta(event)
        elif kind in _HANDLED:
            await getattr(self, kind)(event)

    async def finish(self) -> Completed:
        return await self.relay.completed(STOP_REASONS.get(self.raw or "", "other"), self.raw)

    async def message_start(self, event: Any) -> None:
        self.usage_start = event.message.usage
        self._usage(event.message.usage)

    async def content_block_start(self, event: Any) -> None:
        block = event.content_block
        self.blocks[event.index] = block.type
        if block.type == "tool_use":
            await self.relay.tool_start(event.index, block.id, block.name)
        elif block.type == "text" and block.text:
            await self.relay.text(block.text)

    async def delta(self, event: Any) -> None:
        delta = event.delta
        kind = delta.type
        if kind == "text_delta":
            await self.relay.text(delta.text)
        elif kind == "input_json_delta":
            if self.relay.has_call(event.index):
                await self.relay.tool_delta(event.index, delta.partial_json)
        elif kind == "thinking_delta":
            await self.relay.reasoning(delta.thinking)

    async def content_block_stop(self, event: Any) -> None:
        kind = self.blocks.get(event.index)
        if kind == "tool_use":
            await self.relay.tool_done(event.index)
        elif kind == "thinking":
            await self.relay.end_reasoning()

    async def message_delta(self, event: Any) -> None:
        if event.delta.stop_reason is not None:
            self.raw = event.delta.stop_reason
        self._usage(event.usage)

    def _usage(self, usage: Any) -> None:
        """Anthropic's counts are cumulative, and a ``message_delta``'s may leave the input
        out: what it omits, ``message_start``'s gives. The input counted is the whole prompt
        (uncached, read from the cache and written to it), as the AI SDK counts it."""
        start = self.usage_start

        def count(name: str) -> int:
            value = getattr(usage, name, None)
            if value is None and start is not None:
                value = getattr(start, name, None)
            return value if isinstance(value, int) else 0

        read, write = count("cache_read_input_tokens"), count("cache_creation_input_tokens")
        self.relay.usage(count("input_tokens") + read + write, count("output_tokens"),
                         cache_read=read, cache_write=write)
