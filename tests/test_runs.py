"""Runs over real sockets (uvicorn in a thread) on memory, SQLite and Redis: the HTTP API and the
dispatcher, async and sync. Process-level cases (SIGKILL, two servers) are in test_runs_process.py."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from starlette.exceptions import HTTPException

from helpers import runs_agents as agents
from helpers.runs_server import Backend, LossyProxy, backend, serving
from streamwire.chat import Chat
from streamwire.client import AsyncDispatcher, Dispatcher, RetryPolicy
from streamwire.contract import is_event
from streamwire.errors import RunConflictError, RunStateError, UnknownAgentError
from streamwire.frames import ChunkCodec, RemoteOutcomeKind

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

ALL = [agents.echo, agents.slow, agents.pauser, agents.boom, agents.refuse]
FAST = RetryPolicy(backoff_initial=0.05, backoff_max=0.2, max_attempts=5)
decode = ChunkCodec(Chat).decode


def _text(items: list[Any]) -> str:
    return "".join(m.data["chunk"] for m in items if m is not None and is_event(m, Chat.chunk))


async def test_a_run_end_to_end_through_the_dispatcher(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, srv.base, decode=decode, retry=FAST)
            run = await d.start("echo", {"text": "the quick brown fox"})
            items = [m async for m in run]
            assert _text(items) == "the quick brown fox "
            assert run.created is True
            assert run.outcome is not None
            assert run.outcome.kind is RemoteOutcomeKind.COMPLETED
            assert run.outcome.output == {"text": "the quick brown fox"}
            assert run.outcome.usage == {"outputTokens": 3}
            status = await d.status(run.run_id)
        assert status == {"runId": run.run_id, "streamId": run.run_id, "agent": "echo",
                          "status": "completed", "head": 4,
                          "output": {"text": "the quick brown fox"},
                          "usage": {"outputTokens": 3}}
        assert srv.runs.invocations == 1


def test_the_sync_dispatcher_follows_and_stops(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv, httpx.Client() as client:
        d = Dispatcher(client, srv.base, decode=decode, retry=FAST)
        run = d.start("echo", {"text": "a b c"})
        assert _text(list(run)) == "a b c "
        assert run.outcome is not None
        assert run.outcome.kind is RemoteOutcomeKind.COMPLETED
        slow = d.start("slow", {"pace": 0.02})
        for seen, _ in enumerate(slow, 1):
            if seen == 3:
                assert d.stop(slow.run_id)["status"] == "interrupted"
        assert slow.outcome is not None
        assert slow.outcome.kind is RemoteOutcomeKind.STOPPED
        assert slow.outcome.status == "interrupted"


@pytest.mark.parametrize("after_server", [True, False], ids=["answer-lost", "request-lost"])
async def test_a_lost_start_is_recovered_and_runs_the_agent_once(
        backend: Backend, after_server: bool) -> None:
    with serving(backend.factory, ALL) as srv:
        port = int(srv.base.rsplit(":", 1)[1])
        with LossyProxy(port, b"POST /runs ", after_server=after_server) as proxy:
            async with httpx.AsyncClient() as client:
                d = AsyncDispatcher(client, f"http://127.0.0.1:{proxy.port}", decode=decode,
                                    retry=FAST)
                run = await d.start("echo", {"text": "once only"})
                assert proxy.lost == 1
                assert _text([m async for m in run]) == "once only "
        assert run.outcome is not None
        assert run.outcome.kind is RemoteOutcomeKind.COMPLETED
        # answer lost: the dispatcher learned from /status that its start had arrived
        assert run.created is (None if after_server else True)
        assert srv.runs.invocations == 1


async def test_same_run_id_with_another_body_is_409(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            body = {"agent": "echo", "input": {"text": "x"}, "runId": "r-409"}
            assert (await client.post("/runs", json=body)).status_code == 201
            again = await client.post("/runs", json={**body, "input": {"text": "x"}})
            assert again.status_code == 200
            assert again.json() == {"runId": "r-409", "streamId": "r-409",
                                    "status": again.json()["status"]}
            other = await client.post("/runs", json={**body, "input": {"text": "y"}})
            assert other.status_code == 409
            assert other.json()["code"] == "RunConflictError"
            keyed = await client.post("/runs", json={"agent": "echo"},
                                      headers={"Idempotency-Key": "k-1"})
            assert keyed.status_code == 201
            assert keyed.json()["runId"] == "k-1"
            keyed = await client.post("/runs", json={"agent": "echo"},
                                      headers={"Idempotency-Key": "k-1"})
            assert keyed.status_code == 200
            d = AsyncDispatcher(client, srv.base)
            with pytest.raises(RunConflictError):
                await d.start("echo", {"text": "z"}, run_id="r-409")
        assert srv.runs.invocations == 2


async def test_an_unknown_agent_is_404_with_the_list(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            answer = await client.post("/runs", json={"agent": "nope"})
            assert answer.status_code == 404
            assert answer.json()["agents"] == ["boom", "echo", "pauser", "refuse", "slow"]
            with pytest.raises(UnknownAgentError) as info:
                await AsyncDispatcher(client, srv.base).start("nope")
            assert info.value.agents == ["boom", "echo", "pauser", "refuse", "slow"]
            assert (await client.get("/runs/never/status")).status_code == 404
            assert (await client.get("/runs/never/sse")).status_code == 404
            assert (await client.post("/runs/never/stop")).status_code == 404


async def test_stop_mid_reply_interrupts_and_the_outcome_is_stopped(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, srv.base, decode=decode, retry=FAST)
            run = await d.start("slow", {"pace": 0.02})
            got = 0
            async for _ in run:
                got += 1
                if got == 5:
                    stopped = await run.stop()
                    assert stopped["status"] == "interrupted"
            assert run.outcome is not None
            assert run.outcome.kind is RemoteOutcomeKind.STOPPED
            assert run.outcome.status == "interrupted"
            assert 5 <= run.cursor < 400
            again = await d.stop(run.run_id)  # idempotent: a finished run answers its status
            assert again["status"] == "interrupted"
            assert again["head"] == run.cursor


async def test_pause_then_resume_exactly_once_on_one_stream(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, srv.base, decode=decode, retry=FAST)
            run = await d.start("pauser")
            assert _text([m async for m in run]) == "a b "
            assert run.outcome is not None
            assert run.outcome.kind is RemoteOutcomeKind.STOPPED
            assert run.outcome.status == "paused"
            assert run.outcome.state == {"next": 2}
            resumed = await d.resume(run.run_id, {"word": "X"}, resume_id="k1",
                                     cursor=run.cursor)
            assert resumed.created is True
            assert _text([m async for m in resumed]) == "X c"
            assert resumed.outcome is not None
            assert resumed.outcome.kind is RemoteOutcomeKind.COMPLETED
            repeat = await d.resume(run.run_id, {"word": "X"}, resume_id="k1")
            assert repeat.created is False
            with pytest.raises(RunConflictError):
                await d.resume(run.run_id, {"word": "Y"}, resume_id="k1")
            with pytest.raises(RunStateError):
                await d.resume(run.run_id, {"word": "Y"}, resume_id="k2")
            whole = d.follow(run.run_id)  # readers see one stream, sequences 1..4
            assert _text([m async for m in whole]) == "a b X c"
            assert whole.cursor == 4
        assert srv.runs.invocations == 2  # the start and one resume


@pytest.mark.parametrize("expose", [False, True])
async def test_an_agent_that_raises_fails_with_an_error_detail(
        backend: Backend, expose: bool) -> None:
    with serving(backend.factory, ALL, expose_errors=expose) as srv:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, srv.base, retry=FAST)
            run = await d.start("boom")
            outcome = await run.result()
            assert outcome.kind is RemoteOutcomeKind.FAILED
            assert outcome.recoverable is False
            body = (await client.get(f"{srv.base}/runs/{run.run_id}/sse")).text
            status = await d.status(run.run_id)
            if expose:
                assert outcome.error_detail == {"code": "AGENT_ERROR", "type": "ValueError"}
                assert "secret internal text" in (outcome.error or "")
            else:
                assert outcome.error_detail == {"code": "AGENT_ERROR"}
                assert outcome.error == "the agent failed"
                assert "secret" not in body
                assert "ValueError" not in body
                assert "secret" not in str(status)
            assert "event: fail" in body
            assert body.count("event: fail") == 1
            refused = await (await d.start("refuse")).result()
            assert refused.kind is RemoteOutcomeKind.FAILED
            assert refused.error == "quota exceeded"
            assert refused.error_detail == {"code": "QUOTA", "limit": 3}


async def test_runs_share_the_authorization_hook(backend: Backend) -> None:
    seen: list[tuple[str, str]] = []

    def authorize(request: Any, ident: str, access: str) -> None:
        seen.append((ident, access))
        if access == "write" and request.headers.get("authorization") != "Bearer s3cret":
            raise HTTPException(401, "token please")

    with serving(backend.factory, ALL, app_options={"authorize": authorize}) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            body = {"agent": "echo", "runId": "auth-1"}
            assert (await client.post("/runs", json=body)).status_code == 401
            ok = await client.post("/runs", json=body, headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 201
            assert (await client.get("/runs/auth-1/status")).status_code == 200
            assert (await client.post("/runs/auth-1/stop")).status_code == 401
            assert (await client.post("/runs/auth-1/resume", json={"resumeId": "x"})
                    ).status_code == 401
            assert (await client.get("/runs/auth-1/sse")).status_code == 200
    assert ("auth-1", "write") in seen
    assert ("auth-1", "read") in seen


async def test_the_openapi_document_lists_the_runs_paths(backend: Backend) -> None:
    with serving(backend.factory, [agents.echo]) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            doc = (await client.get("/openapi.json")).json()
    for path in ("/runs", "/runs/{run_id}/resume", "/runs/{run_id}/stop",
                 "/runs/{run_id}/status", "/runs/{run_id}/sse"):
        assert path in doc["paths"], path
    assert "RunStatus" in doc["components"]["schemas"]


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_a_server_shutting_down_ends_its_runs_with_a_recoverable_fail(
        backend: Backend) -> None:
    with serving(backend.factory, ALL) as first:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, first.base, retry=FAST)
            run = await d.start("slow", {"pace": 0.02})
            await anyio.sleep(0.2)
    with serving(backend.factory, ALL) as second:
        async with httpx.AsyncClient() as client:
            status = await AsyncDispatcher(client, second.base).status(run.run_id)
            body = (await client.get(f"{second.base}/runs/{run.run_id}/sse")).text
    assert status["status"] == "failed"
    assert status["errorDetail"] == {"code": "WORKER_SHUTDOWN"}
    assert status["recoverable"] is True
    assert body.count("event: fail") == 1
    assert body.count("event: end") == 0
    assert '"WORKER_SHUTDOWN"' in body


async def test_a_run_id_that_names_a_plain_stream_is_refused(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            assert (await client.put("/streams/taken")).status_code == 200
            assert (await client.post("/streams/taken/chunks", json=[
                {"step": 0, "chunk": {"mine": 1}}])).status_code == 200
            answer = await client.post("/runs", json={"agent": "echo", "runId": "taken"})
            assert answer.status_code == 409
            assert (await client.post("/streams/taken/end", json={"status": "completed"})
                    ).status_code == 200  # the stream is still its writer's
            body = (await client.get("/streams/taken/sse?cursor=0")).text
            assert body.count("event: chunk") == 1  # nothing was written into it
        assert srv.runs.invocations == 0


def test_the_sync_dispatcher_recovers_a_lost_start(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        port = int(srv.base.rsplit(":", 1)[1])
        with LossyProxy(port, b"POST /runs ") as proxy, httpx.Client() as client:
            d = Dispatcher(client, f"http://127.0.0.1:{proxy.port}", decode=decode, retry=FAST)
            run = d.start("echo", {"text": "sync once"})
            assert proxy.lost == 1
            assert _text(list(run)) == "sync once "
            assert run.created is None  # learned from /status, not from a second start
        assert srv.runs.invocations == 1


async def test_stopping_a_paused_run_interrupts_it_for_good(backend: Backend) -> None:
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, srv.base, decode=decode, retry=FAST)
            run = await d.start("pauser")
            assert (await run.result()).status == "paused"
            assert (await d.stop(run.run_id))["status"] == "interrupted"
            assert (await d.stop(run.run_id))["status"] == "interrupted"  # idempotent
            whole = d.follow(run.run_id)
            assert _text([m async for m in whole]) == "a b "
            assert whole.outcome is not None
            assert whole.outcome.status == "interrupted"
            with pytest.raises(RunStateError):
                await d.resume(run.run_id, {"word": "late"})
        assert srv.runs.invocations == 1


async def test_settled_records_expire_after_record_ttl_and_running_ones_stay(
        backend: Backend) -> None:
    with serving(backend.factory, ALL, record_ttl=0.5, lease_time=1.0,
                 poll_interval=0.05) as srv:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, srv.base, retry=FAST)
            done = await d.start("echo", {"text": "short"})
            assert (await done.result()).kind is RemoteOutcomeKind.COMPLETED
            slow = await d.start("slow", {"pace": 0.05})
            with anyio.fail_after(10):
                while True:
                    answer = await client.get(f"{srv.base}/runs/{done.run_id}/status")
                    if answer.status_code == 404:
                        break
                    await anyio.sleep(0.1)
            assert (await d.status(slow.run_id))["status"] == "running"
            assert (await d.stop(slow.run_id))["status"] == "interrupted"
