"""What every provider adapter shares: the model turn it returns (``Turn``, ``ToolCallRequest``),
its typed failure (``ProviderError``) and ``Relay``, the state of one relayed model call.

An adapter reads its provider's events and calls ``Relay``: ``text``, ``reasoning``,
``tool_start``/``tool_delta``/``tool_done`` (keyed by what the provider numbers its calls with:
an index, an item id), ``usage``; then ``completed`` with the finish reason, or ``fail`` with a
``ProviderError`` (the tool parts left open are closed first, with the error's words).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterable, Awaitable, Callable, Hashable, Mapping
from typing import Any, Final, Literal, TypeAlias, cast, final

import anyio
import msgspec

from ..chat import Chat, StreamEndReason, UsageStats
from ..runs import AgentError, ChatEmitter, Completed, ToolCall

__all__ = [
    "PROVIDER_ERROR",
    "FinishReason",
    "ProviderError",
    "Relay",
    "ToolCallRequest",
    "Turn",
    "close_quietly",
    "drive",
    "open_stream",
]

#: The AI SDK's ``finishReason`` vocabulary (``streamwire.aisdk.FinishReason``; providers sit
#: beside aisdk, so the literal is repeated here and a test checks both agree).
FinishReason: TypeAlias = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]

#: ``errorDetail.code`` of a run whose model call failed.
PROVIDER_ERROR: Final = "PROVIDER_ERROR"

#: What a chat page shows for a failed model call, by kind; never the provider's own text.
_BUSY: Final = "The model is busy right now. Please send your message again in a moment."
_LOST: Final = "The connection to the model was lost. Please send your message again."
_FAILED: Final = "The model could not finish this reply. Please send your message again."
#: ``errorText`` of a tool call whose input the model never finished or sent as broken JSON.
INVALID_INPUT: Final = "The model sent this tool call's input as invalid JSON."
#: How long closing the provider's connection may take once the relay is over (or stopped).
CLOSE_TIMEOUT: Final = 1.0

#: Provider error kinds that mean "too many requests right now" (both providers' words).
BUSY_KINDS: Final = frozenset({"rate_limit_exceeded", "rate_limit_error", "overloaded_error",
                               "http_429", "http_529"})

_decode: Final = msgspec.json.Decoder().decode


class ProviderError(AgentError):
    """The model provider failed the call (an error event, a failed response, a dropped or
    refused request). Uncaught, it fails the run ``PROVIDER_ERROR`` with ``message`` (words for
    the user) and ``detail`` ``{"provider", "kind"}`` (the provider's error type or code);
    ``provider_message`` keeps the provider's own text for logs, never for the wire."""

    def __init__(self, provider: str, kind: str, *, provider_message: str = "",
                 recoverable: bool = False, words: str | None = None) -> None:
        text = words or (_BUSY if kind in BUSY_KINDS else
                         _LOST if kind in ("connection", "timeout") else _FAILED)
        super().__init__(text, code=PROVIDER_ERROR,
                         detail={"provider": provider, "kind": kind}, recoverable=recoverable)
        self.provider = provider
        self.kind = kind
        self.provider_message = provider_message


@final
class ToolCallRequest(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """A tool call the model asked for: its id, the tool's name and its input (any JSON value).
    ``error`` is set (and ``input`` is the raw text) when the input was not valid JSON; the call
    was then closed with ``tool_output_error``."""

    tool_call_id: str
    tool_name: str
    input: Any
    error: str | None = None


@final
class Turn(msgspec.Struct, frozen=True, rename="camel"):
    """One model call's result, the ``output`` of the ``Completed`` a relay returns (JSON:
    ``{"text", "reasoning", "toolCalls", "finishReason", "rawFinishReason", "reason", "usage"}``).

    ``finish_reason`` is the AI SDK's vocabulary; ``raw_finish_reason`` the provider's own;
    ``reason`` the chat end reason a reply read from the run's stream ends with
    (``context_limit`` for ``length``, else ``complete``).
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    finish_reason: FinishReason = "other"
    raw_finish_reason: str | None = None
    reason: StreamEndReason = "complete"
    usage: UsageStats | None = None


@final
class _Call:
    __slots__ = ("done", "key", "parts", "tool")

    def __init__(self, key: Hashable, tool: ToolCall) -> None:
        self.key = key
        self.tool = tool
        self.parts: list[str] = []
        self.done = False


@final
class Relay:
    """One model call's relay into a chat run (module docstring)."""

    __slots__ = ("_calls", "_reasoning", "_reasoning_open", "_requests", "_text", "provider",
                 "refused", "run", "usage_stats")

    def __init__(self, run: ChatEmitter, provider: str) -> None:
        self.run = run
        self.provider = provider
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_open = False
        self._calls: dict[Hashable, _Call] = {}
        self._requests: list[ToolCallRequest] = []
        self.usage_stats: UsageStats | None = None
        #: The model refused (its refusal text went out as text): finish ``content-filter``.
        self.refused = False

    async def text(self, delta: str) -> None:
        """A piece of the reply's text."""
        if self._reasoning_open:
            await self.end_reasoning()
        self._text.append(delta)
        await self.run.emit(Chat.chunk({"chunk": delta}))

    async def reasoning(self, delta: str) -> None:
        """A piece of the model's reasoning (summary)."""
        self._reasoning_open = True
        self._reasoning.append(delta)
        await self.run.emit(Chat.reasoning({"chunk": delta}))

    async def end_reasoning(self) -> None:
        """The reasoning part is over (``reasoning {done}``), if one is open."""
        if self._reasoning_open:
            self._reasoning_open = False
            await self.run.emit(Chat.reasoning({"done": True}))

    def has_call(self, key: Hashable) -> bool:
        return key in self._calls

    async def tool_start(self, key: Hashable, call_id: str, name: str) -> None:
        """The model begins the tool call ``call_id`` (known to the adapter as ``key``)."""
        await self.end_reasoning()
        self._calls[key] = _Call(key, await ToolCall.start(self.run, name, call_id=call_id))

    async def tool_delta(self, key: Hashable, delta: str) -> None:
        """A fragment of the input's JSON text of the call known as ``key``."""
        call = self._calls[key]
        if delta and not call.done:
            call.parts.append(delta)
            await call.tool.input_delta(delta)

    async def tool_done(self, key: Hashable, arguments: str | None = None) -> None:
        """The call's input is complete: ``arguments`` (default: the fragments so far) is parsed
        and sent (``tool_input_available``), or the call is closed as invalid."""
        call = self._calls[key]
        if call.done:
            return
        call.done = True
        text = "".join(call.parts) if arguments is None else arguments
        tool = call.tool
        try:
            value: Any = _decode(text) if text.strip() else {}
        except msgspec.DecodeError:
            await tool.error(INVALID_INPUT)
            self._requests.append(ToolCallRequest(tool.call_id, tool.name, text, INVALID_INPUT))
            return
        await tool.input_available(value)
        self._requests.append(ToolCallRequest(tool.call_id, tool.name, value))

    async def tool_input(self, key: Hashable, value: Any) -> None:
        """The call's complete input as a parsed value (a provider that sends it whole)."""
        call = self._calls[key]
        if not call.done:
            call.done = True
            await call.tool.input_available(value)
            self._requests.append(ToolCallRequest(call.tool.call_id, call.tool.name, value))

    async def finish_tools(self) -> None:
        """Complete every call still open, in the order they began."""
        for call in list(self._calls.values()):
            if not call.done:
                await self.tool_done(call.key)

    def usage(self, input_tokens: int, output_tokens: int, *, total: int | None = None,
              cache_read: int | None = None, cache_write: int | None = None) -> None:
        """The call's token usage (the last report wins: providers send it cumulative)."""
        stats: UsageStats = {"inputTokens": input_tokens, "outputTokens": output_tokens,
                             "totalTokens": input_tokens + output_tokens if total is None
                             else total}
        if cache_read:
            stats["cacheReadInputTokens"] = cache_read
        if cache_write:
            stats["cacheWriteInputTokens"] = cache_write
        self.usage_stats = stats

    async def completed(self, finish_reason: FinishReason, raw: str | None) -> Completed:
        """End the relay: close what is open, send the usage, return the ``Completed``."""
        await self.end_reasoning()
        await self.finish_tools()
        if self.refused and finish_reason == "stop":
            finish_reason = "content-filter"
        usage = self.usage_stats
        if usage is not None:
            await self.run.emit(Chat.usage(usage))
        turn = Turn("".join(self._text), "".join(self._reasoning), tuple(self._requests),
                    finish_reason, raw, "context_limit" if finish_reason == "length" else "complete",
                    usage)
        return Completed(output=turn, usage=dict(usage) if usage is not None else None)

    async def fail(self, error: ProviderError) -> ProviderError:
        """Close the tool parts left open with the error's words; returns ``error`` to raise."""
        for call in self._calls.values():
            if not call.done:
                call.done = True
                await call.tool.error(error.message)
        return error


async def drive(relay: Relay, source: Any, feed: Callable[[Any], Awaitable[None]],
                finish: Callable[[], Awaitable[Completed]], errors: type[Exception],
                to_error: Callable[[Any], ProviderError]) -> Completed:
    """Open ``source`` (``open_stream``), ``feed`` each of its events, then ``finish``; an
    exception of the SDK's ``errors`` class is failed as ``to_error(exc)`` (``Relay.fail``);
    the stream is closed however it ends (``close_quietly``)."""
    opened: AsyncIterable[Any] | None = None
    try:
        opened = await open_stream(source)
        async for event in opened:
            await feed(event)
        return await finish()
    except errors as exc:
        raise await relay.fail(to_error(exc)) from exc
    finally:
        if opened is not None:
            await close_quietly(opened)


async def open_stream(source: Any) -> AsyncIterable[Any]:
    """The stream ``source`` is or gives: an SDK stream as is, the stream an awaitable (the
    SDK's ``create(..., stream=True)`` call, not yet awaited) returns, or the one an async
    context manager (``client.messages.stream(...)``) enters; so that the provider's errors
    on the request itself are the relay's too."""
    if inspect.isawaitable(source):
        source = await source
    if not hasattr(source, "__aiter__") and hasattr(source, "__aenter__"):
        source = await source.__aenter__()  # closing the stream is all its exit does
    return cast(AsyncIterable[Any], source)


async def close_quietly(stream: AsyncIterable[Any]) -> None:
    """Close the provider's stream (its HTTP response), even while being cancelled: a stopped
    run must not keep the provider generating (and billing) for no one."""
    close: Any = getattr(stream, "close", None) or getattr(stream, "aclose", None)
    if close is None:
        return
    # (any error closing it: the stream is over either way)
    with anyio.move_on_after(CLOSE_TIMEOUT, shield=True), contextlib.suppress(Exception):
        await close()


def error_kind(body: object, default: str) -> str:
    """The provider's error type or code in an error body (``{"error": {"type"|"code"}}``,
    ``{"type"|"code"}``), else ``default``."""
    if isinstance(body, Mapping):
        mapping: Mapping[str, Any] = body  # pyright: ignore[reportUnknownVariableType]
        inner = mapping.get("error")
        if isinstance(inner, Mapping):
            mapping = inner  # pyright: ignore[reportUnknownVariableType]
        for key in ("type", "code"):
            value = mapping.get(key)
            if isinstance(value, str) and value and value != "error":
                return value
    return default
