"""Agents and logs for the liveness tests (issue 22, Deliver 2): a quiet agent (a slow tool), one
that swallows its cancellation, one that outlives its timeout; logs with a short writer timeout."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any

import anyio

from helpers.runs_server import LogFactory, backend_flags, serve_cli
from helpers.server import REDIS_URL, Backend
from streamwire.chat import Chat
from streamwire.log.memory import MemoryLog
from streamwire.runs import Completed, RunContext, agent_options


def _data(run: RunContext[Any]) -> dict[str, Any]:
    return run.input if isinstance(run.input, dict) else {}


async def quiet(run: RunContext[Chat]) -> Completed:
    """Emits ``before``, says nothing for ``input.silence`` seconds (a slow tool), emits
    ``after`` and completes."""
    await run.emit(Chat.chunk({"chunk": "before "}))
    await anyio.sleep(float(_data(run).get("silence", 8)))
    await run.emit(Chat.chunk({"chunk": "after"}))
    return Completed(output={"text": "before after"})


async def swallower(run: RunContext[Chat]) -> None:
    """Emits ``before``, then loops for ``input.seconds`` (default 60), swallowing every
    cancellation: only abandoning it ends the run."""
    await run.emit(Chat.chunk({"chunk": "before "}))
    until = anyio.current_time() + float(_data(run).get("seconds", 60))
    while anyio.current_time() < until:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.05)


async def lingers(run: RunContext[Chat]) -> Completed:
    """Emits ``before`` and sleeps ``input.seconds`` (default 30): it outlives a run timeout."""
    await run.emit(Chat.chunk({"chunk": "before "}))
    await anyio.sleep(float(_data(run).get("seconds", 30)))
    return Completed(output="too late")


@agent_options(run_timeout=0.5)
async def hasty(run: RunContext[Chat]) -> Completed:
    """``lingers`` with a run timeout of its own (0.5 s)."""
    return await lingers(run)


AGENTS = [quiet, swallower, lingers, hasty]


def with_writer_timeout(backend: Backend, seconds: float) -> LogFactory:
    """``backend``'s log factory with ``writer_timeout=seconds``."""
    if backend.kind == "memory":
        return lambda: MemoryLog(writer_timeout=seconds)
    if backend.kind == "sqlite":
        from streamwire.log.sqlite import SQLiteLog

        path = backend.spec.removeprefix("sqlite:")
        return lambda: SQLiteLog(path, writer_timeout=seconds)
    from streamwire.log.redis import RedisLog

    return lambda: RedisLog(REDIS_URL, prefix=backend.prefix, writer_timeout=seconds)


@contextlib.contextmanager
def serve_process(backend: Backend, agent: str, *, port: int, writer_timeout: float,
                  lease: float) -> Iterator[subprocess.Popen[bytes]]:
    """``streamwire serve`` with ``--writer-timeout`` as a subprocess on ``port`` (killed at exit
    if still running)."""
    with serve_cli(*backend_flags(backend), "--run-lease", str(lease), "--writer-timeout",
                   str(writer_timeout), "--log-level", "warning", "--heartbeat", "1",
                   "--agent", agent, port=port, stderr=subprocess.DEVNULL) as proc:
        yield proc
