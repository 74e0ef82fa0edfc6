"""``--run-retries`` across real ``streamwire serve`` processes sharing a log (issue 22,
Deliver 4): a run whose worker is SIGKILLed, or shut down past ``--drain-timeout``, is run again
by the other process with ``attempt`` 2, on a restarted stream that ends with one terminal."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from helpers.runs_drain import calls, frames, serve
from helpers.runs_server import AUTH, Backend, backend, free_port
from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.chat import Chat
from streamwire.frames import ChunkFrame, EndFrame
from streamwire.runs import Completed, RunContext
from streamwire.sse import SSEDecoder

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


@pytest.mark.anyio
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


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["sqlite", "redis"], indirect=True)
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


# ---- the AI SDK reply of a re-run starts over (sans-I/O) ------------------------------------


def _chunk(sequence: int, text: str) -> ChunkFrame:
    return ChunkFrame(sequence, msgspec.Raw(
        b'{"event":"chunk","data":{"chunk":"%s"}}' % text.encode()))


def _ui(raw: bytes) -> list[tuple[str, Any]]:
    decoder = SSEDecoder()
    return [(e.id, e.data if e.data == "[DONE]" else json.loads(e.data))
            for e in decoder.feed(raw) + decoder.flush()]


def test_a_reader_from_an_earlier_attempt_gets_the_whole_reply_with_its_start() -> None:
    # attempt 1 wrote chunks 1..4 (the client saw up to 3); the restarted stream holds 5, 6
    encoder = UIMessageStreamEncoder("m1", after="3")
    out = encoder.encode_start()
    for frame in (_chunk(5, "again "), _chunk(6, "done"), EndFrame("completed")):
        out += encoder.feed(frame)
    events = _ui(out)
    assert encoder.restarted
    assert events[0] == ("0", {"type": "start", "messageId": "m1"})
    assert events[1] == ("0.1", {"type": "start-step"})
    texts = [data["delta"] for _, data in events if isinstance(data, dict)
             and data.get("type") == "text-delta"]
    assert texts == ["again ", "done"]
    assert events[-1][1] == "[DONE]"


def test_a_reader_attached_through_the_restart_is_dropped_to_re_attach() -> None:
    encoder = UIMessageStreamEncoder("m1")
    out = encoder.encode_start() + encoder.feed(_chunk(1, "one ")) + encoder.feed(_chunk(2, "two"))
    assert encoder.feed(_chunk(5, "again")) == b""  # the stream restarted (chunks 3, 4 dropped)
    assert encoder.finished
    assert encoder.restarted
    assert b"[DONE]" not in out  # a drop: the client re-attaches after "2" and starts over
    again = UIMessageStreamEncoder("m1", after="2")
    replay = again.encode_start() + again.feed(_chunk(5, "again"))
    assert _ui(replay)[0] == ("0", {"type": "start", "messageId": "m1"})


def test_a_stream_that_never_restarted_resumes_after_its_cursor() -> None:
    encoder = UIMessageStreamEncoder("m1", after="1.1")  # chunk 1: text-start, text-delta
    out = encoder.encode_start()
    for frame in (_chunk(1, "one "), _chunk(2, "two")):
        out += encoder.feed(frame)
    assert not encoder.restarted
    assert [data["type"] for _, data in _ui(out)] == ["text-delta"]


# ---- in one process: the claim is exactly once; the options --------------------------------


@pytest.mark.anyio
async def test_two_sweepers_claim_a_lost_run_once() -> None:
    from streamwire.log.memory import MemoryLog
    from streamwire.runs import Runs
    from streamwire.runs._record import new_record

    invoked: list[int] = []

    async def agent(run: RunContext[Chat]) -> Completed:
        invoked.append(run.attempt)
        await run.emit(Chat.chunk({"chunk": "again"}))
        return Completed(output={"attempt": run.attempt})

    log = MemoryLog(writer_timeout=30)
    one = Runs(log, {"agent": agent}, lease_time=0.3, poll_interval=0.02, run_retries=1)
    two = Runs(log, {"agent": agent}, lease_time=0.3, poll_interval=0.02, run_retries=1,
               store=one.store)
    # a run whose worker died: its lease lapsed, its stream has attempt 1's chunks
    await one.store.insert(new_record("r1", "agent", None, owner="ghost", now=time.time() - 5,
                                      lease=1))
    await log.create_stream("r1")
    await log.append("r1", 0, b'{"event":"chunk","data":{"chunk":"lost"}}')
    async with one, two:
        with anyio.fail_after(10):
            while True:
                status = await one.status("r1")
                if status["status"] != "running":
                    break
                await anyio.sleep(0.02)
    assert invoked == [2]
    assert status["attempt"] == 2
    assert status["retryReason"] == "WORKER_LOST"
    assert status["output"] == {"attempt": 2}
    assert one.invocations + two.invocations == 1
    frames_ = [f async for f in log.read("r1", 0)]
    assert next(f for f in frames_ if isinstance(f, ChunkFrame)).sequence == 2  # attempt 2's
    assert sum(isinstance(f, EndFrame) for f in frames_) == 1


def test_run_retries_options() -> None:
    from streamwire.errors import UsageError
    from streamwire.log.memory import MemoryLog
    from streamwire.runs import Runs, agent_options
    from streamwire.runs._options import effective_retries

    @agent_options(run_retries=2)
    async def own(run: RunContext[Chat]) -> None: ...

    async def plain(run: RunContext[Chat]) -> None: ...

    assert effective_retries(own, 0) == 2
    assert effective_retries(plain, 1) == 1
    assert effective_retries(plain, None) == 0
    with pytest.raises(UsageError):
        agent_options(run_retries=-1)
    with pytest.raises(UsageError):
        Runs(MemoryLog(), [plain], run_retries=True)
    with pytest.raises(UsageError):
        Runs(MemoryLog(), [plain], drain_timeout=-1)


# ---- a chat reply re-run on the other process replaces the message ---------------------------


def _ui_events(text: str) -> list[tuple[str, Any]]:
    return _ui(text.encode())


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["redis"], indirect=True)
async def test_a_chat_reply_re_run_after_sigkill_starts_over_on_the_other_server(
        backend: Backend, tmp_path: Path) -> None:
    port_a, port_b = free_port(), free_port()
    a, b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
    side = tmp_path / "calls.txt"
    body = {"id": "c1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as client:
        with (serve(backend, port=port_a, calls=side, extra=RETRY) as first,
              serve(backend, port=port_b, calls=side, extra=RETRY)):
            seen = ""
            async with client.stream("POST", f"{a}/api/chat", json=body) as response:
                assert response.status_code == 200
                async for piece in response.aiter_text():
                    seen += piece
                    if seen.count("text-delta") >= 5:
                        break
            first.send_signal(signal.SIGKILL)
            before = [(i, d) for i, d in _ui_events(seen) if isinstance(d, dict)]
            last_id = before[-1][0]
            drops = 0
            with anyio.fail_after(20):
                while True:  # as a client does: re-attach after a drop (no [DONE])
                    async with client.stream("GET", f"{b}/api/chat/c1/stream",
                                             headers={"Last-Event-ID": last_id}) as response:
                        assert response.status_code == 200
                        replay = (await response.aread()).decode()
                    got = _ui_events(replay)
                    if got and got[-1][1] == "[DONE]":
                        break
                    drops += 1
                    last_id = next((i for i, _ in reversed(got)), last_id)
    assert drops >= 1  # the reader attached before the restart was told (rewound) and dropped
    start = before[0][1]
    assert start["type"] == "start"
    events = [d for _, d in _ui_events(replay)]
    assert events[0] == start  # the same messageId: the page replaces the message
    deltas = [d["delta"] for d in events if isinstance(d, dict) and d["type"] == "text-delta"]
    assert deltas[:2] == ["w0 ", "w1 "]  # the second attempt, from its start
    assert len(deltas) == 40
    assert events[-2] == {"type": "finish", "finishReason": "stop"}
    assert events[-1] == "[DONE]"
    assert [attempt for _, attempt, _ in calls(side)] == ["1", "2"]
