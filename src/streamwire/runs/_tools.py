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

A call that waits for a person pauses the run (``_approvals``): with ``needs_approval=True``
``tool_call`` emits ``tool_approval_request`` after the input and pauses; with ``execute=None``
the client runs the tool (the AI SDK's ``onToolCall``/``addToolOutput``) and the run pauses for
its output. The answer resumes the run, which calls the agent again: reaching the same call
(the same ``call_id``, or the same name and input), ``tool_call`` emits nothing of the input
again and goes on: an approved call runs ``execute``, a denied one ends
``tool_output_denied`` and returns ``ToolDenied``, a client's output is emitted and returned.
The approval is of that exact input: a call with another input asks again.

``ToolCall`` is the same call event by event, for input that arrives in pieces (a model streaming
a tool call's arguments) and for approvals: ``request_approval`` and ``deny`` emit
``tool_approval_request`` and ``tool_output_denied``, ``await_output`` marks a client-side call;
``return run.pause(state)`` then pauses for them, and on the resume ``ToolCall.waiting(run, id)``
takes a pending call up again (``run.tool_answer(id)``: its answer). Every method checks the
call's order first and raises ``UsageError`` instead of emitting an event the client would throw
on (a delta after the input, a second output...).

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
from ._approvals import PauseForTools, PendingKind, ToolDenied, pending_entry, same_input
from ._context import AgentError, RunContext

__all__ = [
    "DEFAULT_INPUT_FRAGMENTS",
    "ChatEmitter",
    "ToolCall",
    "ToolCallError",
    "ToolDenied",
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

    __slots__ = ("_calls", "_run", "_waited", "call_id", "input", "name", "title")

    def __init__(self, run: ChatEmitter, name: str, call_id: str, title: str | None) -> None:
        self._run = run
        self.name = name
        self.call_id = call_id
        self.title = title
        #: the complete input, once ``input_available`` sent it
        self.input: Any = None
        self._calls: dict[str, ToolCallState] = {}
        self._waited: dict[str, Any] | None = None  # the pause's note of it (``waiting``)

    @classmethod
    def waiting(cls, run: RunContext[Any], call_id: str) -> ToolCall:
        """The pending call ``call_id`` of the pause this run resumes from (``run.pending_tools``),
        in the state the pause left it (``run.tool_answer(call_id)``: what the resume answered).

        Raises:
            UsageError: the run waited for no call ``call_id``.
        """
        entry = next((p for p in run.pending_tools if p.get("toolCallId") == call_id), None)
        if entry is None:
            raise UsageError(f"run {run.run_id!r} waits for no tool call {call_id!r}")
        call = cls.at(run, call_id, str(entry.get("toolName")), entry.get("input"),
                      "approval-requested" if entry.get("kind") == "approval"
                      else "input-available")
        call._waited = entry
        return call

    def keep_waiting(self) -> None:
        """The resume did not answer this pending call (``waiting``): the run's next
        ``run.pause()`` waits for it again."""
        run = _context_of(self._run)
        if self._waited is None or run is None:
            raise UsageError(f"tool call {self.call_id!r} is not one a paused run waited for")
        run._pending.append(self._waited)  # pyright: ignore[reportPrivateUsage] - this layer's

    @classmethod
    def at(cls, run: ChatEmitter, call_id: str, name: str, input: Any,
           state: ToolCallState = "input-available") -> ToolCall:
        """The call ``call_id`` whose events up to ``state`` were already emitted (by a model
        relay, or before a pause), to go on with: an output, an approval request..."""
        call = cls(run, name, call_id, None)
        call.input = input
        call._calls[call_id] = state
        return call

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
        self.input = input
        if self.title is None:
            await self._emit(Chat.tool_input_available({"toolCallId": self.call_id,
                                                        "toolName": self.name, "input": input}))
        else:
            await self._emit(Chat.tool_input_available({"toolCallId": self.call_id,
                                                        "toolName": self.name, "input": input,
                                                        "title": self.title}))

    async def request_approval(self, approval_id: str | None = None) -> str:
        """Ask the user to approve the call (``tool_approval_request``); returns the approval id
        (default: a fresh one). The run's next ``run.pause()`` waits for the answer."""
        approval = f"approval_{uuid.uuid4().hex}" if approval_id is None else approval_id
        await self._emit(Chat.tool_approval_request({"approvalId": approval,
                                                     "toolCallId": self.call_id}))
        self._wait("approval", approval)
        return approval

    def await_output(self) -> None:
        """The client runs this tool (its input is available): the run's next ``run.pause()``
        waits for the client's output (the AI SDK's ``addToolOutput``)."""
        if self.state != "input-available":
            raise UsageError(f"tool call {self.call_id!r} waits for a client output only once its "
                             f"input is available (it is {self.state})")
        self._wait("output", None)

    def _wait(self, kind: PendingKind, approval_id: str | None) -> None:
        run = _context_of(self._run)
        if run is not None:
            pending = run._pending  # pyright: ignore[reportPrivateUsage] - the runs layer's
            pending.append(pending_entry(kind, self.call_id, self.name, self.input, approval_id))

    async def resolve(self, execute: Callable[[Any], Awaitable[Any]] | None) -> Any:
        """Go on with a call the paused run waited for (``waiting``) by the resume's answer:
        approved, ``run(execute)``; denied, ``tool_output_denied`` and ``ToolDenied`` returned;
        a client's output emitted and returned (its error: ``ToolCallError``). Unanswered, the
        call keeps waiting and ``PauseForTools`` pauses the run (a loop over several calls
        catches it and pauses once, with its own state)."""
        run = _context_of(self._run)
        answer = run.tool_answer(self.call_id) if run is not None else None
        if run is None or answer is None:
            self.keep_waiting()
            raise PauseForTools(run.state if run is not None else None)
        if answer.approved is False:
            await self.deny()
            return ToolDenied(answer.reason)
        if answer.approved:
            if execute is None:
                return await self.run(_client_only(self.name))
            return await self.run(execute)
        if answer.error_text is not None:
            await self.error(answer.error_text)
            raise ToolCallError(answer.error_text, tool_name=self.name, call_id=self.call_id)
        await self.output(answer.output)
        return answer.output

    async def run(self, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run the tool: ``execute(input)``; its result goes out (``tool_output_available``) and
        is returned. Raises ``ToolCallError`` when it raises (or returns what is not JSON),
        after ``tool_output_error`` with its text."""
        try:
            output = await execute(self.input)
            _encode(output)
        except Exception as exc:
            error_text = str(exc) or type(exc).__name__
            await self.error(error_text)
            raise ToolCallError(error_text, tool_name=self.name, call_id=self.call_id) from exc
        await self.output(output)
        return output

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
                    execute: Callable[[Any], Awaitable[Any]] | None, call_id: str | None = None,
                    title: str | None = None, fragments: int = DEFAULT_INPUT_FRAGMENTS,
                    needs_approval: bool = False) -> Any:
    """Call the tool ``name`` with ``input`` (any JSON value) through ``execute``, emitting the call
    as chat events (module docstring); returns ``execute``'s result. ``needs_approval``: the run
    pauses for the user's answer first (denied: returns ``ToolDenied``); ``execute=None``: the
    client runs the tool and the run pauses for its output, which is returned.

    Raises:
        ToolCallError: ``execute`` raised (or returned a value that is not JSON), or the client
            answered with an error; the call ended with ``tool_output_error``.
        UsageError: ``input`` is not JSON (nothing was emitted), ``fragments`` is below 1, or the
            call waits for a person but ``run`` is no ``RunContext``.
    """
    if fragments < 1:
        raise UsageError(f"fragments must be at least 1, not {fragments}")
    try:
        text = _encode(input).decode()
    except (TypeError, msgspec.EncodeError) as exc:
        raise UsageError(f"the input of tool {name!r} is not JSON: {exc}") from exc
    waits = needs_approval or execute is None
    ctx = _context_of(run)
    if waits and ctx is None:
        raise UsageError(f"tool {name!r} waits for a person (needs_approval or execute=None): "
                         "that pauses a run, so it needs the agent's RunContext")
    waited = _waited_call(ctx, name, input, call_id) if ctx is not None else None
    if ctx is not None and waited is not None:
        return await waited.resolve(execute)
    call = await ToolCall.start(run, name, call_id=call_id, title=title)
    for piece in input_fragments(text, fragments):
        await call.input_delta(piece)
    await call.input_available(input)
    if needs_approval:
        await call.request_approval()
    elif execute is None:
        call.await_output()
    if ctx is not None and waits:
        raise PauseForTools(ctx.state)
    assert execute is not None
    return await call.run(execute)


def _client_only(name: str) -> Callable[[Any], Awaitable[Any]]:
    async def refuse(_: Any) -> Any:
        raise RuntimeError(f"the tool {name!r} runs in the client, not on the server")

    return refuse


def _context_of(run: ChatEmitter) -> RunContext[Any] | None:
    """``run`` as the ``RunContext`` it is (None: an emitter of another kind)."""
    if isinstance(run, RunContext):
        ctx: RunContext[Any] = run  # pyright: ignore[reportUnknownVariableType]
        return ctx
    return None


def _waited_call(run: RunContext[Any], name: str, input: Any,
                 call_id: str | None) -> ToolCall | None:
    """The pending call of the paused run that this call is (its id, else its name and input),
    taken up once; None when it is a new call."""
    for entry in run.pending_tools:
        if (entry.get("toolCallId") == call_id if call_id is not None
                else entry.get("toolName") == name and same_input(entry.get("input"), input)):
            call = ToolCall.waiting(run, str(entry["toolCallId"]))
            run.pending_tools.remove(entry)
            return call
    return None


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
