"""Runs served in a thread (``helpers.runs_server.serving``) with a handle on the server's log and
loop, so a test can store a failure in a run's stream as a lost writer would, or slow down a
resume between its record and its stream (``tests/test_client_settle.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx

from helpers.runs_server import Backend, Served, serving
from streamwire.chat import Chat
from streamwire.log import StreamLog
from streamwire.runs import Completed, RunContext

T = TypeVar("T")

#: The failure a lost writer leaves in its stream (``fail{recoverable, WRITER_GONE}``).
WRITER_GONE: dict[str, Any] = {"code": "WRITER_GONE"}


async def blocked(run: RunContext[Chat]) -> Completed:
    """Emits one chunk, then waits (a quiet tool) until its run is cancelled."""
    await run.emit(Chat.chunk({"chunk": "a "}))
    await anyio.sleep(3600)
    return Completed(output="never")


@dataclass
class Handle:
    served: Served
    log: StreamLog
    loop: asyncio.AbstractEventLoop

    @property
    def base(self) -> str:
        return self.served.base

    def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the server's loop and return its result."""
        async def run() -> T:
            return await make()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)


@contextlib.contextmanager
def serving_runs(backend: Backend, agents: list[Any], *,
                 wrap: Callable[[StreamLog], None] | None = None,
                 **runs_options: Any) -> Iterator[Handle]:
    """``serving`` the runs API for ``agents`` over ``backend``; ``wrap(log)`` may patch the log."""
    made: dict[str, Any] = {}

    def factory() -> StreamLog:
        log = backend.factory()
        if wrap is not None:
            wrap(log)
        made.update(log=log, loop=asyncio.get_running_loop())
        return log

    with serving(factory, agents, **runs_options) as served:
        yield Handle(served, made["log"], made["loop"])


def stored_fail_run(handle: Handle, run_id: str) -> None:
    """Start ``blocked`` as ``run_id``, wait for its chunk, then fail its stream the way a lost
    writer does (recoverable ``WRITER_GONE``) and wait until ``/status`` takes that terminal."""
    with httpx.Client(base_url=handle.base, timeout=10) as client:
        started = client.post("/runs", json={"agent": "blocked", "input": None, "runId": run_id})
        assert started.status_code in (200, 201), started.text
        deadline = time.monotonic() + 10
        while client.get(f"/runs/{run_id}/status").json()["head"] < 1:
            assert time.monotonic() < deadline, "the agent emitted nothing"
            time.sleep(0.02)
        handle.call(lambda: handle.log.fail_stream(
            run_id, "the stream's writer is gone", error_detail=WRITER_GONE, recoverable=True))
        while (status := client.get(f"/runs/{run_id}/status").json())["status"] == "running":
            assert time.monotonic() < deadline, f"the run did not settle: {status}"
            time.sleep(0.02)
        assert status["status"] == "failed", status
