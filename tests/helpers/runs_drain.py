"""Agents and ``streamwire serve`` processes for the drain and retry tests (issue 22, Deliver 4).

``RUNS_TEST_CALLS`` (an environment variable naming a file) makes every call of ``steady``
append ``run_id attempt pid`` to it, so a test counts invocations across processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx

from helpers.runs_server import SRC, TESTS, Backend, backend_flags, serve_cli
from streamwire.chat import Chat
from streamwire.runs import Completed, RunContext


def _count(run: RunContext[Any]) -> None:
    path = os.environ.get("RUNS_TEST_CALLS")
    if path:
        with open(path, "a") as f:
            f.write(f"{run.run_id} {run.attempt} {os.getpid()}\n")


async def steady(run: RunContext[Chat]) -> Completed:
    """Emits ``w0 w1 ...`` every ``input.pace`` seconds (default 0.1) for ``input.seconds``
    (default 4), then completes with the attempt that finished it."""
    data = run.input if isinstance(run.input, dict) else {}
    _count(run)
    pace = float(data.get("pace", 0.1))
    n = max(1, round(float(data.get("seconds", 4)) / pace))
    for i in range(n):
        await run.emit(Chat.chunk({"chunk": f"w{i} "}))
        await anyio.sleep(pace)
    return Completed(output={"attempt": run.attempt, "pid": os.getpid()})


def calls(path: Path) -> list[list[str]]:
    """The lines ``steady`` appended: [run_id, attempt, pid] each."""
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


@contextlib.contextmanager
def serve(backend: Backend, *, port: int, calls: Path | None = None, lease: float = 2.0,
          extra: tuple[str, ...] = ()) -> Iterator[subprocess.Popen[bytes]]:
    """``streamwire serve --agent helpers.runs_drain:steady`` as a subprocess on ``port`` with
    ``extra`` flags (SIGKILLed at exit if still running); stderr goes to a file beside the
    calls file (or nowhere)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
    if calls is not None:
        env["RUNS_TEST_CALLS"] = str(calls)
    err = open(calls.with_suffix(f".{port}.err"), "wb") if calls is not None else None  # noqa: SIM115
    try:
        with serve_cli(*backend_flags(backend), "--run-lease", str(lease), "--log-level",
                       "warning", "--heartbeat", "1", "--agent", "helpers.runs_drain:steady",
                       *extra, port=port, env=env,
                       stderr=err if err is not None else subprocess.DEVNULL,
                       stop=signal.SIGKILL) as proc:
            yield proc
    finally:
        if err is not None:
            err.close()


async def frames(client: httpx.AsyncClient, base: str, run_id: str, *, cursor: int = 0
                 ) -> list[tuple[str, Any]]:
    """(event, data) of one connection to ``/runs/{id}/sse`` until the server ends it (or the
    connection drops)."""
    got: list[tuple[str, Any]] = []
    event = ""
    try:
        async with client.stream("GET", f"{base}/runs/{run_id}/sse",
                                 params={"cursor": str(cursor)}) as resp:
            assert resp.status_code == 200, resp.status_code
            async for line in resp.aiter_lines():
                if line.startswith("event:"):
                    event = line.partition(":")[2].strip()
                elif line.startswith("data:"):
                    text = line.partition(":")[2].strip()
                    got.append((event, json.loads(text) if text else None))
                elif not line:
                    event = ""
    except (httpx.RemoteProtocolError, httpx.ReadError):
        got.append(("dropped", None))
    return got
