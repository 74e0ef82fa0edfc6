"""Agents the runs tests serve (importable as ``helpers.runs_agents:NAME`` by ``streamwire serve``).

``RUNS_TEST_CALLS`` (an environment variable naming a file) makes every agent call append a line
to that file, so a test can count invocations across processes."""

from __future__ import annotations

import os
from typing import Any

import anyio

from streamwire.chat import Chat
from streamwire.runs import AgentError, Completed, Paused, RunContext


def _count(run: RunContext[Any]) -> None:
    path = os.environ.get("RUNS_TEST_CALLS")
    if path:
        with open(path, "a") as f:
            f.write(f"{run.agent} {run.run_id} {'resume' if run.resumed else 'start'}\n")


def _words(run: RunContext[Any]) -> list[str]:
    data = run.input if isinstance(run.input, dict) else {}
    return str(data.get("text", "one two three")).split()


async def echo(run: RunContext[Chat]) -> Completed:
    """Emits each word of ``input.text`` (``input.pace`` seconds apart), completes with the text."""
    _count(run)
    data = run.input if isinstance(run.input, dict) else {}
    for word in _words(run):
        await run.emit(Chat.chunk({"chunk": word + " "}))
        await anyio.sleep(float(data.get("pace", 0)))
    return Completed(output={"text": " ".join(_words(run))}, usage={"outputTokens": 3})


async def slow(run: RunContext[Chat]) -> Completed:
    """A chunk every ``input.pace`` seconds (default 0.05) for ``input.n`` chunks (default 400)."""
    _count(run)
    data = run.input if isinstance(run.input, dict) else {}
    for i in range(int(data.get("n", 400))):
        await run.emit(Chat.chunk({"chunk": f"w{i} "}))
        await anyio.sleep(float(data.get("pace", 0.05)))
    return Completed(output="done")


async def pauser(run: RunContext[Chat]) -> Completed | Paused:
    """Emits a, b, pauses with {"next": 2}; resumed, emits the resume input's word, then c."""
    _count(run)
    if not run.resumed:
        await run.emit(Chat.chunk({"chunk": "a "}))
        await run.emit(Chat.chunk({"chunk": "b "}))
        return run.pause({"next": 2})
    await run.emit(Chat.chunk({"chunk": f"{run.resume_input['word']} "}))
    await run.emit(Chat.chunk({"chunk": "c"}))
    return Completed(output={"state": run.state})


async def boom(run: RunContext[Chat]) -> None:
    """Emits one chunk, then raises with internal text that must not reach the wire."""
    _count(run)
    await run.emit(Chat.chunk({"chunk": "before "}))
    raise ValueError("secret internal text /etc/passwd")


async def refuse(run: RunContext[Chat]) -> None:
    """Raises an ``AgentError``: its message and code are meant for the client."""
    raise AgentError("quota exceeded", code="QUOTA", detail={"limit": 3})
