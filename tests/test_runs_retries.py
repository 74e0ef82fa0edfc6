"""``--run-retries`` across real ``streamwire serve`` processes sharing a log (issue 22,
Deliver 4): a run whose worker is SIGKILLed, or shut down past ``--drain-timeout``, is run again
by the other process with ``attempt`` 2, on a restarted stream that ends with one terminal."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from helpers.runs_drain import calls, frames, serve
from helpers.runs_server import AUTH, Backend, backend, free_port

pytestmark = pytest.mark.anyio
__all__ = ["backend"]

RETRY = ("--run-retries", "1")


async def _status_until(client: httpx.AsyncClient, base: str, run_id: str, done: Any,
                        limit: float = 15) -> dict[str, Any]:
    """Poll ``/status`` until ``done(body)``."""
    with anyio.fail_after(limit):
        while True:
            body: dict[str, Any] = (await client.get(f"{base}/runs/{run_id}/status")).json()
            if done(body):
                return body
            await anyio.sleep(0.05)


async def _first_chunks(client: httpx.AsyncClient, base: str, run_id: str) -> None:
    await _status_until(client, base, run_id, lambda body: body["head"] >= 5, 10)


def _check_rerun(got: list[tuple[str, Any]], status: dict[str, Any], side: Path, *,
                 pids: tuple[int, int], reason: str) -> None:
    events = [event for event, _ in got]
    assert events.count("end") == 1, got[-3:]
    assert events.count("fail") == 0, got[-3:]
    assert events[-1] == "end"
    assert got[-1][1]["status"] == "completed"
    assert got[-1][1]["output"] == {"attempt": 2, "pid": pids[1]}
    assert status["status"] == "completed"
    assert status["attempt"] == 2
    assert status["retryReason"] == reason
    lines = calls(side)
    assert [(attempt, int(pid)) for _, attempt, pid in lines] == [("1", pids[0]), ("2", pids[1])]


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_sigkill_of_one_of_two_servers_reruns_the_run_on_the_other(
        backend: Backend, tmp_path: Path) -> None:
    port_a, port_b = free_port(), free_port()
    a, b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
    side = tmp_path / "calls.txt"
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
        with (serve(backend, port=port_a, calls=side, extra=RETRY) as first,
              serve(backend, port=port_b, calls=side, extra=RETRY) as second):
            answer = await client.post(f"{a}/runs", json={
                "agent": "steady", "runId": "r1", "input": {"seconds": 3, "pace": 0.1}})
            assert answer.status_code == 201, answer.text
            live: list[tuple[str, Any]] = []

            async def read_live() -> None:  # attached to the survivor through the restart
                live.extend(await frames(client, b, "r1"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(read_live)
                await _first_chunks(client, a, "r1")
                first.send_signal(signal.SIGKILL)
                killed = time.monotonic()
            done_in = time.monotonic() - killed
            got = await frames(client, b, "r1")  # the whole stream, from the start
            status = (await client.get(f"{b}/runs/r1/status")).json()
    _check_rerun(got, status, side, pids=(first.pid, second.pid), reason="WORKER_LOST")
    assert [event for event, _ in got].count("chunk") == 30  # only the second attempt's
    live_events = [event for event, _ in live]
    assert live_events.count("end") == 1
    assert live_events[-1] == "end"
    assert 3 < done_in < 3 + 2 + 4, done_in  # the run (3 s) + the lease (2 s) + a sweep or two
    print(f"SIGKILL -> completed on the other process in {done_in:.2f} s")


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_sigterm_past_the_drain_timeout_reruns_the_run_on_the_other(
        backend: Backend, tmp_path: Path) -> None:
    port_a, port_b = free_port(), free_port()
    a, b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
    side = tmp_path / "calls.txt"
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
        with (serve(backend, port=port_a, calls=side,
                    extra=(*RETRY, "--drain-timeout", "1")) as first,
              serve(backend, port=port_b, calls=side, extra=RETRY) as second):
            answer = await client.post(f"{a}/runs", json={
                "agent": "steady", "runId": "r1", "input": {"seconds": 3, "pace": 0.1}})
            assert answer.status_code == 201, answer.text
            on_a: list[tuple[str, Any]] = []

            async def read_a() -> None:
                on_a.extend(await frames(client, a, "r1"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(read_a)
                await _first_chunks(client, a, "r1")
                first.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
            cut_in = time.monotonic() - signalled
            await anyio.to_thread.run_sync(first.wait, 15)
            exited_in = time.monotonic() - signalled
            await _status_until(client, b, "r1", lambda body: body["status"] != "running")
            done_in = time.monotonic() - signalled
            got = await frames(client, b, "r1")
            status = (await client.get(f"{b}/runs/r1/status")).json()
    # the reader on the draining process is told to re-attach (no terminal is stored)
    assert on_a[-1][0] == "fail", on_a[-2:]
    assert on_a[-1][1]["errorDetail"] == {"code": "SERVER_SHUTDOWN"}
    assert on_a[-1][1]["recoverable"] is True
    assert 0.9 < cut_in < 4, cut_in
    assert first.returncode == 0
    _check_rerun(got, status, side, pids=(first.pid, second.pid), reason="WORKER_SHUTDOWN")
    print(f"SIGTERM: reader cut {cut_in:.2f} s, exit {exited_in:.2f} s, "
          f"completed on the other {done_in:.2f} s after the signal")
