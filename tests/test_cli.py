"""``streamwire serve`` and the app factory as real server processes: uvicorn (ours and plain) and
granian, each stopped with SIGTERM while streams are open."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import streamwire
from conftest import REDIS_URL, purge_redis_keys, require, require_redis
from helpers.processes import Proc, frames_until_close, free_port, process, wait_up
from streamwire.cli import main
from streamwire.cli.serve import YOUNG_THRESHOLD
from streamwire.frames import CaughtUpFrame, ChunkFrame, FailFrame

pytestmark = pytest.mark.anyio

BIN = Path(sys.executable).parent
TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: The tree under test (for PYTHONPATH in a folder of its own).
SRC = Path(streamwire.__file__).resolve().parents[1]


async def check_sigterm_drains(proc: Proc, base: str, *, grace: float = 5.0,
                               expect_codes: tuple[int, ...] = (0,)) -> None:
    """Open a reader, SIGTERM the server: the reader gets the recoverable shutdown ``fail`` and
    the body closes; the process exits 0 within the grace period."""
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        assert (await client.put("/streams/live", headers=AUTH)).status_code == 200
        sequences = (await client.post("/streams/live/chunks", headers=AUTH,
                                       json=[{"step": 0, "chunk": "hi"}])).json()["sequences"]
        assert sequences == [1]
        frames: list[Any] = []
        async with client.stream("GET", "/streams/live/sse") as resp:
            assert resp.status_code == 200
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(frames_until_close, resp, frames)
                    while len(frames) < 2:  # noqa: ASYNC110 (chunk and caught-up: now live)
                        await anyio.sleep(0.01)
                    started = time.monotonic()
                    proc.popen.send_signal(signal.SIGTERM)
    assert isinstance(frames[0], ChunkFrame)
    assert frames[1] == CaughtUpFrame(head=1)
    assert len(frames) == 3
    assert isinstance(frames[2], FailFrame)
    assert frames[2].recoverable is True
    assert frames[2].error_detail == {"code": "SERVER_SHUTDOWN"}
    code = await anyio.to_thread.run_sync(proc.popen.wait, 15)
    assert code in expect_codes
    assert time.monotonic() - started < grace


async def test_serve_protects_writes_logs_connections_and_drains_on_sigterm() -> None:
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0", "--token", TOKEN,
            "--grace", "3"]
    with process(argv) as proc:
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        async with httpx.AsyncClient(base_url=base) as client:
            refused = await client.put("/streams/x")
            assert refused.status_code == 401
            wrong = await client.put("/streams/x", headers={"Authorization": "Bearer no"})
            assert wrong.status_code == 403
            assert (await client.get("/streams/x/info")).status_code == 404  # reads are open
        await check_sigterm_drains(proc, base, grace=3.0)
        proc.wait_line(r"sse open stream=live cursor=0 peer=127\.0\.0\.1:\d+")
        proc.wait_line(r"sse close stream=live .* outcome=shutdown")


async def test_serve_without_a_token_generates_and_prints_one() -> None:
    env = {k: v for k, v in os.environ.items() if k != "STREAMWIRE_TOKEN"}
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0"]
    proc = Proc(argv, env)
    try:
        token = proc.wait_line(r"Authorization: Bearer (\S+)").group(1)
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        async with httpx.AsyncClient(base_url=base) as client:
            assert (await client.put("/streams/y")).status_code == 401
            ok = await client.put("/streams/y", headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200
    finally:
        assert proc.stop() == 0


#: An agent module of a user's project, in its own folder (no package, nothing installed).
AGENT_MODULE = """\
from streamwire.chat import Chat
from streamwire.runs import Completed, RunContext


async def fn(run: RunContext[Chat]) -> Completed:
    await run.emit(Chat.chunk({"chunk": "hello from mymod"}))
    return Completed(output={"from": "mymod"})
"""


async def test_serve_agent_finds_the_module_in_the_folder_it_runs_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # as uvicorn finds an app: `streamwire serve --agent mymod:fn` run in mymod.py's folder, by
    # the console script (its sys.path starts at its own bin/, not at the current directory),
    # with PYTHONPATH naming the tree under test only
    from streamwire.chat import Chat
    from streamwire.client import AsyncDispatcher
    from streamwire.frames import ChunkCodec, RemoteOutcomeKind

    script = BIN / "streamwire"
    require(script.exists(), f"needs the console script {script} (pip install -e .)")
    (tmp_path / "mymod.py").write_text(AGENT_MODULE)
    monkeypatch.chdir(tmp_path)
    argv = [str(script), "serve", "--port", "0", "--token", TOKEN, "--agent", "mymod:fn"]
    with process(argv, {"PYTHONPATH": str(SRC)}) as proc:
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        async with httpx.AsyncClient(timeout=10) as client:
            dispatcher = AsyncDispatcher(client, base, decode=ChunkCodec(Chat).decode,
                                         headers=AUTH)
            run = await dispatcher.start("fn", {})
            with anyio.fail_after(15):
                texts = [msg.data for msg in [m async for m in run] if msg is not None]
    assert texts == [{"chunk": "hello from mymod"}]
    assert run.outcome is not None
    assert run.outcome.kind is RemoteOutcomeKind.COMPLETED


def test_serve_refuses_an_unknown_log(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--log", "postgres://x"]) == 2
    assert "--log must be memory, sqlite:PATH or redis://HOST:PORT/DB" in capsys.readouterr().err
    assert main([]) == 2


async def test_serve_sqlite_keeps_streams_across_restarts(tmp_path: Path) -> None:
    require(importlib.util.find_spec("streamwire.log.sqlite") is not None,
            "streamwire.log.sqlite is not there yet")
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0", "--token", TOKEN,
            "--log", f"sqlite:{tmp_path / 'streams.db'}"]
    with process(argv) as proc:
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        async with httpx.AsyncClient(base_url=base) as client:
            await client.put("/streams/kept", headers=AUTH)
            await client.post("/streams/kept/chunks", headers=AUTH,
                              json=[{"step": 0, "chunk": i} for i in range(3)])
            await client.post("/streams/kept/end", headers=AUTH, json={"status": "completed"})
    with process(argv) as proc:
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        async with httpx.AsyncClient(base_url=base) as client:
            info = (await client.get("/streams/kept/info")).json()
            assert (info["head"], info["status"]) == (3, "completed")


async def test_serve_redis() -> None:
    require(importlib.util.find_spec("streamwire.log.redis") is not None,
            "needs streamwire.log.redis")
    require_redis()
    prefix = f"swtest-cli-{uuid.uuid4().hex[:12]}"
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0", "--token", TOKEN,
            "--log", REDIS_URL, "--redis-prefix", prefix]
    try:
        with process(argv) as proc:
            base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
            await check_sigterm_drains(proc, base)
    finally:
        purge_redis_keys(f"{prefix}:")


async def test_plain_uvicorn_with_the_app_factory_drains_on_sigterm() -> None:
    port = free_port()
    argv = [str(BIN / "uvicorn"), "--factory", "streamwire.cli:app_from_env",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    with process(argv, {"STREAMWIRE_TOKEN": TOKEN}) as proc:
        base = f"http://127.0.0.1:{port}"
        await wait_up(base)
        # after its graceful shutdown uvicorn re-raises SIGTERM to die of it (exit -15)
        await check_sigterm_drains(proc, base, expect_codes=(-signal.SIGTERM,))


async def test_granian_drains_on_sigterm() -> None:
    port = free_port()
    argv = [str(BIN / "granian"), "--interface", "asgi", "--factory", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1", "streamwire.cli:app_from_env"]
    with process(argv, {"STREAMWIRE_TOKEN": TOKEN}) as proc:
        base = f"http://127.0.0.1:{port}"
        await wait_up(base)
        await check_sigterm_drains(proc, base)


@pytest.mark.parametrize("command", ["demo", "tail"])
def test_demo_and_tail_are_dispatched(command: str) -> None:
    module = {"demo": "streamwire.cli.demo", "tail": "streamwire.cli.tail"}[command]
    require(importlib.util.find_spec(module) is not None, f"{module} is not there yet")
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0


@pytest.mark.parametrize("spec", ["sqlite:/nonexistent/dir/x.db", "redis://127.0.0.1:6390/0"])
def test_serve_fails_fast_on_a_log_it_cannot_use(spec: str) -> None:
    if spec.startswith("redis"):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", 6390)) != 0, "something listens on 6390"
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0", "--token", TOKEN,
            "--log", spec]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1
    assert time.monotonic() - started < 15
    err = done.stderr
    assert f"--log {spec} does not work" in err
    assert "running on" not in err
    assert ("check that its directory exists" if spec.startswith("sqlite") else
            "cannot reach Redis at redis://127.0.0.1:6390/0") in err


async def test_serve_says_which_log_where_and_who_may_write(tmp_path: Path) -> None:
    db = tmp_path / "streams.db"
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0", "--token", TOKEN,
            "--log", f"sqlite:{db}", "--protect-reads"]
    with process(argv) as proc:
        proc.wait_line(r"running on http://127\.0\.0\.1:\d+")
        proc.wait_line(rf"streamwire serve: log: SQLite file {re.escape(str(db))}$")
        proc.wait_line(r"writes: need the bearer token \(--token\); reads: need the token too")
    env = {k: v for k, v in os.environ.items() if k != "STREAMWIRE_TOKEN"}
    with process([sys.executable, "-m", "streamwire.cli", "serve", "--port", "0"], env) as proc:
        proc.wait_line(r"running on http://127\.0\.0\.1:\d+")
        proc.wait_line(r"log: memory \(this process only")
        proc.wait_line(r"writes: need the bearer token \(generated, printed above\); reads: open")


def _python_c(prelude: str, *args: str) -> list[str]:
    """``python -c`` running ``prelude`` and then ``streamwire`` with ``args``."""
    code = f"import sys\n{prelude}\nfrom streamwire.cli import main\nsys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, *args]


#: Makes ``import uvloop`` fail, as where it is not installed.
NO_UVLOOP = "sys.modules['uvloop'] = None"


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_serve_runs_on_the_loop_asked_for_and_drains_on_it(loop: str) -> None:
    if loop == "uvloop":
        require(importlib.util.find_spec("uvloop") is not None,
                "needs uvloop (pip install 'streamwire[uvloop]')")
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0", "--token", TOKEN,
            "--loop", loop]
    with process(argv) as proc:
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        named = proc.wait_line(r"streamwire serve: event loop: (\w+) \(([\w.]+);").groups()
        assert named == (loop, "uvloop.Loop" if loop == "uvloop"
                         else "asyncio.unix_events._UnixSelectorEventLoop")
        await check_sigterm_drains(proc, base)  # a write, a read, and the drain on that loop


async def test_serve_auto_loop_without_uvloop_is_asyncio_and_freezes_startup_objects() -> None:
    # gc.freeze reports what it froze: it runs after start-up, before the server listens
    report = ("import gc\n_freeze = gc.freeze\n"
              "def freeze():\n    _freeze()\n"
              "    print('frozen', gc.get_freeze_count(), file=sys.stderr, flush=True)\n"
              "gc.freeze = freeze\n_set = gc.set_threshold\n"
              "def set_threshold(*limits):\n    _set(*limits)\n"
              "    print('threshold', *gc.get_threshold(), file=sys.stderr, flush=True)\n"
              "gc.set_threshold = set_threshold")
    argv = _python_c(f"{NO_UVLOOP}\n{report}", "serve", "--port", "0", "--token", TOKEN)
    with process(argv) as proc:
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        proc.wait_line(r"event loop: asyncio \(.*; --loop auto: uvloop is not installed, "
                       r"pip install 'streamwire\[uvloop\]'\)$")
        async with httpx.AsyncClient(base_url=base) as client:
            assert (await client.put("/streams/a", headers=AUTH)).status_code == 200
        frozen = [i for i, line in enumerate(proc.lines) if line.startswith("frozen ")]
        running = [i for i, line in enumerate(proc.lines) if "running on" in line]
        assert len(frozen) == 1
        assert frozen[0] < running[0]
        assert int(proc.lines[frozen[0]].split()[1]) > 10_000  # modules, app, routes
        # then the young generation's threshold is raised (the older ones keep theirs)
        young, *older = proc.lines[frozen[0] + 1].removeprefix("threshold ").split()
        assert int(young) == YOUNG_THRESHOLD
        assert older == [str(n) for n in gc.get_threshold()[1:]]


def test_serve_loop_uvloop_without_uvloop_exits_2_naming_the_extra() -> None:
    argv = _python_c(NO_UVLOOP, "serve", "--port", "0", "--token", TOKEN, "--loop", "uvloop")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert "--loop uvloop needs uvloop: pip install 'streamwire[uvloop]'" in done.stderr
    assert "running on" not in done.stderr


async def test_serve_connection_caps_refuse_readers_past_them() -> None:
    argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", "0", "--token", TOKEN,
            "--max-connections", "2", "--max-connections-per-stream", "1"]
    with process(argv) as proc:
        base = proc.wait_line(r"running on (http://127\.0\.0\.1:\d+)").group(1)
        async with httpx.AsyncClient(base_url=base, timeout=10) as client, \
                contextlib.AsyncExitStack() as readers:
            for stream in ("s1", "s2", "s3"):
                assert (await client.put(f"/streams/{stream}", headers=AUTH)).status_code == 200

            async def attach(stream: str) -> httpx.Response:
                return await readers.enter_async_context(
                    client.stream("GET", f"/streams/{stream}/sse"))

            assert (await attach("s1")).status_code == 200
            second_of_s1 = await attach("s1")
            assert second_of_s1.status_code == 429  # --max-connections-per-stream 1
            assert "has 1 readers" in (await second_of_s1.aread()).decode()
            assert (await attach("s2")).status_code == 200
            third = await attach("s3")
            assert third.status_code == 503  # --max-connections 2: two are open
            assert "has 2 open streams" in (await third.aread()).decode()


@pytest.mark.parametrize("flag", ["--max-connections", "--max-connections-per-stream", "--max-backlog-bytes"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_serve_refuses_a_connection_cap_below_one(flag: str, value: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be " in err
    assert ("a whole number, not 'many'" if value == "many" else f"at least 1, not {value}") in err


def test_serve_help_states_the_servers_default_caps(capsys: pytest.CaptureFixture[str]) -> None:
    from streamwire.server import (
        DEFAULT_MAX_BACKLOG_BYTES,
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_MAX_CONNECTIONS_PER_STREAM,
    )

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert DEFAULT_MAX_BACKLOG_BYTES == 4 * 1024 * 1024
    assert "is evicted and re-attaches (default 4 MiB)" in text
    assert f"past it a reader gets 503 (default {DEFAULT_MAX_CONNECTIONS:,})" in text
    assert f"past it a reader gets 429 (default {DEFAULT_MAX_CONNECTIONS_PER_STREAM:,})" in text
    assert "--loop {auto,asyncio,uvloop}" in text
