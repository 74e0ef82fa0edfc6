"""Lifetimes over real sockets (uvicorn) on memory, SQLite and Redis (issue 22, Deliver 3):

* a completed run whose stream expired (``finished_ttl=1``) still answers its outcome:
  ``/runs/{id}/sse`` gives ``caught-up`` and its terminal from the record (``truncated`` to a
  reader below the head: its chunks are gone), ``/status`` its outcome;
* a paused run with ``paused_ttl=0`` (the default) outlives ``finished_ttl`` and the record
  retention and resumes; with ``paused_ttl=1`` its pause expires and the resume answers
  ``PauseExpiredError`` (410), the run ending ``failed PAUSE_EXPIRED`` on ``/status`` and ``/sse``;
* ``record_ttl`` (``serve --run-retention``) expires the records of ended runs;
* the defaults per backend, and ``streamwire serve``'s ``--finished-ttl``, ``--paused-ttl``,
  ``--run-retention`` (checked, and acting in a real ``serve`` process).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import anyio
import httpx
import pytest

from helpers import runs_agents as agents
from helpers.runs_retention import json_of, run_sse, serve, wait_for, with_lifetimes
from helpers.runs_server import AUTH, Backend, backend, free_port, serving
from helpers.server import log_backend
from streamwire.cli import main
from streamwire.cli.serve import _finished_ttl, configure
from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame, FailFrame, TruncatedFrame
from streamwire.log._common import (
    DEFAULT_DURABLE_FINISHED_TTL,
    DEFAULT_FINISHED_TTL,
    DEFAULT_PAUSED_TTL,
)
from streamwire.runs import DEFAULT_RECORD_TTL, Runs

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

ALL = [agents.echo, agents.pauser, agents.boom]
#: Leases short enough that the runs service sweeps (and expires records) every ~0.25 s.
FAST = {"lease_time": 1.0, "poll_interval": 0.1}


async def _start(client: httpx.AsyncClient, agent: str, run_id: str, input: object = None
                 ) -> None:
    answer = await client.post("/runs", json={"agent": agent, "runId": run_id, "input": input})
    assert answer.status_code == 201, answer.text


async def _settled(client: httpx.AsyncClient, run_id: str) -> dict[str, object]:
    with anyio.fail_after(10):
        while (body := json_of(await client.get(f"/runs/{run_id}/status")))[  # noqa: ASYNC110
                "status"] == "running":
            await anyio.sleep(0.05)
    assert isinstance(body, dict)
    return body


async def test_a_run_whose_stream_expired_still_answers_its_outcome(backend: Backend) -> None:
    with serving(with_lifetimes(backend, finished_ttl=1), ALL, **FAST) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await _start(client, "echo", "done", {"text": "one two three four"})
            status = await _settled(client, "done")
            async with run_sse(client, "done", 0) as (resp, live):
                assert resp.status_code == 200
            assert [f for f in live if isinstance(f, ChunkFrame)][-1].sequence == 4
            await wait_for(client, "/streams/done/sse", 404)  # the stream expired
            # the record answers: at the head, caught-up and the run's terminal
            async with run_sse(client, "done", 4) as (resp, frames):
                assert resp.status_code == 200, resp.text
                assert resp.headers["content-type"].startswith("text/event-stream")
            assert frames == [CaughtUpFrame(head=4), EndFrame(
                status="completed", output={"text": "one two three four"}, usage={"outputTokens": 3})]
            # below it the chunks are gone: truncated at the head, never a silent gap
            async with run_sse(client, "done") as (resp, frames):
                assert frames == [TruncatedFrame(floor=4)]
            async with run_sse(client, "done", 5) as (resp, _):
                assert resp.status_code == 409
            assert json_of(await client.get("/runs/done/status")) == status
            assert (status["status"], status["head"]) == ("completed", 4)
            # a run that failed answers its fail the same way
            await _start(client, "boom", "bad")
            failed = await _settled(client, "bad")
            await wait_for(client, "/streams/bad/sse", 404)
            async with run_sse(client, "bad", int(str(failed["head"]))) as (_, frames):
                assert frames[0] == CaughtUpFrame(head=int(str(failed["head"])))
                assert len(frames) == 2
                assert isinstance(frames[1], FailFrame)
                assert frames[1].error_detail == failed["errorDetail"]


async def test_a_pause_kept_until_resumed_outlives_every_other_lifetime(backend: Backend) -> None:
    factory = with_lifetimes(backend, finished_ttl=1)  # paused_ttl: the default, 0
    with serving(factory, ALL, record_ttl=1, **FAST) as srv:
        assert srv.runs.log.paused_ttl == 0  # type: ignore[attr-defined]
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await _start(client, "pauser", "waits")
            assert (await _settled(client, "waits"))["status"] == "paused"
            await _start(client, "echo", "ended", {"text": "x"})
            await _settled(client, "ended")
            await wait_for(client, "/runs/ended/status", 404)  # record_ttl=1 expired it
            await anyio.sleep(2)  # well past finished_ttl and record_ttl
            assert (await client.get("/streams/waits/sse", params={"cursor": "2"})
                    ).status_code == 200
            answer = await client.post("/runs/waits/resume",
                                       json={"resumeId": "r1", "input": {"word": "late"}})
            assert answer.status_code == 200, answer.text
            status = await _settled(client, "waits")
            assert status["status"] == "completed", status
            async with run_sse(client, "waits", 0) as (_, frames):
                words = [json.loads(bytes(f.chunk))["data"]["chunk"] for f in frames
                         if isinstance(f, ChunkFrame)]
            assert words == ["a ", "b ", "late ", "c"]


async def test_an_expired_pause_answers_a_typed_error(backend: Backend) -> None:
    with serving(with_lifetimes(backend, paused_ttl=1), ALL, **FAST) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await _start(client, "pauser", "gone")
            assert (await _settled(client, "gone"))["status"] == "paused"
            await wait_for(client, "/streams/gone/sse", 404)
            # until a resume comes, the record says how the run stands: paused
            async with run_sse(client, "gone", 2) as (_, frames):
                assert frames == [CaughtUpFrame(head=2),
                                  EndFrame(status="paused", state={"next": 2})]
            answer = await client.post("/runs/gone/resume",
                                       json={"resumeId": "r1", "input": {"word": "late"}})
            assert answer.status_code == 410, answer.text
            body = json_of(answer)
            assert body["code"] == "PauseExpiredError", body
            assert "paused too long" in body["error"], body
            assert "paused_ttl" in body["error"], body
            assert "STREAM_ERROR" not in answer.text
            status = json_of(await client.get("/runs/gone/status"))
            assert (status["status"], status["head"]) == ("failed", 2), status
            assert status["errorDetail"] == {"code": "PAUSE_EXPIRED"}
            assert status["recoverable"] is False
            async with run_sse(client, "gone", 2) as (_, frames):
                assert frames[0] == CaughtUpFrame(head=2)
                assert isinstance(frames[1], FailFrame)
                assert frames[1].error_detail == {"code": "PAUSE_EXPIRED"}
            again = await client.post("/runs/gone/resume",
                                      json={"resumeId": "r2", "input": {"word": "later"}})
            assert (again.status_code, json_of(again)["code"]) == (409, "RunStateError")
        assert srv.runs.invocations == 1


async def test_record_retention_expires_ended_runs(backend: Backend) -> None:
    with serving(backend.factory, ALL, record_ttl=1, **FAST) as srv:
        assert srv.runs.record_ttl == 1
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await _start(client, "echo", "short", {"text": "x"})
            await _settled(client, "short")
            await wait_for(client, "/runs/short/status", 404)
            async with run_sse(client, "short", 0) as (resp, _):
                # the stream is still kept (finished_ttl): only the record is gone
                assert resp.status_code == 404
                assert json_of(resp)["code"] == "RunNotFoundError"


def test_the_default_lifetimes(tmp_path: Path) -> None:
    assert DEFAULT_DURABLE_FINISHED_TTL == DEFAULT_RECORD_TTL == 7 * 24 * 3600
    assert (DEFAULT_FINISHED_TTL, DEFAULT_PAUSED_TTL) == (3600, 0)
    expected = {"memory": DEFAULT_FINISHED_TTL, "sqlite": DEFAULT_RECORD_TTL,
                "redis": DEFAULT_RECORD_TTL}
    for kind, finished in expected.items():
        try:
            with log_backend(kind, tmp_path, "retention-defaults") as made:
                log = made.factory()
                assert getattr(log, "finished_ttl") == finished, kind  # noqa: B009
                assert getattr(log, "paused_ttl") == 0, kind  # noqa: B009
                assert Runs(log, ALL).record_ttl == DEFAULT_RECORD_TTL
        except pytest.skip.Exception:
            assert kind == "redis"


def _serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


def test_serve_flags_are_checked_and_default_per_backend(
        capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--finished-ttl", "--paused-ttl", "--run-retention"):
        for bad in ("-1", "nan", "inf", "soon"):
            with pytest.raises(SystemExit) as exited:
                main(["serve", flag, bad])
            assert exited.value.code == 2
            assert flag in capsys.readouterr().err
    args = _serve_args()
    assert (args.finished_ttl, args.paused_ttl, args.record_ttl) == (None, None, DEFAULT_RECORD_TTL)
    assert _finished_ttl(args) is None  # the backend's default
    assert _finished_ttl(_serve_args("--log", "sqlite:x.db", "--run-retention", "60")) == 60
    assert _finished_ttl(_serve_args("--log", "memory", "--run-retention", "60")) is None
    assert _finished_ttl(_serve_args("--log", "sqlite:x.db", "--run-retention", "60",
                                     "--finished-ttl", "5")) == 5
    with pytest.raises(SystemExit):
        _serve_args("--help")
    text = capsys.readouterr().out
    for flag in ("--finished-ttl", "--paused-ttl", "--run-retention"):
        assert flag in text


async def test_serve_flags_set_the_lifetimes(tmp_path: Path) -> None:
    with log_backend("sqlite", tmp_path, "retention-serve") as made:
        port = free_port()
        flags = ("--run-retention", "2", "--paused-ttl", "0", "--run-lease", "1")
        with serve(made, port, *flags):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=AUTH,
                                         timeout=30) as client:
                await _start(client, "echo", "r", {"text": "x y"})
                await _start(client, "pauser", "p")
                assert (await _settled(client, "r"))["status"] == "completed"
                # the stream follows the run retention: gone together with the record
                await wait_for(client, "/streams/r/sse", 404)
                await wait_for(client, "/runs/r/status", 404)
                assert json_of(await client.get("/runs/p/status"))["status"] == "paused"
                answer = await client.post("/runs/p/resume",
                                           json={"resumeId": "r1", "input": {"word": "w"}})
                assert answer.status_code == 200, answer.text
                assert (await _settled(client, "p"))["status"] == "completed"


def test_the_dispatcher_reads_an_expired_pause_as_its_typed_error() -> None:
    from streamwire.client._dispatch_core import error_for
    from streamwire.errors import PauseExpiredError, RunStateError

    body = json.dumps({"error": "run 'gone' was paused too long", "code": "PauseExpiredError"})
    error = error_for(410, body.encode(), "gone")
    assert isinstance(error, PauseExpiredError)
    assert isinstance(error, RunStateError)
    assert (error.run_id, str(error)) == ("gone", "run 'gone' was paused too long")
    assert error.status_hint == 410
    other = error_for(410, b'{"error": "gone", "code": "Other"}', "gone")
    assert not isinstance(other, PauseExpiredError)
