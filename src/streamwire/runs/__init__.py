"""Runs: agents as typed async functions, served over a stream log with every guarantee of the
stream underneath (the remote-agent protocol of wire v2, ``../shared/seeds/000_*``).

::

    async def chat(run: RunContext[Chat]) -> Completed:
        await run.emit(Chat.chunk({"chunk": "Hello"}))
        return Completed(output={"text": "Hello"}, usage={...})

    async with Runs(log, [chat]) as runs:          # or create_app(log, agents=[chat])
        record, created = await runs.start("chat", {"prompt": "hi"}, run_id="r1")

A chat agent calls tools with ``await run.tool_call(name, input, execute=...)`` (the call's
chat events, in the order the AI SDK's tool part needs; ``ToolCall`` event by event) and moves to
the next step of its tool loop with ``run.next_step()`` (``step_finish``/``step_start`` go out
with its next emit). ``needs_approval=True`` pauses the run until the user answers, and
``execute=None`` until the client sends the tool's output (``_approvals``): the answer resumes
the same run, the reply goes on in the same assistant message.

A run's chunks go to the stream whose id is the run id; its record (status ``running``,
``paused``, ``completed``, ``interrupted`` or ``failed``, the input, output, state, usage, error
and the worker's lease) goes to the same backend as the streams (``store_for(log)``). Whatever
the agent's exit (return, exception, stop, cancellation, shutdown, a lost worker), the stream gets
exactly one terminal frame and the record the matching status.

Agents are contained: nothing one does reaches beyond its run. Any exception class it raises
(``sys.exit()``, ``KeyboardInterrupt``, a ``CancelledError`` of its own, ...) fails the run
``AGENT_ERROR``; an outcome that is not JSON (or usage that is not a mapping of numbers) fails it
``INVALID_OUTCOME``, checked before the record moves; ``run.emit`` refuses what a reader would
drop, and any emit once the agent's call has ended (``RunEndedError``). No exception text reaches
the wire unless ``expose_errors`` is on; every other run and stream is served on.

Agents are bounded: a run's lease keeps its stream's writer alive however long the agent is
silent, and a lost worker's runs end ``WORKER_LOST`` on stream and ``/status`` alike; an agent
that ignores its cancellation is abandoned ``stop_grace`` seconds after a stop (its run ends
``interrupted`` anyway); ``run_timeout`` (``Runs(..., run_timeout=)``, or per agent
``@agent_options(run_timeout=)``) fails a run whose agent runs longer ``TIMEOUT``.
"""

from __future__ import annotations

from .._public import publish
from ._approvals import ToolAnswer, ToolDenied
from ._context import Agent, AgentError, Completed, Paused, RunContext, load_agent
from ._options import AgentOptions, agent_options
from ._outcome import RunOutcome, outcome_from_status, outcome_from_terminal
from ._record import FINISHED_RUN, TRANSITIONS, RunRecord, RunStatus
from ._service import (
    DEFAULT_LEASE_TIME,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_RECORD_TTL,
    DEFAULT_STOP_GRACE,
    DEFAULT_STOP_WAIT,
    TIMEOUT,
    Runs,
)
from ._store import MemoryRunStore, RunStore, store_for
from ._tools import ChatEmitter, ToolCall, ToolCallError, step_finish, step_start, tool_call

__all__ = [
    "DEFAULT_LEASE_TIME",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_RECORD_TTL",
    "DEFAULT_STOP_GRACE",
    "DEFAULT_STOP_WAIT",
    "FINISHED_RUN",
    "TIMEOUT",
    "TRANSITIONS",
    "Agent",
    "AgentError",
    "AgentOptions",
    "ChatEmitter",
    "Completed",
    "MemoryRunStore",
    "Paused",
    "RunContext",
    "RunOutcome",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "Runs",
    "ToolAnswer",
    "ToolCall",
    "ToolCallError",
    "ToolDenied",
    "agent_options",
    "load_agent",
    "outcome_from_status",
    "outcome_from_terminal",
    "step_finish",
    "step_start",
    "store_for",
    "tool_call",
]

publish(globals(), __all__)
