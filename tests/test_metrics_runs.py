"""``GET /metrics``'s runs and connection-kind series over real uvicorn, after a known sequence of
runs: two completed, one failed, one running (with a reader on its stream and one on useChat)."""

from __future__ import annotations

import anyio
import httpx
import pytest

from helpers import runs_agents as agents
from helpers.runs_server import serving
from streamwire.log.memory import MemoryLog
from streamwire.runs import Runs, RunStatus
from streamwire.runs._events import OTHER_AGENT, RunEvents
from streamwire.runs._record import new_record, settled
from streamwire.server import create_app
from test_metrics import parse

pytestmark = pytest.mark.anyio


async def _settled(client: httpx.AsyncClient, run_id: str) -> str:
    with anyio.fail_after(10):
        while True:
            status: str = (await client.get(f"/runs/{run_id}/status")).json()["status"]
            if status != "running":
                return status
            await anyio.sleep(0.02)


async def test_runs_series_after_two_completed_one_failed_one_running() -> None:
    with serving(MemoryLog, [agents.echo, agents.boom, agents.slow],
                 app_options={"allow_anonymous_writes": True, "chat_agent": "slow"}) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            empty = parse((await client.get("/metrics")).text)
            for n, agent in enumerate(["echo", "echo", "boom"]):
                started = await client.post("/runs", json={"agent": agent, "runId": f"r{n}",
                                                           "input": {"text": "a b"}})
                assert started.status_code == 201, started.text
            assert [await _settled(client, f"r{n}") for n in range(3)] == [
                "completed", "completed", "failed"]
            resp = await client.post("/runs", json={"agent": "slow", "runId": "long",
                                                    "input": {"n": 10_000, "pace": 0.05}})
            assert resp.status_code == 201
            async with client.stream("GET", "/runs/long/sse") as reader:
                assert reader.status_code == 200
                live = parse((await client.get("/metrics")).text)
            await client.post("/runs/long/stop")
            assert await _settled(client, "long") == "interrupted"
            after = parse((await client.get("/metrics")).text)

    for agent in ("boom", "echo", "slow"):  # every served agent is there from the start, at 0
        assert empty[f'streamwire_runs_started_total{{agent="{agent}"}}'] == 0
        assert empty[f'streamwire_runs_running{{agent="{agent}"}}'] == 0
        for status in ("completed", "failed", "interrupted", "paused"):
            assert empty[f'streamwire_runs_finished_total{{agent="{agent}",status="{status}"}}'] \
                == 0
    assert live['streamwire_runs_started_total{agent="echo"}'] == 2
    assert live['streamwire_runs_started_total{agent="boom"}'] == 1
    assert live['streamwire_runs_started_total{agent="slow"}'] == 1
    assert live['streamwire_runs_finished_total{agent="echo",status="completed"}'] == 2
    assert live['streamwire_runs_finished_total{agent="boom",status="failed"}'] == 1
    assert live['streamwire_runs_finished_total{agent="echo",status="failed"}'] == 0
    assert live['streamwire_runs_running{agent="slow"}'] == 1
    assert live['streamwire_runs_running{agent="echo"}'] == 0
    assert live['streamwire_connections{kind="run"}'] == 1
    assert live['streamwire_connections{kind="sse"}'] == 0
    assert live['streamwire_connections{kind="chat"}'] == 0
    assert live["streamwire_sse_connections"] == 1
    assert after['streamwire_runs_running{agent="slow"}'] == 0
    assert after['streamwire_runs_finished_total{agent="slow",status="interrupted"}'] == 1
    assert after['streamwire_connections{kind="run"}'] == 0
    assert sum(v for k, v in after.items() if k.startswith("streamwire_runs_finished_total")) == 4


async def test_chat_and_stream_readers_are_counted_by_kind() -> None:
    with serving(MemoryLog, [agents.slow],
                 app_options={"allow_anonymous_writes": True, "chat_agent": "slow"}) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            await client.put("/streams/plain")
            body = {"id": "c1", "trigger": "submit-message", "messages": [
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
            async with client.stream("POST", "/api/chat", json=body) as chat, \
                    client.stream("GET", "/streams/plain/sse") as plain:
                assert chat.status_code == 200
                assert plain.status_code == 200
                live = parse((await client.get("/metrics")).text)
    assert live['streamwire_connections{kind="chat"}'] == 1
    assert live['streamwire_connections{kind="sse"}'] == 1
    assert live['streamwire_connections{kind="run"}'] == 0
    assert live['streamwire_connections{kind="direct"}'] == 0


def test_an_app_without_agents_has_no_runs_series() -> None:
    text = create_app(MemoryLog(), allow_anonymous_writes=True).metrics_text().decode()
    assert "streamwire_runs_" not in text
    assert 'streamwire_connections{kind="sse"} 0' in text


def test_agent_labels_are_bounded_and_escaped() -> None:
    events = RunEvents(['we"ird'])
    record = new_record("x", "not-served-here", None, owner="w", now=0.0, lease=30.0)
    events.spawned(record)
    status: RunStatus = "failed"
    events.settled(settled(record, status, now=1.0, head=0, error="lost",
                           error_detail={"code": "WORKER_LOST"}))
    assert events.started == {'we"ird': 0, OTHER_AGENT: 1}
    assert events.finished == {(OTHER_AGENT, "failed"): 1}
    runs = Runs(MemoryLog(), {'we"ird': agents.echo})
    app = create_app(MemoryLog(), allow_anonymous_writes=True, agents=runs)
    samples = parse(app.metrics_text().decode())
    assert samples['streamwire_runs_started_total{agent="we\\"ird"}'] == 0
