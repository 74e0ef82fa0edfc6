"""SIGTERM drains a real ``streamwire serve`` (issue 22, Deliver 4): starts answer 503 with
``Retry-After`` while a running run finishes and its reader reads it to its terminal, then the
process exits; a run longer than ``--drain-timeout`` fails ``WORKER_SHUTDOWN`` (recoverable)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import httpx
import pytest

from helpers.runs_drain import calls, frames, serve
from helpers.runs_server import AUTH, Backend, backend, free_port

pytestmark = pytest.mark.anyio
__all__ = ["backend"]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"], indirect=True)
async def test_sigterm_lets_a_running_run_finish_and_refuses_starts(
        backend: Backend, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    side = tmp_path / "calls.txt"
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
        with serve(backend, port=port, calls=side) as proc:
            answer = await client.post(f"{base}/runs", json={
                "agent": "steady", "runId": "r1", "input": {"seconds": 4, "pace": 0.1}})
            assert answer.status_code == 201, answer.text
            got: list[tuple[str, object]] = []

            async def read() -> None:
                got.extend(await frames(client, base, "r1"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await anyio.sleep(1.0)
                proc.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                await anyio.sleep(0.3)
                refused = await client.post(f"{base}/runs", json={"agent": "steady",
                                                                  "runId": "r2"})
                chat = await client.post(f"{base}/api/chat", json={
                    "id": "c1", "trigger": "submit-message", "messages": [
                        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
                repeat = await client.post(f"{base}/runs", json={
                    "agent": "steady", "runId": "r1", "input": {"seconds": 4, "pace": 0.1}})
            finished_in = time.monotonic() - signalled
            await anyio.to_thread.run_sync(proc.wait, 15)
            exited_in = time.monotonic() - signalled
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"]
    assert "shutting down" in refused.json()["error"]
    assert chat.status_code == 503, chat.text
    assert chat.headers["retry-after"]
    assert repeat.status_code == 200  # a repeat of a start gets its run during the drain
    events = [event for event, _ in got]
    assert events.count("end") == 1, got[-3:]
    assert events[-1] == "end", got[-3:]
    assert got[-1][1]["status"] == "completed"
    assert events.count("chunk") == 40
    assert 2.0 < finished_in < 6.0, finished_in
    assert proc.returncode == 0
    assert exited_in < finished_in + 5, (finished_in, exited_in)
    assert [line[:2] for line in calls(side)] == [["r1", "1"]]
    print(f"run finished {finished_in:.2f} s after SIGTERM; exit after {exited_in:.2f} s")


@pytest.mark.parametrize("backend", ["memory", "redis"], indirect=True)
async def test_a_run_longer_than_the_drain_timeout_fails_worker_shutdown(
        backend: Backend, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
        with serve(backend, port=port, calls=tmp_path / "calls.txt",
                   extra=("--drain-timeout", "1")) as proc:
            answer = await client.post(f"{base}/runs", json={
                "agent": "steady", "runId": "r1", "input": {"seconds": 30}})
            assert answer.status_code == 201, answer.text
            got: list[tuple[str, object]] = []

            async def read() -> None:
                got.extend(await frames(client, base, "r1"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await anyio.sleep(1.0)
                proc.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
            ended_in = time.monotonic() - signalled
            await anyio.to_thread.run_sync(proc.wait, 15)
            exited_in = time.monotonic() - signalled
    event, data = got[-1]
    assert event == "fail", got[-3:]
    assert isinstance(data, dict)
    assert data["errorDetail"] == {"code": "WORKER_SHUTDOWN"}
    assert data["recoverable"] is True
    assert 0.9 < ended_in < 4, ended_in
    assert exited_in < 8, exited_in
    assert proc.returncode == 0
