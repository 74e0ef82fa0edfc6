"""One liveness fact per run, stop grace and run timeouts (issue 22, Deliver 2), over real sockets
(uvicorn in a thread) on memory, SQLite and Redis, and across real ``streamwire serve`` processes:

* a run's lease keeps its stream's writer alive: an agent silent for 8 s under ``writer_timeout=2``
  completes, and a reader attached meanwhile gets heartbeats, the chunks before and after and one
  ``end{completed}``;
* on worker loss the stream's terminal and ``/status`` agree (``WORKER_LOST`` when the run's lease
  lapses first, the default; ``WRITER_GONE`` on both when the log's writer timeout fires first);
* an agent that swallows its cancellation ends ``interrupted`` ``stop_grace`` seconds after a stop
  and is abandoned; the service serves on and shuts down without waiting for it;
* ``run_timeout`` (the service's, or an agent's own) fails a run ``TIMEOUT``, stream and status
  alike."""

from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from helpers import runs_agents as agents
from helpers import runs_liveness as live
from helpers.runs_server import AUTH, Backend, backend, free_port, serving
from helpers.server import Item, log_backend, sse
from streamwire.frames import ChunkFrame, EndFrame, FailFrame

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

ALL = [*live.AGENTS, agents.echo]
#: What ``app_options`` every server here gets: open writes, a heartbeat every half second.
APP = {"allow_anonymous_writes": True, "heartbeat_interval": 0.5}


async def _start(client: httpx.AsyncClient, agent: str, run_id: str, input: Any = None) -> None:
    answer = await client.post("/runs", json={"agent": agent, "runId": run_id, "input": input})
    assert answer.status_code == 201, answer.text


async def _read(client: httpx.AsyncClient, run_id: str, limit: float = 20
                ) -> tuple[list[Item], float]:
    """Every frame and comment of one connection to the run's stream (from the start) until the
    server closes it, and how long that took."""
    began = time.monotonic()
    with anyio.fail_after(limit):
        async with sse(client, run_id, cursor=0) as (resp, items):
            assert resp.status_code == 200
            got = [item async for item in items]
    return got, time.monotonic() - began


def _words(items: list[Item]) -> list[str]:
    return [json.loads(bytes(f.chunk))["data"]["chunk"] for f in items
            if isinstance(f, ChunkFrame)]


def _terminal(items: list[Item]) -> EndFrame | FailFrame:
    (terminal,) = [f for f in items if isinstance(f, EndFrame | FailFrame)]
    return terminal


async def _first_chunk(client: httpx.AsyncClient, run_id: str) -> None:
    with anyio.fail_after(10):
        async with sse(client, run_id, cursor=0) as (_, items):
            async for item in items:
                if isinstance(item, ChunkFrame):
                    return


async def _status(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    answer = await client.get(f"/runs/{run_id}/status")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def _settled(client: httpx.AsyncClient, run_id: str, limit: float = 15) -> dict[str, Any]:
    with anyio.fail_after(limit):
        while (status := await _status(client, run_id))["status"] == "running":  # noqa: ASYNC110
            await anyio.sleep(0.05)
    return status


def _agree(terminal: EndFrame | FailFrame, status: dict[str, Any], code: str) -> None:
    """The stream's fail and ``/status`` carry the same code and recoverability."""
    assert isinstance(terminal, FailFrame), terminal
    assert status["status"] == "failed", status
    assert terminal.error_detail == status["errorDetail"] == {"code": code}, (terminal, status)
    assert terminal.recoverable is status["recoverable"]


async def test_a_quiet_agent_keeps_its_stream_for_as_long_as_its_run(backend: Backend) -> None:
    factory = live.with_writer_timeout(backend, 2)
    with serving(factory, ALL, app_options=APP) as srv:
        assert srv.runs.keepalive_interval <= 2 / 3
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            began = time.monotonic()
            await _start(client, "quiet", "q", {"silence": 8})
            await _first_chunk(client, "q")
            await anyio.sleep(3)  # past the writer timeout already: a reader attaches now
            items, _ = await _read(client, "q")
            took = time.monotonic() - began
            status = await _status(client, "q")
    assert _words(items) == ["before ", "after"]
    terminal = _terminal(items)
    assert isinstance(terminal, EndFrame), terminal
    assert terminal.status == "completed"
    assert terminal.output == {"text": "before after"}
    assert status["status"] == "completed"
    heartbeats = [item for item in items if isinstance(item, str)]
    assert len(heartbeats) >= 5, heartbeats  # about every 0.5 s for the 5 s left of silence
    assert 8 <= took < 12, took
    print(f"\n{backend.kind}: a run silent 8 s under writer_timeout=2 completed in {took:.2f} s "
          f"({len(heartbeats)} heartbeats)")


async def test_a_tool_silent_for_a_minute_under_a_2_s_writer_timeout(tmp_path: Path) -> None:
    """The issue's case as it stands: a tool call silent for 60 s under ``writer_timeout=2``, on
    memory, SQLite and Redis at once (one minute in all): each run completes, and a reader that
    attached in the middle of the silence gets both chunks, heartbeats and one ``end``."""
    done: dict[str, tuple[list[Item], dict[str, Any]]] = {}

    async def one(kind: str) -> None:
        (tmp_path / kind).mkdir()
        with log_backend(kind, tmp_path / kind, "minute") as made, \
                serving(live.with_writer_timeout(made, 2), ALL, app_options=APP) as srv:
            async with httpx.AsyncClient(base_url=srv.base, timeout=90) as client:
                await _start(client, "quiet", "minute", {"silence": 60})
                await _first_chunk(client, "minute")
                await anyio.sleep(20)  # ten writer timeouts into the silence
                items, _ = await _read(client, "minute", limit=75)
                done[kind] = (items, await _status(client, "minute"))

    async with anyio.create_task_group() as tasks:
        for kind in ("memory", "sqlite", "redis"):
            tasks.start_soon(one, kind)
    for kind, (items, status) in done.items():
        assert _words(items) == ["before ", "after"], kind
        terminal = _terminal(items)
        assert isinstance(terminal, EndFrame), (kind, terminal)
        assert terminal.status == "completed", kind
        assert status["status"] == "completed", (kind, status)
        assert len([item for item in items if isinstance(item, str)]) >= 60, kind
    assert sorted(done) == ["memory", "redis", "sqlite"]


@pytest.mark.parametrize("order", ["lease-first", "writer-first"])
async def test_a_lost_worker_ends_stream_and_status_alike(backend: Backend, order: str) -> None:
    """Worker loss, simulated: the service stops tending the run (no lease renewal, no keepalive),
    as a dead process would; its sweeper settles it like another process's would."""
    factory = live.with_writer_timeout(backend, 2)
    options: dict[str, Any] = {} if order == "lease-first" else {"lease_time": 4.0}
    code = "WORKER_LOST" if order == "lease-first" else "WRITER_GONE"
    with serving(factory, ALL, app_options=APP, **options) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await _start(client, "quiet", "lost", {"silence": 30})
            await _first_chunk(client, "lost")
            srv.runs._local.pop("lost")  # the worker is gone
            lost_at = time.monotonic()
            items, _ = await _read(client, "lost")
            status = await _settled(client, "lost")
            took = time.monotonic() - lost_at
    _agree(_terminal(items), status, code)
    assert status["recoverable"] is True
    assert took < (3 if order == "lease-first" else 4), took
    print(f"\n{backend.kind} {order}: {code} on stream and status {took:.2f} s after the loss")


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_sigkill_of_the_worker_gives_stream_and_status_one_code(backend: Backend) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with live.serve_process(backend, "helpers.runs_liveness:quiet", port=port,
                            writer_timeout=2, lease=1.0) as first:
        async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as client:
            await _start(client, "quiet", "killed", {"silence": 30})
            await _first_chunk(client, "killed")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed_at = time.monotonic()
    with live.serve_process(backend, "helpers.runs_liveness:quiet", port=port,
                            writer_timeout=2, lease=1.0):
        async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30) as client:
            status = await _settled(client, "killed")
            took = time.monotonic() - killed_at
            items, _ = await _read(client, "killed")
    _agree(_terminal(items), status, "WORKER_LOST")
    assert status["recoverable"] is True
    print(f"\n{backend.kind}: WORKER_LOST on stream and status {took:.2f} s after SIGKILL")


async def test_an_agent_that_swallows_its_cancellation_is_abandoned(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="streamwire.runs")
    with serving(backend.factory, ALL, app_options=APP, stop_grace=1.0) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await _start(client, "swallower", "stuck")
            await _first_chunk(client, "stuck")
            began = time.monotonic()
            stopped = (await client.post("/runs/stuck/stop")).json()
            took = time.monotonic() - began
            assert stopped["status"] == "interrupted", stopped
            items, _ = await _read(client, "stuck")
            terminal = _terminal(items)
            assert isinstance(terminal, EndFrame)
            assert terminal.status == "interrupted"
            assert srv.runs.abandoned == 1
            # the service serves on
            await _start(client, "echo", "after", {"text": "still here"})
            items, _ = await _read(client, "after")
            assert _words(items) == ["still ", "here "]
            assert (await _status(client, "after"))["status"] == "completed"
            # and a shutdown does not wait for a stuck agent longer than its grace
            await _start(client, "swallower", "stuck-at-exit")
            await _first_chunk(client, "stuck-at-exit")
            exit_began = time.monotonic()
    exit_took = time.monotonic() - exit_began
    assert 1 <= took < 2.5, took
    assert exit_took < 5, exit_took
    assert srv.runs.abandoned == 2
    reported = [r.getMessage() for r in caplog.records if "abandoned" in r.getMessage()]
    assert len(reported) == 2, reported
    assert "run stuck: agent 'swallower' ignored its cancellation (stop)" in reported[0]
    print(f"\n{backend.kind}: stop -> interrupted in {took:.2f} s (stop_grace=1); "
          f"shutdown with a stuck agent took {exit_took:.2f} s")


async def test_a_run_that_outlives_its_timeout_fails_timeout(backend: Backend) -> None:
    with serving(backend.factory, ALL, app_options=APP, run_timeout=1.0) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            took: dict[str, float] = {}
            for agent, run_id in (("lingers", "slow"), ("hasty", "own-timeout")):
                began = time.monotonic()
                await _start(client, agent, run_id)
                items, _ = await _read(client, run_id)
                took[run_id] = time.monotonic() - began
                status = await _status(client, run_id)
                assert _words(items) == ["before "]
                _agree(_terminal(items), status, "TIMEOUT")
                assert status["recoverable"] is False
            await _start(client, "echo", "quick", {"text": "in time"})
            items, _ = await _read(client, "quick")
            assert isinstance(_terminal(items), EndFrame)
    assert 1 <= took["slow"] < 2, took
    assert 0.5 <= took["own-timeout"] < 1.5, took
    print(f"\n{backend.kind}: run_timeout=1 -> TIMEOUT in {took['slow']:.2f} s; "
          f"an agent's own 0.5 s in {took['own-timeout']:.2f} s")


def test_options_are_checked() -> None:
    from streamwire.errors import UsageError
    from streamwire.log.memory import MemoryLog
    from streamwire.runs import Runs, agent_options

    log = MemoryLog(writer_timeout=30)
    runs = Runs(log, ALL)
    assert runs.lease_time == 15  # half the writer timeout: it lapses first
    assert runs.keepalive_interval == 5
    assert (runs.stop_grace, runs.run_timeout) == (5.0, None)
    assert Runs(log, ALL, lease_time=60).keepalive_interval == 10
    for bad in ({"stop_grace": -1}, {"run_timeout": 0}, {"run_timeout": "5"}):
        with pytest.raises(UsageError):
            Runs(log, ALL, **bad)
    with pytest.raises(UsageError):
        agent_options(run_timeout=-1)


def test_a_settled_record_is_corrected_to_its_streams_terminal() -> None:
    from streamwire.errors import RunStateError
    from streamwire.runs._record import agreeing, new_record, settled

    running = new_record("r", "quiet", None, owner="w", now=1.0, lease=1.0)
    lost = settled(running, "failed", now=2.0, head=3, error="lost", recoverable=True,
                   error_detail={"code": "WORKER_LOST"})
    gone = agreeing(lost, "failed", now=3.0, head=3, error="gone", recoverable=True,
                    error_detail={"code": "WRITER_GONE"})
    assert (gone.version, gone.error_detail, gone.status) == (
        lost.version + 1, {"code": "WRITER_GONE"}, "failed")
    assert agreeing(gone, "failed", now=4.0, head=3, error="gone", recoverable=True,
                    error_detail={"code": "WRITER_GONE"}) is gone
    with pytest.raises(RunStateError):
        agreeing(running, "failed", now=4.0, head=3)
