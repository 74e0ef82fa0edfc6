"""Agents in tasks the service can abandon: ``LocalRun`` and ``start_agent``.

An agent runs in a task of its own, outside the service's task group, so that one that ignores
its cancellation (a loop that swallows ``CancelledError``) cannot hold up anything else: the
service cancels it once (asyncio: ``Task.cancel``, edge-triggered, so a swallowing loop does not
make the event loop spin redelivering it; trio: a cancel scope of its own), waits ``stop_grace``
seconds and then settles the run without it, leaving the task behind (``abandoned``). The task
records what the agent returned or raised in its ``LocalRun``; the service settles the run from
there (``Runs._execute``), never the task itself.

An abandoned asyncio task is also taken out of asyncio's task registry, so that the end of
``asyncio.run`` (which cancels every task left and waits for each) does not wait for it either:
a process that shuts down exits even with such an agent in it.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

import anyio
import sniffio

from ._approvals import PauseForTools
from ._context import Agent, RunContext, end_context
from ._exit import reply_error

__all__ = ["LocalRun", "Reason", "start_agent"]

#: Why the service ended a run before its agent returned: a stop, another process took the run
#: (its lease had expired), the service shutting down, the run's timeout, or its stream ended
#: without the service (the log's writer timeout).
Reason: TypeAlias = Literal["stop", "lost", "shutdown", "timeout", "gone"]

#: Agent tasks still alive (asyncio keeps only weak references to tasks): the running ones and
#: the abandoned ones, until they end, if ever.
_TASKS: set[asyncio.Task[None]] = set()


class LocalRun:
    """A run whose agent runs in this process: what it returned or raised once ``finished``,
    and why the service cancelled it (``reason``), if it did."""

    __slots__ = ("_abandon", "_cancel", "abandoned", "done", "error", "finished", "last_keepalive", "reason",
                 "result", "wake")

    def __init__(self) -> None:
        self.reason: Reason | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        #: The agent's call is over (it returned or raised).
        self.finished = False
        #: The service gave up waiting for the agent (it ignored its cancellation).
        self.abandoned = False
        #: Set when the agent's call ends or the run is cancelled: the service looks again.
        self.wake = anyio.Event()
        #: Set once the run is settled (or given up) and forgotten by the service.
        self.done = anyio.Event()
        #: ``time.monotonic()`` of the last keepalive of the run's stream.
        self.last_keepalive = time.monotonic()
        self._cancel: Callable[[], object] | None = None
        self._abandon: Callable[[], object] | None = None

    def cancel(self, reason: Reason) -> None:
        """End the run for ``reason`` (the first reason given counts); a no-op once the agent's
        call is over, so that ``reason`` stays None for an agent that returned on its own."""
        if self.finished or self.reason is not None:
            return
        self.reason = reason
        self.wake.set()
        if self._cancel is not None:
            self._cancel()


    def abandon(self) -> None:
        """Give up on the agent: cancel it once more and let it go (see the module)."""
        self.abandoned = True
        if not self.finished and self._cancel is not None:
            self._cancel()
        if self._abandon is not None:
            self._abandon()


def start_agent(fn: Agent, ctx: RunContext[Any], local: LocalRun, *, name: str) -> None:
    """Call ``fn(ctx)`` in a task of its own (see the module); ``local`` gets the result."""

    async def call() -> None:
        try:
            local.result = await fn(ctx)
            local.error = reply_error(ctx)  # it emitted Chat.error: the run fails (D-4)
        except PauseForTools as pause:  # a tool call waits for a person (``_approvals``)
            if local.reason is None:
                local.result = ctx.pause(pause.state)
        except BaseException as exc:
            # Every class is the agent's (SystemExit, KeyboardInterrupt, a CancelledError it raised
            # itself, ...) unless the service cancelled the run: then whatever it raised on its way
            # out is the cancellation's, and ``local.reason`` says what the run became.
            if local.reason is None:
                local.error = exc
        finally:
            end_context(ctx)  # a task the agent left behind emits no more
            local.finished = True
            local.wake.set()

    if sniffio.current_async_library() == "trio":  # pragma: no cover - the server runs asyncio
        import trio

        scope = trio.CancelScope()

        async def system_task() -> None:
            with scope:
                await call()

        local._cancel = scope.cancel  # pyright: ignore[reportPrivateUsage] - this module's
        trio.lowlevel.spawn_system_task(system_task, name=name,
                                        context=contextvars.copy_context())
        return
    task = asyncio.get_running_loop().create_task(call(), name=name)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
    local._cancel = task.cancel  # pyright: ignore[reportPrivateUsage] - this module's
    local._abandon = lambda: _unregister(task)  # pyright: ignore[reportPrivateUsage]


def _unregister(task: asyncio.Task[None]) -> None:
    """Take ``task`` out of ``asyncio.all_tasks()`` (what ``asyncio.run`` waits for at its end)."""
    unregister: Callable[[asyncio.Task[None]], None] | None = getattr(
        asyncio, "_unregister_task", None)
    if unregister is not None:
        unregister(task)
