"""Tool calls and steps for chat agents: ``tool_call``, ``ToolCall`` and the step boundaries.

::

    async def agent(run: RunContext[Chat]) -> Completed:
        await step_start(run)
        weather = await tool_call(run, "get_weather", {"city": "Paris"}, execute=get_weather)
        await step_finish(run)
        await step_start(run)
        await run.emit(Chat.chunk({"chunk": f"It is {weather['celsius']} °C in Paris."}))
        ...

``tool_call`` emits the whole call as ``Chat`` events, in the order the AI SDK's tool part needs
(``streamwire.chat.TOOL_TRANSITIONS``): ``tool_input_start``, the input's JSON text in a few
``tool_input_delta`` fragments, ``tool_input_available``, then runs ``execute(input)`` and emits
``tool_output_available`` with its result. When ``execute`` raises, the call ends with
``tool_output_error`` (``errorText``: the exception's message, else its class name) and
``tool_call`` raises ``ToolCallError`` from it: an agent that feeds tool errors back to its model
catches it (``error_text``); one that does not fails its run with that text (``ToolCallError`` is
an ``AgentError``, code ``TOOL_ERROR``). A stop (cancellation) propagates as is: the reply's
encoder closes the tool part when the run ends interrupted.

``ToolCall`` is the same call event by event, for input that arrives in pieces (a model streaming
a tool call's arguments) and for approvals: ``request_approval`` and ``deny`` emit
``tool_approval_request`` and ``tool_output_denied`` (pausing the run for the answer is the
caller's). Every method checks the call's order first and raises ``UsageError`` instead of
emitting an event the client would throw on (a delta after the input, a second output...).

The helpers need one thing of the run: ``emit`` (``ChatEmitter``); ``RunContext[Chat]`` and a
``RunContext`` of any contract extending ``Chat`` are ``ChatEmitter``s.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, final

import msgspec

from ..chat import Chat, ToolCallState, advance_tool_call
from ..contract import Message
from ..errors import UsageError
from ._context import AgentError

__all__ = [
    "DEFAULT_INPUT_FRAGMENTS",
    "ChatEmitter",
    "ToolCall",
    "ToolCallError",
    "input_fragments",
    "step_boundary",
    "step_finish",
    "step_start",
    "tool_call",
]

#: How many ``tool_input_delta`` fragments ``tool_call`` splits an input's JSON text into (fewer
#: when the text is shorter).
DEFAULT_INPUT_FRAGMENTS: Final = 3

_encode: Final = msgspec.json.Encoder().encode


class ChatEmitter(Protocol):
    """A run the helpers emit ``Chat`` events into (``RunContext.emit``'s signature)."""

    def emit(self, msg: Message[Chat, Any], /) -> Awaitable[object]:
        """Append ``msg`` to the run's stream."""
        ...


class ToolCallError(AgentError):
    """The tool of a ``tool_call`` raised; the client was sent ``tool_output_error`` with
    ``error_text``. ``__cause__`` is the tool's exception; ``detail`` names the tool and the call."""

    def __init__(self, error_text: str, *, tool_name: str, call_id: str) -> None:
        super().__init__(error_text, code="TOOL_ERROR",
                         detail={"toolName": tool_name, "toolCallId": call_id})
        self.error_text = error_text
        self.tool_name = tool_name
        self.call_id = call_id


def _new_call_id() -> str:
    """A fresh tool call id."""
    return f"call_{uuid.uuid4().hex}"


def input_fragments(text: str, count: int = DEFAULT_INPUT_FRAGMENTS) -> list[str]:
    """``text`` cut into ``count`` pieces of near-equal length (fewer when it is shorter; one
    empty piece for an empty text): the pieces concatenated are ``text``."""
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    count = max(1, min(count, len(text)))
    size, extra = divmod(len(text), count)
    pieces: list[str] = []
    at = 0
    for i in range(count):
        end = at + size + (1 if i < extra else 0)
        pieces.append(text[at:end])
        at = end
    return pieces


@final
class ToolCall:
    """One tool call's events, emitted in the order ``TOOL_TRANSITIONS`` allows (module docstring).

    Get one with ``await ToolCall.start(run, name)``; ``state`` is the call's tool part state.
    """

    __slots__ = ("_calls", "_run", "call_id", "name", "title")

    def __init__(self, run: ChatEmitter, name: str, call_id: str, title: str | None) -> None:
        self._run = run
        self.name = name
        self.call_id = call_id
        self.title = title
        self._calls: dict[str, ToolCallState] = {}

    @classmethod
    async def start(cls, run: ChatEmitter, name: str, *, call_id: str | None = None,
                    title: str | None = None) -> ToolCall:
        """Begin a call of the tool ``name`` (``tool_input_start``); ``call_id``: the call's id
        (default: a fresh one), ``title``: the tool card's human-readable name."""
        call = cls(run, name, _new_call_id() if call_id is None else call_id, title)
        if title is None:
            await call._emit(Chat.tool_input_start({"toolCallId": call.call_id, "toolName": name}))
        else:
            await call._emit(Chat.tool_input_start({"toolCallId": call.call_id, "toolName": name,
                                                    "title": title}))
        return call

    @property
    def state(self) -> ToolCallState | None:
        """The call's tool part state (None before ``start`` emitted)."""
        return self._calls.get(self.call_id)

    async def input_delta(self, text: str) -> None:
        """A fragment of the input's JSON text (``tool_input_delta``)."""
        await self._emit(Chat.tool_input_delta({"toolCallId": self.call_id,
                                                "inputTextDelta": text}))

    async def input_available(self, input: Any) -> None:
        """The complete input, any JSON value (``tool_input_available``)."""
        if self.title is None:
            await self._emit(Chat.tool_input_available({"toolCallId": self.call_id,
                                                        "toolName": self.name, "input": input}))
        else:
            await self._emit(Chat.tool_input_available({"toolCallId": self.call_id,
                                                        "toolName": self.name, "input": input,
                                                        "title": self.title}))

    async def request_approval(self, approval_id: str | None = None) -> str:
        """Ask the user to approve the call (``tool_approval_request``); returns the approval id
        (default: a fresh one). Pausing for the answer is the caller's."""
        approval = f"approval_{uuid.uuid4().hex}" if approval_id is None else approval_id
        await self._emit(Chat.tool_approval_request({"approvalId": approval,
                                                     "toolCallId": self.call_id}))
        return approval

    async def output(self, output: Any) -> None:
        """The tool's result, any JSON value (``tool_output_available``)."""
        await self._emit(Chat.tool_output_available({"toolCallId": self.call_id,
                                                     "output": output}))

    async def error(self, error_text: str) -> None:
        """The tool failed (``tool_output_error``)."""
        await self._emit(Chat.tool_output_error({"toolCallId": self.call_id,
                                                 "errorText": error_text}))

    async def deny(self) -> None:
        """The user denied the call: the tool does not run (``tool_output_denied``)."""
        await self._emit(Chat.tool_output_denied({"toolCallId": self.call_id}))

    async def _emit(self, msg: Message[Chat, Any]) -> None:
        advance_tool_call(self._calls, msg.name, msg.data)  # UsageError: nothing is emitted
        await self._run.emit(msg)

    def __repr__(self) -> str:
        return f"ToolCall({self.name!r}, call_id={self.call_id!r}, state={self.state!r})"


async def tool_call(run: ChatEmitter, name: str, input: Any, *,
                    execute: Callable[[Any], Awaitable[Any]], call_id: str | None = None,
                    title: str | None = None, fragments: int = DEFAULT_INPUT_FRAGMENTS) -> Any:
    """Call the tool ``name`` with ``input`` (any JSON value) through ``execute``, emitting the call
    as chat events (module docstring); returns ``execute``'s result.

    Raises:
        ToolCallError: ``execute`` raised (or returned a value that is not JSON); the call ended
            with ``tool_output_error``.
        UsageError: ``input`` is not JSON (nothing was emitted), or ``fragments`` is below 1.
    """
    if fragments < 1:
        raise UsageError(f"fragments must be at least 1, not {fragments}")
    try:
        text = _encode(input).decode()
    except (TypeError, msgspec.EncodeError) as exc:
        raise UsageError(f"the input of tool {name!r} is not JSON: {exc}") from exc
    call = await ToolCall.start(run, name, call_id=call_id, title=title)
    for piece in input_fragments(text, fragments):
        await call.input_delta(piece)
    await call.input_available(input)
    try:
        output = await execute(input)
        _encode(output)
    except Exception as exc:
        error_text = str(exc) or type(exc).__name__
        await call.error(error_text)
        raise ToolCallError(error_text, tool_name=name, call_id=call.call_id) from exc
    await call.output(output)
    return output


async def step_start(run: ChatEmitter) -> None:
    """A step (a round of the tool loop) begins: ``step_start``."""
    await run.emit(Chat.step_start({}))


async def step_finish(run: ChatEmitter) -> None:
    """The current step ends: ``step_finish``."""
    await run.emit(Chat.step_finish({}))


def step_boundary() -> list[Message[Chat, Any]]:
    """``[step_finish, step_start]``: what moving to the next step emits, as one batch (for a
    run's ``next_step`` to send with its next events)."""
    return [Chat.step_finish({}), Chat.step_start({})]
