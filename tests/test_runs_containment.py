"""Containment (issue 22, Deliver 1), over real sockets (uvicorn in a thread) on memory, SQLite and
Redis: whatever an agent raises (any exception class, its own ``CancelledError``, ``sys.exit()``),
returns (an outcome that is not JSON, usage that is not a mapping of numbers) or emits (a payload
its contract refuses, an emit after its run ended) ends its own run only. The run fails with one
``fail`` frame (``AGENT_ERROR`` or ``INVALID_OUTCOME``, no internal text), ``/status`` says the
same, and the server keeps serving every other run and stream."""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from types import MappingProxyType
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from helpers import runs_agents as agents
from helpers import runs_hostile as hostile
from helpers.runs_server import AUTH, Backend, backend, free_port, serve_process, serving
from streamwire.frames import (
    ChunkFrame,
    EndFrame,
    FailFrame,
    StreamFrame,
    UnknownFrame,
    decode_stream_frame,
)
from streamwire.runs import AgentError, Completed, Paused
from streamwire.runs._exit import settlement
from streamwire.sse import SSEDecoder

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

ALL = [*hostile.AGENTS, agents.echo, agents.slow, agents.pauser]
Frame = StreamFrame | UnknownFrame


async def _frames(resp: httpx.Response) -> AsyncIterator[Frame]:
    decoder = SSEDecoder()
    async for piece in resp.aiter_raw():
        for event in decoder.feed(piece):
            yield decode_stream_frame(event)
    for event in decoder.flush():
        yield decode_stream_frame(event)


async def _read(client: httpx.AsyncClient, path: str) -> tuple[list[Frame], str]:
    """Every frame of one connection to ``path`` until the server closes it, and its body."""
    with anyio.fail_after(10):
        async with client.stream("GET", path, params={"cursor": "0"}) as resp:
            assert resp.status_code == 200, (await resp.aread()).decode()
            frames = [frame async for frame in _frames(resp)]
    body = "\n".join(repr(f) for f in frames)
    return frames, body


async def _next(frames: AsyncIterator[Frame]) -> Frame:
    with anyio.fail_after(10):
        async for frame in frames:
            if isinstance(frame, ChunkFrame | EndFrame | FailFrame):  # not the markers
                return frame
    raise AssertionError("the body closed")


async def _start(client: httpx.AsyncClient, agent: str, run_id: str, input: Any = None) -> None:
    answer = await client.post("/runs", json={"agent": agent, "runId": run_id, "input": input})
    assert answer.status_code == 201, answer.text


def _words(frames: list[Frame]) -> list[str]:
    return [json.loads(bytes(f.chunk))["data"]["chunk"] for f in frames
            if isinstance(f, ChunkFrame)]


def _terminals(frames: list[Frame]) -> list[EndFrame | FailFrame]:
    return [f for f in frames if isinstance(f, EndFrame | FailFrame)]


async def _completes(client: httpx.AsyncClient, run_id: str) -> list[str]:
    frames, _ = await _read(client, f"/runs/{run_id}/sse")
    terminals = _terminals(frames)
    assert len(terminals) == 1
    assert isinstance(terminals[0], EndFrame)
    assert terminals[0].status == "completed", terminals
    assert (await client.get(f"/runs/{run_id}/status")).json()["status"] == "completed"
    return _words(frames)


async def _append(client: httpx.AsyncClient, stream_id: str, chunk: Any) -> None:
    answer = await client.post(f"/streams/{stream_id}/chunks", json=[{"step": 0, "chunk": chunk}])
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("agent", list(hostile.HOSTILE))
async def test_a_hostile_agent_fails_its_own_run_and_nothing_else(
        backend: Backend, agent: str) -> None:
    detail = hostile.HOSTILE[agent]
    with serving(backend.factory, ALL) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            # the bystanders: a plain stream with a live reader, and a run that is running
            assert (await client.put("/streams/bystander")).status_code in (200, 201)
            await _append(client, "bystander", {"n": 1})
            await _start(client, "slow", "neighbour", {"n": 6, "pace": 0.05})
            if agent == "emits_after_end":
                await _start(client, "stashes", "stashed")
                assert await _completes(client, "stashed") == ["before "]
            async with client.stream("GET", "/streams/bystander/sse",
                                     params={"cursor": "0"}) as live:
                assert live.status_code == 200
                reader = _frames(live)
                assert isinstance(await _next(reader), ChunkFrame)

                await _start(client, agent, "hostile")
                frames, body = await _read(client, "/runs/hostile/sse")
                status = (await client.get("/runs/hostile/status")).json()

                # the live reader of the unrelated stream is still served, to its end
                await _append(client, "bystander", {"n": 2})
                second = await _next(reader)
                assert isinstance(second, ChunkFrame)
                assert second.sequence == 2
                assert (await client.post("/streams/bystander/end", json={
                    "status": "completed"})).status_code == 200
                last = await _next(reader)
                assert isinstance(last, EndFrame)

            # the hostile run: its chunk, then one fail frame with the code, no internal text
            assert _words(frames) == ["before "]
            terminals = _terminals(frames)
            assert len(terminals) == 1, body
            fail = terminals[0]
            assert isinstance(fail, FailFrame), body
            assert fail.error_detail == detail
            assert fail.recoverable is False
            assert status["status"] == "failed"
            assert status["errorDetail"] == detail
            assert status["error"] == fail.error
            assert status["recoverable"] is False
            for text in (body, json.dumps(status)):
                assert hostile.SECRET not in text
                assert "Error" not in text  # no exception class name either
            assert "state" not in status  # a refused pause state was not kept

            # every other run goes on: the one running, and new ones
            assert await _completes(client, "neighbour") == [f"w{i} " for i in range(6)]
            await _start(client, "echo", "after", {"text": "still serving"})
            assert await _completes(client, "after") == ["still ", "serving "]
            # a new reader of the unrelated stream is served (no 503: the server is not
            # shutting down)
            again, _ = await _read(client, "/streams/bystander/sse")
            assert [type(f) for f in again if not isinstance(f, UnknownFrame)
                    and type(f).__name__ != "CaughtUpFrame"] == [ChunkFrame, ChunkFrame, EndFrame]
            if agent == "emits_after_end":  # the ended run's stream got nothing more
                stashed, _ = await _read(client, "/runs/stashed/sse")
                assert _words(stashed) == ["before "]
                assert len(_terminals(stashed)) == 1
                assert (await client.get("/runs/stashed/status")).json()["output"] == "stashed"
        assert srv.runs.invocations == (4 if agent == "emits_after_end" else 3)


@pytest.mark.parametrize("agent", ["raises_cancelled", "calls_sys_exit", "returns_object",
                                   "usage_not_a_mapping", "emits_invalid_payload"])
async def test_expose_errors_puts_the_reason_on_the_wire(backend: Backend, agent: str) -> None:
    with serving(backend.factory, ALL, expose_errors=True) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            await _start(client, agent, "hostile")
            frames, _ = await _read(client, "/runs/hostile/sse")
            status = (await client.get("/runs/hostile/status")).json()
    (fail,) = _terminals(frames)
    assert isinstance(fail, FailFrame)
    assert fail.error_detail is not None
    assert fail.error_detail["code"] == hostile.HOSTILE[agent]["code"]
    assert status["errorDetail"] == fail.error_detail
    expected = {"raises_cancelled": "CancelledError", "calls_sys_exit": "SystemExit",
                "emits_invalid_payload": "PayloadError"}.get(agent)
    if expected is not None:  # an exception: its type and text
        assert fail.error_detail["type"] == expected
        assert (hostile.SECRET if expected != "PayloadError" else "does not match") in fail.error
    else:  # an invalid outcome: what is wrong with it
        assert "not" in fail.error


async def test_a_stop_is_still_a_stop_whatever_the_agent_raises_on_the_way_out(
        backend: Backend) -> None:
    with serving(backend.factory, [*ALL, hostile.raises_when_stopped]) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            for run_id in ("own-cancel", "other-error"):
                await _start(client, "raises_when_stopped", run_id,
                             {"raise": "cancelled" if run_id == "own-cancel" else "error"})
                async with client.stream("GET", f"/runs/{run_id}/sse") as live:
                    assert isinstance(await _next(_frames(live)), ChunkFrame)
                stopped = (await client.post(f"/runs/{run_id}/stop")).json()
                assert stopped["status"] == "interrupted", stopped
                frames, _ = await _read(client, f"/runs/{run_id}/sse")
                (end,) = _terminals(frames)
                assert isinstance(end, EndFrame)
                assert end.status == "interrupted"
            await _start(client, "echo", "after", {"text": "on"})
            assert await _completes(client, "after") == ["on "]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sys_exit_in_an_agent_does_not_exit_the_server_process(backend: Backend) -> None:
    port = free_port()
    with serve_process(backend, ["helpers.runs_hostile:calls_sys_exit",
                                 "helpers.runs_agents:echo"], port=port) as proc:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, headers=AUTH, timeout=10) as client:
            assert client.post("/runs", json={"agent": "calls_sys_exit", "runId": "x"}
                               ).status_code == 201
            deadline = time.monotonic() + 10
            while client.get("/runs/x/status").json()["status"] == "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            status = client.get("/runs/x/status").json()
            assert status["status"] == "failed"
            assert status["errorDetail"] == {"code": "AGENT_ERROR"}
            assert proc.poll() is None  # still serving
            assert client.post("/runs", json={"agent": "echo", "runId": "y", "input": {
                "text": "alive"}}).status_code == 201
            body = client.get("/runs/y/sse").text
            assert body.count("event: end") == 1
            assert '"completed"' in body


@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
async def test_a_shutdown_is_still_a_shutdown_whatever_the_agent_raises(
        backend: Backend) -> None:
    with serving(backend.factory, [hostile.raises_when_stopped]) as first:
        async with httpx.AsyncClient(base_url=first.base, timeout=10) as client:
            await _start(client, "raises_when_stopped", "r", {"raise": "cancelled"})
            async with client.stream("GET", "/runs/r/sse") as live:
                assert isinstance(await _next(_frames(live)), ChunkFrame)
    with serving(backend.factory, [hostile.raises_when_stopped]) as second:
        async with httpx.AsyncClient(base_url=second.base, timeout=10) as client:
            status = (await client.get("/runs/r/status")).json()
            frames, _ = await _read(client, "/runs/r/sse")
    assert status["status"] == "failed"
    assert status["errorDetail"] == {"code": "WORKER_SHUTDOWN"}
    assert status["recoverable"] is True
    (fail,) = _terminals(frames)
    assert isinstance(fail, FailFrame)
    assert fail.error_detail == {"code": "WORKER_SHUTDOWN"}


class TestSettlement:
    """``_exit.settlement`` alone (sans-I/O): what each exit becomes."""

    def test_outcomes_come_back_as_json_gives_them(self) -> None:
        status, fields, problem = settlement(
            Completed(output={1: (1, 2)}, usage=MappingProxyType({"inputTokens": 2.5})), None,
            expose_errors=False)
        assert (status, problem) == ("completed", None)
        assert fields == {"output": {"1": [1, 2]}, "usage": {"inputTokens": 2.5}}
        assert settlement(Paused(None), None, expose_errors=False).fields == {"state": None}
        assert settlement("text", None, expose_errors=False).fields == {
            "output": "text", "usage": None}

    @pytest.mark.parametrize(("result", "field"), [
        (Completed(usage={"inputTokens": True}), "usage"),
        (Completed(usage={"inputTokens": math.nan}), "usage"),
        (Completed(usage={"inputTokens": None}), "usage"),
        (Completed(usage={"details": {"cached": 1}}), "usage"),
        (Completed(usage={(1, 2): 3}), "usage"),
        (Paused(state={"s": {1, object()}}), "state"),
        (Completed(output=msgspec.Raw(b"{not json")), "output"),
        (Completed(output="\ud800"), "output"),
    ], ids=["bool", "nan", "null", "nested", "tuple-key", "state", "raw", "surrogate"])
    def test_an_invalid_outcome_names_its_field(self, result: Any, field: str) -> None:
        status, fields, problem = settlement(result, None, expose_errors=False)
        assert status == "failed"
        assert fields["error_detail"] == {"code": "INVALID_OUTCOME", "field": field}
        assert fields["recoverable"] is False
        assert problem is not None
        assert problem.startswith(fields["error"])

    def test_a_cycle_is_invalid_not_a_crash(self) -> None:
        cycle: list[Any] = []
        cycle.append(cycle)
        assert settlement(cycle, None, expose_errors=False).fields["error_detail"] == {
            "code": "INVALID_OUTCOME", "field": "output"}

    def test_an_exception_whose_text_cannot_be_read(self) -> None:
        class Unprintable(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no")

        fields = settlement(None, Unprintable(), expose_errors=True).fields
        assert fields["error_detail"] == {"code": "AGENT_ERROR", "type": "Unprintable"}
        assert fields["error"] == "Unprintable: (its text could not be read)"

    def test_an_agent_error_keeps_its_fields_when_they_are_json(self) -> None:
        fields = settlement(None, AgentError("busy", code="BUSY", detail={"n": 1},
                                             recoverable=True), expose_errors=False).fields
        assert fields == {"error": "busy", "recoverable": True,
                          "error_detail": {"n": 1, "code": "BUSY"}}
        odd = AgentError("busy")
        odd.code = 42  # type: ignore[assignment]
        assert settlement(None, odd, expose_errors=False).fields["error"] == "the agent failed"
