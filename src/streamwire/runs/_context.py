"""What an agent gets and returns: ``RunContext[C]``, ``Completed``, ``Paused``, ``AgentError``
and the ``Agent`` type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, TypeAlias, TypeVar, cast, final

import msgspec

from ..contract import Contract, Message
from ..errors import UsageError
from ..frames import encode_message_chunk
from ..log import StreamLog

__all__ = ["Agent", "AgentError", "Completed", "Paused", "RunContext", "load_agent"]

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
    ``POST /runs/{id}/resume`` calls the agent again with ``run.state`` and ``run.resume_input``."""

    state: Any = None


class AgentError(Exception):
    """Raise it from an agent for a failure meant for the client: its message, ``code`` and
    ``detail`` go on the wire (any other exception is reported as ``AGENT_ERROR`` with no text)."""

    def __init__(self, message: str, *, code: str = "AGENT_ERROR",
                 detail: dict[str, Any] | None = None, recoverable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.detail = detail or {}
        self.recoverable = recoverable


class RunContext(Generic[C]):
    """One run as its agent sees it.

    ``input`` is the start's JSON input. After a resume, ``resumed`` is True, ``state`` is what
    the agent paused with and ``resume_input`` the resume's input. ``emit`` appends a message of
    the agent's contract to the run's stream at the current ``step`` (``next_step()`` moves on).
    A stop arrives as cancellation (``asyncio.CancelledError`` at the agent's next ``await``).
    """

    __slots__ = ("_log", "agent", "input", "resume_input", "resumed", "run_id", "state", "step",
                 "stream_id")

    def __init__(self, log: StreamLog, *, run_id: str, agent: str, stream_id: str, input: Any,
                 state: Any = None, resume_input: Any = None, resumed: bool = False,
                 step: int = 0) -> None:
        self._log = log
        self.run_id = run_id
        self.agent = agent
        self.stream_id = stream_id
        self.input = input
        self.state = state
        self.resume_input = resume_input
        self.resumed = resumed
        self.step = step

    async def emit(self, msg: Message[C, Any]) -> int:
        """Append ``msg`` to the run's stream; returns its sequence."""
        return await self._log.append(self.stream_id, self.step, encode_message_chunk(msg))

    async def emit_many(self, msgs: Iterable[Message[C, Any]]) -> list[int]:
        """Append several messages at once (one atomic batch); returns their sequences."""
        batch = [(self.step, encode_message_chunk(m)) for m in msgs]
        return await self._log.append_many(self.stream_id, batch) if batch else []

    def next_step(self) -> int:
        """Start the next step (a tool-loop round); returns it."""
        self.step += 1
        return self.step

    def pause(self, state: Any = None) -> Paused:
        """``return run.pause(state)`` pauses the run with ``state``."""
        return Paused(state)

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id!r}, agent={self.agent!r}, step={self.step})"


#: An agent: ``async def name(run: RunContext[Chat]) -> ...``; served under its ``__name__``.
Agent: TypeAlias = Callable[[RunContext[Any]], Awaitable[Any]]


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
