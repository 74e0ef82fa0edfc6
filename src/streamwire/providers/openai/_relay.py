"""``relay``: an ``openai`` async stream (Chat Completions chunks or Responses events) into a chat
run's events."""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
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
    import openai
except ImportError as exc:  # tested in a subprocess without the package
    raise ImportError("streamwire.providers.openai needs the openai package: "
                      "pip install 'streamwire[openai]'") from exc

__all__ = ["CHAT_FINISH_REASONS", "relay"]

PROVIDER: Final = "openai"

#: Chat Completions ``finish_reason`` -> the AI SDK's ``finishReason``.
CHAT_FINISH_REASONS: Final[dict[str, FinishReason]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}
#: Responses ``incomplete_details.reason`` -> the AI SDK's ``finishReason``.
INCOMPLETE_REASONS: Final[dict[str, FinishReason]] = {
    "max_output_tokens": "length",
    "content_filter": "content-filter",
}
#: Error codes worth sending the message again for (``recoverable``).
_TRANSIENT: Final = frozenset({"rate_limit_exceeded", "server_error", "connection", "timeout",
                               "rate_limit_error", "overloaded", "server_is_overloaded"})


async def relay(run: ChatEmitter, stream: AsyncIterable[Any] | Any) -> Completed:
    """Relay ``stream`` into ``run``'s chat events: an ``openai`` async stream of Chat
    Completions chunks (``client.chat.completions.create(..., stream=True,
    stream_options={"include_usage": True})``) or of Responses events
    (``client.responses.create(..., stream=True)``), awaited or not (not yet awaited, an error
    answering the request is the relay's too). Returns the ``Completed`` whose ``output`` is the
    model's ``Turn`` (text, tool calls, finish reason) and whose ``usage`` is the call's.

    The relay sends no ``done``: a tool loop relays several calls into one run. The stream's
    HTTP response is closed when the relay ends, however it ends (a stop's cancellation too).

    Raises:
        ProviderError: an error event, a failed response, an ``openai.APIError`` while reading
            (open tool parts are closed first).
    """
    state = _State(Relay(run, PROVIDER))
    return await drive(state.relay, stream, state.feed, state.finish, openai.APIError, _failure)


def _failure(exc: openai.APIError) -> ProviderError:
    return _error(exc.code or exc.type or _api_error_kind(exc), str(exc.message))


def _api_error_kind(exc: openai.APIError) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIStatusError):
        return f"http_{exc.status_code}"
    return error_kind(exc.body, "api_error")


def _error(kind: str, message: str) -> ProviderError:
    return ProviderError(PROVIDER, kind, provider_message=message,
                         recoverable=kind in _TRANSIENT or kind.startswith("http_5"))


class _State:
    """Reads either API's events; which one is told by each event's shape."""

    __slots__ = ("finish_reason", "handlers", "raw", "relay")

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.raw: str | None = None
        self.finish_reason: FinishReason | None = None
        self.handlers: dict[str, Callable[[Any], Awaitable[None]]] = {
            "response.output_text.delta": self._text,
            "response.refusal.delta": self._refusal,
            "response.reasoning_summary_text.delta": self._reasoning,
            "response.reasoning_text.delta": self._reasoning,
            "response.output_item.added": self._item_added,
            "response.function_call_arguments.delta": self._arguments,
            "response.function_call_arguments.done": self._arguments_done,
            "response.output_item.done": self._item_done,
            "response.completed": self._response_end,
            "response.incomplete": self._response_end,
            "response.failed": self._response_failed,
            "error": self._error_event,
        }

    async def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind is None:  # a Chat Completions chunk
            await self._chunk(event)
            return
        handler = self.handlers.get(kind)
        if handler is not None:
            await handler(event)

    async def finish(self) -> Completed:
        reason = self.finish_reason
        if reason is None:  # the stream ended without saying why
            reason = "other"
        return await self.relay.completed(reason, self.raw)

    # -- Chat Completions --------------------------------------------------------------------

    async def _chunk(self, chunk: Any) -> None:
        relay = self.relay
        usage = chunk.usage
        if usage is not None:
            details = usage.prompt_tokens_details
            relay.usage(usage.prompt_tokens, usage.completion_tokens, total=usage.total_tokens,
                        cache_read=details.cached_tokens if details is not None else None)
        for choice in chunk.choices:
            if choice.index:
                continue  # n > 1: the run's reply is the first choice
            delta = choice.delta
            if delta is not None:
                extra = delta.model_extra
                if extra:  # OpenAI-compatible servers (vLLM, DeepSeek...) stream reasoning so
                    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                    if isinstance(reasoning, str) and reasoning:
                        await relay.reasoning(reasoning)
                if delta.content:
                    await relay.text(delta.content)
                if delta.refusal:
                    relay.refused = True
                    await relay.text(delta.refusal)
                if delta.tool_calls:
                    for call in delta.tool_calls:
                        await self._call_delta(call)
            if choice.finish_reason is not None:
                self.raw = choice.finish_reason
                self.finish_reason = CHAT_FINISH_REASONS.get(choice.finish_reason, "other")
                await relay.finish_tools()

    async def _call_delta(self, call: Any) -> None:
        relay = self.relay
        function = call.function
        arguments = function.arguments if function is not None else None
        if not relay.has_call(call.index):
            name = function.name if function is not None else None
            await relay.tool_start(call.index, call.id or f"call_{call.index}", name or "")
        if arguments:
            await relay.tool_delta(call.index, arguments)

    # -- Responses ---------------------------------------------------------------------------

    async def _text(self, event: Any) -> None:
        await self.relay.text(event.delta)

    async def _refusal(self, event: Any) -> None:
        self.relay.refused = True
        await self.relay.text(event.delta)

    async def _reasoning(self, event: Any) -> None:
        await self.relay.reasoning(event.delta)

    async def _item_added(self, event: Any) -> None:
        item = event.item
        if item.type == "function_call":
            # deltas name the item's id; the call's id (what its result quotes) is call_id
            await self.relay.tool_start(item.id, item.call_id, item.name)
            if item.arguments:
                await self.relay.tool_delta(item.id, item.arguments)

    async def _arguments(self, event: Any) -> None:
        if self.relay.has_call(event.item_id):
            await self.relay.tool_delta(event.item_id, event.delta)

    async def _arguments_done(self, event: Any) -> None:
        if self.relay.has_call(event.item_id):
            await self.relay.tool_done(event.item_id, event.arguments)

    async def _item_done(self, event: Any) -> None:
        item = event.item
        if item.type == "function_call" and self.relay.has_call(item.id):
            await self.relay.tool_done(item.id, item.arguments)
        elif item.type == "reasoning":
            await self.relay.end_reasoning()

    async def _response_end(self, event: Any) -> None:
        response = event.response
        usage = response.usage
        if usage is not None:
            details = usage.input_tokens_details
            self.relay.usage(usage.input_tokens, usage.output_tokens, total=usage.total_tokens,
                             cache_read=details.cached_tokens if details is not None else None)
        if event.type == "response.incomplete":
            details = response.incomplete_details
            raw = (details.reason if details is not None else None) or "incomplete"
            self.raw = raw
            self.finish_reason = INCOMPLETE_REASONS.get(raw, "other")
            return
        self.raw = response.status or "completed"
        calls = any(getattr(item, "type", None) == "function_call" for item in response.output)
        self.finish_reason = "tool-calls" if calls else "stop"

    async def _response_failed(self, event: Any) -> None:
        error = event.response.error
        kind = (error.code if error is not None else None) or "response_failed"
        message = error.message if error is not None else ""
        raise await self.relay.fail(_error(str(kind), str(message)))

    async def _error_event(self, event: Any) -> None:
        raise await self.relay.fail(_error(str(event.code or "error"), str(event.message)))
