"""Runs across real ``streamwire serve`` processes: a SIGKILL of the worker running the agent is
recovered by the dispatcher through ``/status`` (``WORKER_LOST``, recoverable) within the lease, on
SQLite and Redis; a run started on one process is followed and stopped from another (the stop
reaches the worker through the store)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import httpx
import pytest

from helpers.runs_server import AUTH, Backend, backend, free_port, serve_process
from streamwire.client import AsyncDispatcher, RetryPolicy
from streamwire.frames import RemoteOutcomeKind

pytestmark = pytest.mark.anyio
__all__ = ["backend"]

LEASE = 2.0
FAST = RetryPolicy(backoff_initial=0.05, backoff_max=0.2, max_attempts=3)


def _calls(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_sigkill_of_the_worker_is_recovered_through_status(
        backend: Backend, tmp_path: Path) -> None:
    port = free_port()
    calls = tmp_path / "calls.txt"
    async with httpx.AsyncClient() as client:
        d = AsyncDispatcher(client, f"http://127.0.0.1:{port}", headers=AUTH, retry=FAST,
                            poll_interval=0.1, recover_timeout=30)
        with serve_process(backend, ["helpers.runs_agents:slow"], port=port, lease=LEASE,
                           calls=calls) as first:
            run = await d.start("slow", {"pace": 0.05, "n": 2000})
            got = 0
            iterator = run.__aiter__()
            while got < 10:
                await iterator.__anext__()
                got += 1
            first.send_signal(signal.SIGKILL)  # a crash: no terminal, no lease release
            first.wait(10)
            killed_at = time.monotonic()
        # the same port, the same backend: a restarted (or another) server process
        with serve_process(backend, ["helpers.runs_agents:slow"], port=port, lease=LEASE,
                           calls=calls):
            with anyio.fail_after(30):
                async for _ in iterator:
                    got += 1
            settled_in = time.monotonic() - killed_at
            status = await d.status(run.run_id)
    outcome = run.outcome
    assert outcome is not None
    assert outcome.kind is RemoteOutcomeKind.RETRY
    assert outcome.recoverable is True
    assert outcome.error_detail == {"code": "WORKER_LOST"}
    assert outcome.source == "status"
    assert status["status"] == "failed"
    assert status["errorDetail"] == {"code": "WORKER_LOST"}
    assert status["recoverable"] is True
    # within the lease (plus the restart, one poll and one sweep)
    assert settled_in < LEASE + 8, settled_in
    assert len(_calls(calls)) == 1  # never re-run behind the caller's back


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_start_on_one_process_follow_and_stop_from_another(
        backend: Backend, tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    port_a, port_b = free_port(), free_port()
    agent = ["helpers.runs_agents:slow"]
    with (serve_process(backend, agent, port=port_a, calls=calls),
          serve_process(backend, agent, port=port_b, calls=calls)):
        async with httpx.AsyncClient() as client:
            a = AsyncDispatcher(client, f"http://127.0.0.1:{port_a}", headers=AUTH, retry=FAST)
            b = AsyncDispatcher(client, f"http://127.0.0.1:{port_b}", headers=AUTH, retry=FAST)
            started = await a.start("slow", {"pace": 0.03})
            followed = b.follow(started.run_id)
            got = 0
            async for _ in followed:
                got += 1
                if got == 8:
                    stopped = await b.stop(started.run_id)
                    assert stopped["status"] == "interrupted"
            assert followed.outcome is not None
            assert followed.outcome.kind is RemoteOutcomeKind.STOPPED
            assert followed.outcome.status == "interrupted"
            assert (await a.status(started.run_id))["status"] == "interrupted"
            # the start, repeated on B, is the same run (200) and runs nothing
            again = await b.start("slow", {"pace": 0.03}, run_id=started.run_id)
            assert again.created is False
    assert len(_calls(calls)) == 1


@pytest.mark.parametrize("backend", ["memory"], indirect=True)
def test_serve_agent_demo_and_the_run_command(backend: Backend) -> None:
    import json
    import subprocess
    import sys

    from helpers.runs_server import SRC, TESTS
    from streamwire.runs.demo_agent import demo_reply

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"PYTHONPATH": f"{SRC}:{TESTS}", "STREAMWIRE_TOKEN": "t0ken", "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "streamwire.cli", "run", url, *args],
                              capture_output=True, text=True, timeout=60, env=env, check=False)

    with serve_process(backend, ["demo"], port=port):
        done = run("demo", "--input", '{"prompt": "hello", "pace": 0}', "--run-id", "cli-1")
        assert done.returncode == 0, done.stderr
        text, _, last = done.stdout.rstrip("\n").rpartition("\n")
        assert text.strip() == "".join(demo_reply("hello"))  # same prompt, same reply
        assert last == "[run cli-1: completed]"
        assert len("".join(demo_reply("hello")).split()) == 300
        status = json.loads(run("--status", "cli-1").stdout)
        assert status["status"] == "completed"
        assert status["usage"]["outputTokens"] == 300
        failed = run("demo", "--input", '{"prompt": "please /fail", "pace": 0}')
        assert failed.returncode == 1
        assert "failed [AGENT_ERROR]: the agent failed" in failed.stdout
        paused = run("demo", "--input", '{"prompt": "/pause here", "pace": 0}',
                     "--run-id", "cli-p")
        assert paused.returncode == 3
        assert "[run cli-p: stopped (paused)]" in paused.stdout
        resumed = httpx.post(f"{url}/runs/cli-p/resume", headers=AUTH,
                             json={"resumeId": "r1", "input": {"prompt": "go on"}})
        assert resumed.status_code == 200, resumed.text
        whole = run("--follow", "cli-p")
        assert whole.returncode == 0, whole.stderr
        assert whole.stdout.startswith("".join(demo_reply("/pause here"))[:200])
        assert whole.stdout.rstrip().endswith("[run cli-p: completed]")
        assert "".join(demo_reply("/pause here")) in whole.stdout
        assert run("--status", "nope").returncode == 1
