"""Several processes serving one log: ``streamwire serve --workers N`` (one port, N processes, each
with its own hubs) on SQLite and Redis, and the cross-process wake-up it relies on: a SQLite reader
parked in one process gets the ``end`` another process writes, also when a call of its own process
saw that commit first (issue 25: a run stopped through the process that is not running it)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import msgspec
import pytest

from helpers.runs_server import (
    AUTH,
    SRC,
    TESTS,
    Backend,
    backend,
    backend_flags,
    free_port,
    serve_cli,
)
from streamwire.cli._workers import WORKER_HEADER
from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame
from streamwire.log.sqlite import SQLiteLog
from streamwire.testing import read_n

pytestmark = pytest.mark.anyio
__all__ = ["backend"]


async def test_a_call_that_sees_another_connections_commit_wakes_the_parked_readers(
        tmp_path: Path) -> None:
    """The worker's watch is off (an hour); the only thing that can notice the other log's commit
    is this log's next transaction (here ``info``, in serve the stop polling the run's record).
    It used to take the change for itself and leave the reader asleep."""
    path = tmp_path / "log.db"
    async with (SQLiteLog(path) as other,
                SQLiteLog(path, poll_interval=3600, watch_interval=3600,
                          writer_timeout=3600) as here):
        await other.create_stream("s")
        await other.append("s", 0, b"1")
        frames = here.read("s", 0)
        try:
            assert await read_n(frames, 2) == [ChunkFrame(1, msgspec.Raw(b"1")), CaughtUpFrame(1)]

            async def end_then_look() -> None:
                await anyio.sleep(0.1)  # the reader is parked
                await other.end_stream("s", "interrupted")
                assert (await here.info("s")).status == "interrupted"

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(end_then_look)
                    assert await read_n(frames, 1) == [EndFrame("interrupted")]
        finally:
            await frames.aclose()  # type: ignore[attr-defined]



async def test_a_first_record_read_waits_for_another_processes_write_lock(tmp_path: Path) -> None:
    """The run records' table did not exist yet, so the first read created it inside a read
    transaction; while another process held the write lock SQLite refused that at once (SQLITE_BUSY,
    503 "the stream log failed" for every call in the same group, e.g. an SSE attach)."""
    path = tmp_path / "log.db"
    async with SQLiteLog(path) as log:
        await log.create_stream("s")  # the file and its connection are open
        other = sqlite3.connect(path, isolation_level=None)  # another process's connection
        try:
            other.execute("BEGIN IMMEDIATE")  # holds the write lock for a moment
            store = log.record_store("run")

            async def release() -> None:
                await anyio.sleep(0.3)
                other.execute("COMMIT")

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(release)
                    assert await store.get("r1") is None  # waited, did not fail
                    assert await store.running() == []
        finally:
            other.close()

# -- streamwire serve --workers 2 ----------------------------------------------------------------

AGENTS = ("--agent", "helpers.runs_agents:slow", "--agent", "helpers.runs_drain:steady")


@contextlib.contextmanager
def two_workers(backend: Backend, port: int, *extra: str,
                err: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``streamwire serve --workers 2`` on ``backend`` (stderr to ``err``), stopped with SIGKILL
    at exit if still running (a test that stops it checks the exit itself)."""
    with contextlib.ExitStack() as stack:
        stderr = stack.enter_context(open(err, "wb")) if err else subprocess.DEVNULL
        proc = stack.enter_context(serve_cli(
            *backend_flags(backend), "--workers", "2", "--log-level", "warning", *AGENTS, *extra,
            port=port, stderr=stderr, stop=signal.SIGKILL))
        try:
            yield proc
        finally:
            for pid in _children(proc.pid):  # SIGKILL of the parent leaves its workers to
                with contextlib.suppress(ProcessLookupError):  # their lifeline: don't wait
                    os.kill(pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def pinned(stack: contextlib.AsyncExitStack, base: str, pid: int | None = None, *,
                 not_pid: int | None = None) -> tuple[httpx.AsyncClient, int]:
    """A client (closed with ``stack``) whose one keep-alive connection is served by worker
    ``pid`` (any, else not ``not_pid``): new connections until the kernel hands one to it."""
    for _ in range(200):
        client = httpx.AsyncClient(base_url=base, headers=AUTH, timeout=30,
                                   limits=httpx.Limits(max_connections=1))
        got = int((await client.get("/healthz")).headers[WORKER_HEADER])
        if (pid is None or got == pid) and got != not_pid:
            stack.push_async_callback(client.aclose)
            return client, got
        await client.aclose()
    raise AssertionError(f"no connection reached worker {pid or f'other than {not_pid}'}")


async def events(client: httpx.AsyncClient, path: str, into: list[str]) -> None:
    """The event names of one SSE connection to ``path`` (``into``), until the server ends it."""
    async with client.stream("GET", path) as resp:
        assert resp.status_code == 200, (resp.status_code, await resp.aread())
        into.append(f"worker {resp.headers[WORKER_HEADER]}")
        into.extend([line.partition(":")[2].strip() async for line in resp.aiter_lines()
                     if line.startswith("event:")])


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_two_workers_spread_connections_and_share_streams_and_runs(
        backend: Backend, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (two_workers(backend, port, err=tmp_path / "serve.err") as proc,
          anyio.fail_after(60)):
        # connections spread over both processes (the kernel hashes each new one)
        seen = set()
        for _ in range(40):
            async with httpx.AsyncClient() as one:
                seen.add(int((await one.get(f"{base}/healthz")).headers[WORKER_HEADER]))
        assert len(seen) == 2, seen
        assert set(_children(proc.pid)) == seen  # the parent's own workers, not the parent
        async with contextlib.AsyncExitStack() as stack:
            a, pid_a = await pinned(stack, base)
            b, pid_b = await pinned(stack, base, not_pid=pid_a)
            a_reader, _ = await pinned(stack, base, pid_a)
            b_reader, _ = await pinned(stack, base, pid_b)
            # a stream written through A, read through B
            assert (await a.put("/streams/s1")).status_code in (200, 201)
            got: list[str] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(events, b_reader, "/streams/s1/sse", got)
                for i in range(3):
                    answer = await a.post("/streams/s1/chunks", json=[
                        {"step": 0, "chunk": {"event": "chunk", "data": {"chunk": f"w{i}"}}}])
                    assert answer.status_code == 200, answer.text
                    assert int(answer.headers[WORKER_HEADER]) == pid_a
                await a.post("/streams/s1/end", json={"status": "completed"})
            assert got[0] == f"worker {pid_b}"
            assert got.count("chunk") == 3
            assert got[-1] == "end"
            # a run started through A, stopped through B; readers on both get its end
            started = await a.post("/runs", json={"agent": "slow", "runId": "r1",
                                                  "input": {"pace": 0.05}})
            assert started.status_code == 201, started.text
            on_a: list[str] = []
            on_b: list[str] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(events, a_reader, "/runs/r1/sse", on_a)
                tg.start_soon(events, b_reader, "/runs/r1/sse", on_b)
                await anyio.sleep(0.5)
                stopped = await b.post("/runs/r1/stop")
                assert int(stopped.headers[WORKER_HEADER]) == pid_b
                assert stopped.json()["status"] == "interrupted", stopped.text
            for got in (on_a, on_b):
                assert "chunk" in got
                assert got[-1] == "end", got[-5:]
            assert on_a[0] == f"worker {pid_a}"
            assert on_b[0] == f"worker {pid_b}"
            assert (await a.get("/runs/r1/status")).json()["status"] == "interrupted"
            # the same run id started again through B is the same run: nothing new runs
            again = await b.post("/runs", json={"agent": "slow", "runId": "r1",
                                                    "input": {"pace": 0.05}})
            assert again.status_code == 200, again.text


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_sigterm_drains_both_workers_and_the_parent_exits_0(
        backend: Backend, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with two_workers(backend, port, "--drain-timeout", "20") as proc, anyio.fail_after(60):
        workers = _children(proc.pid)
        async with contextlib.AsyncExitStack() as stack:
            a, pid_a = await pinned(stack, base)
            b, pid_b = await pinned(stack, base, not_pid=pid_a)
            started = await a.post("/runs", json={"agent": "steady", "runId": "r2",
                                                  "input": {"seconds": 2, "pace": 0.1}})
            assert started.status_code == 201, started.text
            created = await b.put("/streams/s2")
            assert created.status_code in (200, 201), created.text
            run_events: list[str] = []
            stream_events: list[str] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(events, a, "/runs/r2/sse", run_events)
                tg.start_soon(events, b, "/streams/s2/sse", stream_events)
                await anyio.sleep(0.5)
                proc.send_signal(signal.SIGTERM)
            status = await anyio.to_thread.run_sync(proc.wait, 30)
    assert status == 0
    # A drained its run to its end; B, with no run, ended its open stream recoverably
    assert run_events[0] == f"worker {pid_a}"
    assert run_events[-1] == "end", run_events[-5:]
    assert run_events.count("chunk") >= 15  # the whole run: 2 s at 0.1 s a chunk
    assert stream_events == [f"worker {pid_b}", "caught-up", "fail"]
    assert sorted(workers) == sorted([pid_a, pid_b])
    assert not any(_alive(pid) for pid in workers)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_worker_answers_at_once_and_one_that_dies_is_logged_and_restarted(backend: Backend,
                                                          tmp_path: Path) -> None:
    port = free_port()
    err = tmp_path / "serve.err"
    with (two_workers(backend, port, "--loop", "asyncio", err=err) as proc,
          anyio.fail_after(60)):
        # a keep-alive request is answered at once: the workers' connections have TCP_NODELAY
        # (else each response waits 40 ms for the client's delayed ACK)
        async with httpx.AsyncClient() as one:
            took = []
            for _ in range(11):
                started = anyio.current_time()
                await one.get(f"http://127.0.0.1:{port}/healthz")
                took.append(anyio.current_time() - started)
        assert sorted(took)[5] < 0.02, took
        first = _children(proc.pid)
        os.kill(first[0], signal.SIGKILL)
        while len(now := _children(proc.pid)) < 2 or first[0] in now:  # noqa: ASYNC110
            await anyio.sleep(0.1)
        seen: set[int] = set()
        while len(seen) < 2:  # the new one serves (a connection may wait in its queue)
            async with httpx.AsyncClient(timeout=10) as one:
                answer = await one.get(f"http://127.0.0.1:{port}/healthz")
                seen.add(int(answer.headers[WORKER_HEADER]))
        assert seen == set(now)
        proc.send_signal(signal.SIGTERM)
        assert await anyio.to_thread.run_sync(proc.wait, 30) == 0
    said = err.read_text()
    assert f"(pid {first[0]}) died unexpectedly (status -9); restarting it" in said, said


def _serve_exits(*args: str, env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}", **(env or {})}
    return subprocess.run([sys.executable, "-m", "streamwire.cli", "serve", "--port",
                           str(free_port()), "--token", "t0ken", *args],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def test_workers_over_the_memory_log_are_refused_at_start() -> None:
    done = _serve_exits("--workers", "2", "--log", "memory")
    assert done.returncode == 2, done.stderr
    assert ("--workers 2 needs a log the processes share, and the memory log lives in one "
            "process: use --log sqlite:PATH (one host) or --log redis://HOST:PORT/DB"
            ) in done.stderr


def test_an_unusable_log_is_reported_once_before_any_worker_starts(tmp_path: Path) -> None:
    done = _serve_exits("--workers", "2", "--log", f"sqlite:{tmp_path}/missing/streams.db")
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("does not work") == 1, done.stderr
    assert "workers (pids" not in done.stderr


def test_a_worker_that_cannot_start_ends_the_server(tmp_path: Path) -> None:
    done = _serve_exits("--workers", "2", "--log", f"sqlite:{tmp_path}/streams.db",
                        "--agent", "helpers.workers_agents:hello",
                        env={"WORKERS_TEST_FAIL_IN_WORKER": "1"})
    assert done.returncode == 1, done.stderr
    assert "refuses to load in a worker" in done.stderr  # the worker's reason
    assert "before it served (it said why above); stopping the others" in done.stderr
