"""A model's tool loop in a chat run: ``run_tools``.

::

    async def chat(run: RunContext[Chat]) -> Completed | Paused:
        async def model(messages: list[dict[str, Any]]) -> Completed:
            return await relay(run, client.chat.completions.create(
                model=MODEL, messages=messages_from_ui(messages), tools=SCHEMAS,
                stream=True, stream_options={"include_usage": True}))

        return await run_tools(run, model, tools={
            "get_weather": get_weather,                                 # runs on the server
            "delete_file": Tool(delete_file, needs_approval=True),      # asks the user first
            "get_location": Tool(None),                                 # the browser runs it
        })

Each round calls ``model`` with the conversation as UIMessages (the thread's history, then the
reply so far, its tool calls with their results), which the model's ``relay`` streams into the run
and returns as a ``Turn``. The tool calls the model asked for run next: a Python tool's output (or
error) goes out and back to the model; a tool that needs approval, or the client's, pauses the run
(``streamwire.runs._approvals``). A round with no tool call ends the run with the model's
answer; ``max_rounds`` rounds of tool calls end it ``max_rounds``. Each round after the first is
a step of its own (``run.next_step()``), so the page shows step by step.

A pause keeps the loop's place in the run's state (``{"runTools": ...}``: the round, the reply
so far, the usage); the resume answers the calls and the loop goes on where it stopped, with no
model call repeated. Provider-neutral: ``model`` is any call that returns a relay's
``Completed`` (``streamwire.providers.openai.relay``, ``streamwire.providers.anthropic.relay``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, cast, final

import msgspec

from ..errors import UsageError
from ..runs import Completed, Paused, RunContext, ToolCall, ToolCallError, ToolDenied
from ..runs._approvals import PauseForTools
from ._relay import ToolCallRequest, Turn

__all__ = ["DEFAULT_MAX_ROUNDS", "ModelCall", "Tool", "run_tools"]

#: How many rounds of tool calls a reply may take before it ends ``max_rounds``.
DEFAULT_MAX_ROUNDS: Final = 8
#: The key of the loop's place in a paused run's state.
_STATE_KEY: Final = "runTools"

#: One model call: the conversation as UIMessages in, a relay's ``Completed`` (a ``Turn``) out.
ModelCall: TypeAlias = Callable[[list[dict[str, Any]]], Awaitable[Completed]]
Execute: TypeAlias = Callable[[Any], Awaitable[Any]]


@final
@dataclass(frozen=True, slots=True)
class Tool:
    """A tool of ``run_tools``: ``execute(input)`` runs it (None: the client runs it and sends
    its output back); ``needs_approval``: the user approves each call first."""

    execute: Execute | None
    needs_approval: bool = False


async def run_tools(run: RunContext[Any], model: ModelCall,
                    tools: Mapping[str, Tool | Execute], *,
                    history: list[dict[str, Any]] | None = None,
                    max_rounds: int = DEFAULT_MAX_ROUNDS) -> Completed | Paused:
    """Run the model's tool loop in ``run`` (module docstring); return its result from the
    agent. ``history``: the conversation before the reply (default: the chat route's
    ``run.input["messages"]``, the thread's stored history and the new message).

    Returns ``Completed`` (output: ``{"text", "finishReason", "reason", "rounds"}``; usage: the
    rounds' sum) or ``Paused`` while a call waits for the user or the client.

    Raises:
        UsageError: ``max_rounds`` is below 1, or no ``history`` and none in ``run.input``.
        ProviderError: a model call failed (uncaught, the run fails ``PROVIDER_ERROR``).
    """
    if max_rounds < 1:
        raise UsageError(f"max_rounds must be at least 1, not {max_rounds}")
    table = {name: t if isinstance(t, Tool) else Tool(t) for name, t in tools.items()}
    before = _history(run) if history is None else history
    place = _Place.resumed(run)
    if place is not None:
        if await place.answer(run, table):
            return run.pause(place.state())
        place.round += 1
    else:
        place = _Place(0, {"id": f"{run.run_id}-assistant", "role": "assistant", "parts": []},
                       {})
    while True:
        if place.round >= max_rounds:
            return place.completed("max_rounds", "other")
        if place.round:
            run.next_step()
        place.parts.append({"type": "step-start"})
        done = await model([*before, place.message])
        turn = _turn(done.output)
        place.add_usage(done.usage)
        if turn.text:
            place.parts.append({"type": "text", "text": turn.text, "state": "done"})
        if not turn.tool_calls:
            return place.completed(turn.reason, turn.finish_reason)
        if await place.call_tools(run, table, turn.tool_calls):
            return run.pause(place.state())
        place.round += 1


@final
class _Place:
    """Where the loop is: its round, the reply so far (a UIMessage), the usage so far."""

    __slots__ = ("message", "round", "usage")

    def __init__(self, round: int, message: dict[str, Any], usage: dict[str, Any]) -> None:
        self.round = round
        self.message = message
        self.usage = usage

    @property
    def parts(self) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", self.message["parts"])

    @classmethod
    def resumed(cls, run: RunContext[Any]) -> _Place | None:
        """The place a paused loop kept in the run's state (None: a fresh run)."""
        state: object = run.state
        if not run.resumed or not isinstance(state, dict):
            return None
        kept: object = cast("dict[str, Any]", state).get(_STATE_KEY)
        if not isinstance(kept, dict):
            return None
        place = cast("dict[str, Any]", kept)
        return cls(int(place["round"]), place["message"], place.get("usage") or {})

    def state(self) -> dict[str, Any]:
        return {_STATE_KEY: {"round": self.round, "message": self.message,
                             "usage": self.usage}}

    def add_usage(self, usage: Mapping[str, Any] | None) -> None:
        for name, value in (usage or {}).items():
            if isinstance(value, int | float):
                self.usage[name] = self.usage.get(name, 0) + value

    def completed(self, reason: str, finish_reason: str) -> Completed:
        text = "".join(str(p["text"]) for p in self.parts if p.get("type") == "text")
        return Completed(output={"text": text, "finishReason": finish_reason, "reason": reason,
                                 "rounds": self.round + (reason != "max_rounds")},
                         usage=self.usage or None)

    async def call_tools(self, run: RunContext[Any], tools: Mapping[str, Tool],
                         requests: tuple[ToolCallRequest, ...]) -> bool:
        """Run the round's calls; True when one waits for the user or the client."""
        waits = False
        for request in requests:
            part: dict[str, Any] = {"type": f"tool-{request.tool_name}",
                                    "toolCallId": request.tool_call_id, "input": request.input}
            self.parts.append(part)
            if request.error is not None:  # the relay closed it: broken input
                part.update(state="output-error", errorText=request.error)
                continue
            call = ToolCall.at(run, request.tool_call_id, request.tool_name, request.input)
            tool = tools.get(request.tool_name)
            if tool is None:
                text = f"There is no tool named {request.tool_name!r}."
                await call.error(text)
                part.update(state="output-error", errorText=text)
            elif tool.needs_approval:
                approval = await call.request_approval()
                part.update(state="approval-requested", approval={"id": approval})
                waits = True
            elif tool.execute is None:
                call.await_output()
                part.update(state="input-available")
                waits = True
            else:
                await _execute(call, tool.execute, part)
        return waits

    async def answer(self, run: RunContext[Any], tools: Mapping[str, Tool]) -> bool:
        """Go on with the calls the pause waited for (``ToolCall.resolve``); True when one
        still waits."""
        waits = False
        for pending in list(run.pending_tools):
            call = ToolCall.waiting(run, str(pending["toolCallId"]))
            part = next(p for p in self.parts if p.get("toolCallId") == call.call_id)
            tool = tools.get(call.name)
            try:
                result = await call.resolve(tool.execute if tool is not None else None)
            except PauseForTools:  # still unanswered: it keeps waiting
                waits = True
                continue
            except ToolCallError as exc:
                part.update(state="output-error", errorText=exc.error_text)
                continue
            if "approval" in part:
                part["approval"] = {**part["approval"],
                                    "approved": not isinstance(result, ToolDenied)}
            if isinstance(result, ToolDenied):
                part.update(state="output-denied")
            else:
                part.update(state="output-available", output=result)
        return waits


async def _execute(call: ToolCall, execute: Execute, part: dict[str, Any]) -> None:
    """Run a Python tool: its output, or its error's text, goes out and into ``part``."""
    try:
        output = await call.run(execute)
    except ToolCallError as exc:
        part.update(state="output-error", errorText=exc.error_text)
        return
    part.update(state="output-available", output=output)


def _turn(output: Any) -> Turn:
    """A relay's ``Turn`` (or its JSON)."""
    if isinstance(output, Turn):
        return output
    try:
        return msgspec.convert(output, Turn)
    except msgspec.ValidationError as exc:
        raise UsageError(f"run_tools' model call must return a relay's Completed (a Turn), "
                         f"not {type(output).__name__}: {exc}") from None


def _history(run: RunContext[Any]) -> list[dict[str, Any]]:
    data: object = run.input
    messages: object = cast("dict[str, Any]", data).get("messages") \
        if isinstance(data, dict) else None
    if not isinstance(messages, list):
        raise UsageError("run_tools needs the conversation: run.input['messages'] (the chat "
                         "route's) or history=[...] (UIMessages)")
    return cast("list[dict[str, Any]]", messages)

