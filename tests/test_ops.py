"""Operations: ``GET /healthz`` and ``GET /readyz`` over real uvicorn (a paused Redis of the
test's own makes the log stop answering), and ``serve --log-format json``'s log lines."""

from __future__ import annotations

import json
import os
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
from starlette.applications import Starlette
from starlette.routing import Mount

from helpers import runs_agents as agents
from helpers.server import PrivateRedis, private_redis, serving
from streamwire.cli._logging import JSONFormatter
from streamwire.log.memory import MemoryLog
from streamwire.server import bearer_token, create_app

pytestmark = pytest.mark.anyio
__all__ = ["private_redis"]  # a fixture, used by name

SRC = Path(__file__).resolve().parents[1] / "src"
TESTS = Path(__file__).resolve().parent
PROTECTED = bearer_token("s3cret", protect_reads=True)


async def test_healthz_and_readyz_answer_without_a_token() -> None:
    with serving(MemoryLog, authorize=PROTECTED) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=5) as client:
            assert (await client.get("/metrics")).status_code == 401  # reads need the token
            health = await client.get("/healthz")
            ready = await client.get("/readyz")
            head = await client.head("/readyz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ok"})
    assert health.headers["cache-control"] == "no-store"
    assert head.status_code == 200


async def test_readyz_is_503_while_redis_is_paused_and_200_after(
        private_redis: PrivateRedis) -> None:
    import redis

    from streamwire.log.redis import RedisLog

    prefix = f"swtest-ops-{uuid.uuid4().hex[:8]}"
    with serving(lambda: RedisLog(private_redis.url, prefix=prefix), authorize=PROTECTED) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            assert (await client.get("/readyz")).status_code == 200
            admin = redis.Redis.from_url(private_redis.url)  # pyright: ignore[reportUnknownMemberType]
            admin.execute_command(  # pyright: ignore[reportUnknownMemberType]
                "CLIENT", "PAUSE", "3000", "ALL")
            paused_at = time.monotonic()
            started = time.monotonic()
            down = await client.get("/readyz")
            took = time.monotonic() - started
            health = await client.get("/healthz")  # liveness never asks the log
            with anyio.fail_after(10):
                while (up := await client.get("/readyz")).status_code != 200:  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            admin.close()
    assert down.status_code == 503
    assert took < 2.5, "the probe waits at most READY_TIMEOUT for the log"
    assert down.headers["retry-after"].isdigit()
    assert down.json() == {"status": "unavailable",
                           "reason": "the stream log did not answer in time"}
    assert "redis" not in down.text.lower()
    assert str(private_redis.url) not in down.text
    assert health.status_code == 200
    assert up.json() == {"status": "ok"}
    assert time.monotonic() - paused_at >= 2.5  # ready again once the pause was over


async def test_readyz_is_503_with_a_reason_when_the_log_fails() -> None:
    async def broken(stream_id: str) -> Any:
        raise OSError("connection refused to 10.0.0.7:6379 password=hunter2")

    log = MemoryLog()
    setattr(log, "info", broken)  # noqa: B010
    app = create_app(log, allow_anonymous_writes=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        resp = await client.get("/readyz")
        health = await client.get("/healthz")
    assert resp.status_code == 503
    assert resp.json() == {"status": "unavailable", "reason": "the stream log failed"}
    assert "hunter2" not in resp.text
    assert "10.0.0.7" not in resp.text
    assert health.status_code == 200


async def test_readyz_needs_the_runs_service_running_and_no_drain() -> None:
    app = create_app(MemoryLog(), allow_anonymous_writes=True, agents=[agents.echo])
    host = Starlette(routes=[Mount("/s", app=app)])  # mounted: no lifespan, so no agents
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=host),
                                 base_url="http://t") as client:
        unstarted = await client.get("/s/readyz")
        async with app.lifespan(app):
            started = await client.get("/s/readyz")
            assert app.runs is not None
            await app.runs.drain()  # SIGTERM's first step: starts refused, runs finishing
            runs_draining = await client.get("/s/readyz")
            app.begin_shutdown()
            draining = await client.get("/s/readyz")
            health = await client.get("/s/healthz")
    assert unstarted.status_code == 503
    assert unstarted.json()["reason"] == "the runs service is not running"
    assert started.status_code == 200
    assert runs_draining.status_code == 503
    assert runs_draining.json()["reason"] == "the runs service is draining"
    assert draining.status_code == 503
    assert draining.json()["reason"] == "the server is shutting down"
    assert health.status_code == 200


def test_the_probes_are_in_the_openapi_document() -> None:
    document = create_app(MemoryLog(), allow_anonymous_writes=True).openapi_document()
    assert document["paths"]["/healthz"]["get"]["security"] == []
    assert set(document["paths"]["/readyz"]["get"]["responses"]) == {"200", "503"}


def test_json_formatter_writes_one_object_with_the_extra_fields() -> None:
    import logging

    record = logging.LogRecord("streamwire.runs", logging.WARNING, __file__, 1,
                               "run %s: agent %r failed\n%s", ("r1", "boom", "X"), None)
    record.__dict__.update(run_id="r1", agent="boom", code="AGENT_ERROR", obj=object())
    try:
        raise ValueError("inside")
    except ValueError:
        record.exc_info = sys.exc_info()
    line = JSONFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "streamwire.runs"
    assert entry["message"] == "run r1: agent 'boom' failed\nX"
    assert entry["time"].endswith("Z")
    assert (entry["run_id"], entry["agent"], entry["code"]) == ("r1", "boom", "AGENT_ERROR")
    assert entry["obj"].startswith("<object object")
    assert "ValueError: inside" in entry["exception"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_log_format_json_logs_a_failed_run_with_its_ids() -> None:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
    cmd = [sys.executable, "-m", "streamwire.cli", "serve", "--port", str(port), "--token", "t0k",
           "--log-format", "json", "--agent", "helpers.runs_agents:boom",
           "--agent", "helpers.runs_agents:echo"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "streamwire serve did not start"
            time.sleep(0.05)
        auth = {"Authorization": "Bearer t0k"}
        assert httpx.post(f"{base}/runs", json={"agent": "boom", "runId": "bad-1"},
                          headers=auth).status_code == 201
        with httpx.stream("GET", f"{base}/runs/bad-1/sse") as resp:
            resp.read()  # to the run's terminal
        deadline = time.monotonic() + 10
        while httpx.get(f"{base}/runs/bad-1/status").json()["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    prints = [line for line in err.splitlines() if not line.startswith("{")]
    assert all(line.startswith("streamwire serve: ") for line in prints), prints
    assert records
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    failed = [r for r in records if r.get("code") == "AGENT_ERROR"]
    assert len(failed) == 1, records
    assert failed[0]["run_id"] == "bad-1"
    assert failed[0]["agent"] == "boom"
    assert failed[0]["level"] == "WARNING"
    assert failed[0]["status"] == "failed"
    raised = [r for r in records if r["message"] == "run bad-1: the agent failed"]
    assert raised
    assert "secret internal text" in raised[0]["exception"]
    opened = [r for r in records if r["message"].startswith("sse open")]
    assert opened
    assert opened[0]["stream_id"] == "bad-1"
    assert any(r["logger"].startswith("uvicorn") for r in records)
