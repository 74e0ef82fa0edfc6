"""What an agent gets and returns: ``RunContext[C]``, ``Completed``, ``Paused``, ``AgentError``
and the ``Agent`` type."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    TypeAlias,
    TypeVar,
    cast,
    final,
    get_args,
    get_origin,
    get_type_hints,
)

import msgspec

from ..chat import TOOL_TRANSITIONS, Chat, ToolCallState, advance_tool_call
from ..contract import BoundEvent, Contract, Message
from ..errors import PayloadError, RunEndedError, UsageError
from ..frames import encode_message_chunk
from ..frames._payload import envelope_chunk
from ..log import StreamLog
from ._approvals import ToolAnswer, read_answers

if TYPE_CHECKING:
    from ._tools import ChatEmitter

__all__ = ["Agent", "AgentError", "Completed", "Paused", "RunContext", "agent_contract",
           "end_context", "load_agent"]

C = TypeVar("C", bound=Contract)


@final
class Completed(msgspec.Struct, frozen=True):
    """Return it from an agent to end the run ``completed`` with an ``output`` and ``usage``
    (returning any other value ends it with that value as the output)."""

    output: Any = None
    usage: dict[str, Any] | None = None


@final
class Paused(msgspec.Struct, frozen=True):
    """Return it from an agent to pause the run: the stream ends ``end{paused, state}``, and
    ``POST /runs/{id}/resume`` calls the agent again with ``run.state`` and ``run.resume_input``.
    ``tools``: the tool calls it waits for (``run.pause`` fills it in; ``_approvals``)."""

    state: Any = None
    tools: list[dict[str, Any]] | None = None


class AgentError(Exception):
    """Raise it from an agent for a failure meant for the client: its message, ``code`` and
    ``detail`` go on the wire (any other exception, or one whose ``detail`` is not JSON, is
    reported as ``AGENT_ERROR`` with no text)."""

    def __init__(self, message: str, *, code: str = "AGENT_ERROR",
                 detail: dict[str, Any] | None = None, recoverable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.detail = detail or {}
        self.recoverable = recoverable


class RunContext(Generic[C]):
    """One run as its agent sees it.

    ``input`` is the start's JSON input; ``user`` the id of the user who started the run (the
    server's ``authorize`` hook names them, e.g. a JWT's ``sub``; None: anonymous). After a resume, ``resumed`` is True, ``state`` is what
    the agent paused with and ``resume_input`` the resume's input. ``emit`` appends a message of
    the agent's contract to the run's stream at the current ``step`` (``next_step()`` moves on).
    A stop arrives as cancellation (``asyncio.CancelledError`` at the agent's next ``await``).

    ``emit`` checks each message as ``StreamWriter`` does, with the reader's own rules: an event
    outside ``contract`` (when known: the agent's annotation ``run: RunContext[Chat]`` names it)
    is a ``UsageError``, a payload that is not JSON or does not match its event's type a
    ``PayloadError``, and once the agent's call has ended (a task it left behind emits) a
    ``RunEndedError``; nothing reaches the stream then. Uncaught, each fails the run
    ``AGENT_ERROR`` like any exception.

    A tool event (``streamwire.chat.TOOL_TRANSITIONS``) out of its call's order (a delta before
    its start, a second output...) is a ``UsageError`` too, with nothing appended. When the
    contract is ``Chat`` (or extends it), ``next_step()`` puts the step boundary on the wire: the
    next ``emit``/``emit_many`` sends ``step_finish`` (at the old step) and ``step_start`` (at the
    new one) in the same batch as its messages; an agent that ends right after ``next_step()``
    adds no empty step.
    """

    __slots__ = ("_answers", "_boundary", "_chat", "_contract", "_ended", "_log", "_pending",
                 "_reply_error", "_tool_calls", "agent", "attempt", "input", "pending_tools",
                 "resume_input", "resumed", "run_id", "state", "step", "stream_id", "user")

    def __init__(self, log: StreamLog, *, run_id: str, agent: str, stream_id: str, input: Any,
                 state: Any = None, resume_input: Any = None, resumed: bool = False,
                 step: int = 0, contract: type[Contract] | None = None,
                 attempt: int = 1, user: str | None = None,
                 pending_tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        self._log = log
        self._contract = contract
        self._chat = contract is not None and issubclass(contract, Chat)
        self._boundary: int | None = None  # the step a pending step_finish closes
        self._tool_calls: dict[str, ToolCallState] = {}
        self._ended = False
        #: The payload of the ``Chat.error`` the agent emitted, if any: its run fails (D-4).
        self._reply_error: Any = None
        self.run_id = run_id
        self.agent = agent
        self.stream_id = stream_id
        self.input = input
        self.state = state
        self.resume_input = resume_input
        self.resumed = resumed
        self.step = step
        #: 1 for the run's first call, 2 for its first re-run (its worker was lost or shut
        #: down: ``Runs(run_retries=)``), ...: with ``run_id``, the key of idempotent effects.
        self.attempt = attempt
        self.user = user
        #: The tool calls the pause this resume ends waited for (``_approvals``): their events
        #: are on the stream already; ``tool_answer`` gives what the resume answered.
        self.pending_tools: list[dict[str, Any]] = [dict(p) for p in pending_tools or ()]
        self._answers: dict[str, ToolAnswer] = (
            read_answers(resume_input, self.pending_tools) if self.pending_tools else {})
        for p in self.pending_tools:  # their calls go on from where the pause left them
            self._tool_calls[str(p["toolCallId"])] = (
                "approval-requested" if p.get("kind") == "approval" else "input-available")
        #: What the next pause waits for (``tool_call`` adds to it).
        self._pending: list[dict[str, Any]] = []

    async def emit(self, msg: Message[C, Any]) -> int:
        """Append ``msg`` to the run's stream; returns its sequence. Raises ``PayloadError``,
        ``UsageError`` or ``RunEndedError`` (see the class) with nothing appended."""
        if self._boundary is None and not _is_tool_event(msg):
            return await self._log.append(self.stream_id, self.step, self._chunk(msg))
        return (await self.emit_many([msg]))[-1]

    async def emit_many(self, msgs: Iterable[Message[C, Any]]) -> list[int]:
        """Append several messages at once (one atomic batch); returns their sequences. Every
        message is checked first: one bad message appends none."""
        msgs = list(msgs)
        batch = [(self.step, self._chunk(m)) for m in msgs]
        if not batch:
            return []
        calls = self._tool_calls
        if any(_is_tool_event(m) for m in msgs):
            calls = dict(calls)
            for m in msgs:
                if _is_tool_event(m):
                    advance_tool_call(calls, m.name, m.data)  # UsageError: nothing appended
        old = self._boundary
        if old is not None:
            batch[:0] = [(old, encode_message_chunk(Chat.step_finish({}))),
                         (self.step, encode_message_chunk(Chat.step_start({})))]
        seqs = await self._log.append_many(self.stream_id, batch)
        self._tool_calls = calls
        self._boundary = None
        return seqs[2:] if old is not None else seqs

    def _chunk(self, msg: Message[Any, Any]) -> bytes:
        """The chunk that carries ``msg``, checked as a reader of the contract would read it."""
        if self._ended:
            raise RunEndedError(self.run_id)
        if not _is_message(msg):  # an untyped agent passes anything
            raise UsageError(f"emit takes a message such as Chat.chunk({{...}}), not "
                             f"{type(msg).__name__}")
        bound: BoundEvent[Any, Any] = msg.event
        contract = self._contract
        if contract is not None and contract.events().get(bound.name) is not bound:
            raise UsageError(f"event {bound.name!r} of {bound.contract.__qualname__} is not an "
                             f"event of {contract.__qualname__}, this agent's contract")
        data = msg.encode()  # PayloadError: not JSON
        try:
            bound.decode(data)  # what a reader of the contract does with it
        except PayloadError as exc:
            raise PayloadError(
                f"{bound.contract.__qualname__}.{bound.attr}: the payload does not match the "
                f"event's type, so a reader would drop it: {exc}", event=bound.name,
                raw=envelope_chunk(bound.name, data)) from None
        chunk = envelope_chunk(bound.name, data)
        if bound.name == "error" and Chat.events().get("error") is bound:
            self._reply_error = msg.data
        return chunk

    def next_step(self) -> int:
        """Start the next step (a tool-loop round); returns it. For a ``Chat`` run, the next
        emit sends the step boundary first (``step_finish``, ``step_start``: see the class)."""
        if self._chat and self._boundary is None:
            self._boundary = self.step
        self.step += 1
        return self.step

    async def tool_call(self: ChatEmitter, name: str, input: Any, *,
                        execute: Callable[[Any], Awaitable[Any]] | None,
                        call_id: str | None = None, title: str | None = None,
                        needs_approval: bool = False) -> Any:
        """Call the tool ``name`` with ``input`` through ``execute``, emitting the call as chat
        events; returns ``execute``'s result (``streamwire.runs.tool_call``: raises
        ``ToolCallError`` when the tool fails). ``needs_approval``: the run pauses until the
        user answers, and a denied call returns ``ToolDenied``; ``execute=None``: the client
        runs the tool, the run pauses for its output. For runs whose contract is ``Chat`` (or
        extends it)."""
        from ._tools import tool_call

        return await tool_call(self, name, input, execute=execute, call_id=call_id, title=title,
                               needs_approval=needs_approval)

    def tool_answer(self, call_id: str) -> ToolAnswer | None:
        """The resume's answer to the pending tool call ``call_id`` (None: unanswered)."""
        return self._answers.get(call_id)

    def pause(self, state: Any = None) -> Paused:
        """``return run.pause(state)`` pauses the run with ``state`` (and the tool calls it
        waits for, when ``tool_call`` asked for approvals or client outputs)."""
        return Paused(state, list(self._pending) or None)

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id!r}, agent={self.agent!r}, step={self.step})"


def _is_message(value: object) -> bool:
    return isinstance(value, Message)


def _is_tool_event(value: object) -> bool:
    """``value`` is a message of one of ``Chat``'s tool events (``TOOL_TRANSITIONS``)."""
    if not _is_message(value):
        return False
    msg = cast("Message[Any, Any]", value)
    return msg.name in TOOL_TRANSITIONS and Chat.events().get(msg.name) is msg.event


def end_context(ctx: RunContext[Any]) -> None:
    """The agent's call is over: ``ctx`` takes no more emits (``RunEndedError``)."""
    ctx._ended = True  # pyright: ignore[reportPrivateUsage] - the service's, same module


#: An agent: ``async def name(run: RunContext[Chat]) -> ...``; served under its ``__name__``.
Agent: TypeAlias = Callable[[RunContext[Any]], Awaitable[Any]]


def agent_contract(agent: Agent) -> type[Contract] | None:
    """The contract an agent's first parameter names (``run: RunContext[Chat]`` -> ``Chat``),
    or None when it names none (``RunContext[Any]``, no annotation, one that does not resolve)."""
    try:
        first = next(iter(inspect.signature(agent).parameters), None)
        hint = get_type_hints(agent).get(first) if first is not None else None
    except Exception:  # an unresolvable annotation, a callable without a signature
        return None
    if get_origin(hint) is not RunContext:
        return None
    (arg,) = get_args(hint)
    return arg if isinstance(arg, type) and issubclass(arg, Contract) else None


def load_agent(spec: str) -> Agent:
    """The agent ``--agent`` names: ``MODULE:CALLABLE``, or ``demo`` (the built-in scripted chat
    agent, ``streamwire.runs.demo_agent``). Raises ``UsageError`` saying what is wrong."""
    import importlib

    if spec == "demo":
        spec = "streamwire.runs.demo_agent:demo"
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--agent takes MODULE:CALLABLE (or demo), not {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--agent {spec}: {exc}") from exc
    if not callable(target):
        raise UsageError(f"--agent {spec} is not callable")
    return cast(Agent, target)
