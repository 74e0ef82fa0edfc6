"""Tool calls that wait for a person (``streamwire.runs._approvals``) through ``Runs`` on a memory
log: an approval pauses the run with the call pending; the answer resumes the same run, once;
approved runs the tool, denied ends ``tool_output_denied``; a client-side tool's output is
emitted and returned; answers are checked against what the run waits for; the UI message stream
of the whole run is one assistant message with the tool part in its final state."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.aisdk._chunks import split_message_chunk
from streamwire.chat import Chat
from streamwire.errors import ToolAnswerError
from streamwire.frames import ChunkFrame
from streamwire.log.memory import MemoryLog
from streamwire.runs import Completed, Paused, RunContext, RunRecord, Runs, ToolCall, ToolDenied
from streamwire.runs.demo_agent import APPROVED_ANSWER, DENIED_ANSWER, demo

pytestmark = pytest.mark.anyio


async def settled(runs: Runs, run_id: str) -> RunRecord:
    with anyio.fail_after(10):
        while True:
            record = await runs.get(run_id)
            if record.status != "running":
                return record
            await anyio.sleep(0.01)


async def events(log: MemoryLog, stream_id: str) -> list[tuple[int, str, Any]]:
    out: list[tuple[int, str, Any]] = []
    async for frame in log.read(stream_id, 0):
        if isinstance(frame, ChunkFrame):
            env = split_message_chunk(frame.chunk)
            out.append((frame.sequence, env.event, json.loads(bytes(env.data))))
        else:
            break
    return out


def ui_chunks(frames_text: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in frames_text.decode().split("\n")
            if line.startswith("data: {")]


async def ui_stream(log: MemoryLog, stream_id: str, after: str | None = None) -> bytes:
    encoder = UIMessageStreamEncoder(f"{stream_id}-assistant", after=after)
    out = b""
    async for frame in log.read(stream_id, 0):
        out += encoder.feed(frame)
        if encoder.finished:
            break
    return out


async def test_an_approval_pauses_then_approved_runs_the_tool_once() -> None:
    log = MemoryLog()
    async with Runs(log, [demo]) as runs:
        await runs.start("demo", {"prompt": "/approve", "pace": 0}, "r1")
        paused = await settled(runs, "r1")
        assert paused.status == "paused"
        (pending,) = paused.pending_tools or []
        assert pending["kind"] == "approval"
        assert pending["toolCallId"] == "r1-delete_file"
        assert pending["toolName"] == "delete_file"
        assert pending["input"] == {"path": "notes.txt"}
        before = await events(log, "r1")
        assert [e for _, e, _ in before][-2:] == ["tool_input_available", "tool_approval_request"]
        answer = {"toolAnswers": [{"toolCallId": "r1-delete_file", "approved": True,
                                   "approvalId": pending["approvalId"]}]}
        _record, resumed = await runs.resume("r1", answer, "a1")
        assert resumed
        _again, resumed_again = await runs.resume("r1", answer, "a1")  # a repeat: no second call
        assert not resumed_again
        done = await settled(runs, "r1")
        assert done.status == "completed"
        assert done.pending_tools is None
        assert done.output == {"text": APPROVED_ANSWER}
        after = (await events(log, "r1"))[len(before):]
        names = [e for _, e, _ in after]
        assert names[:3] == ["tool_output_available", "step_finish", "step_start"]
        assert after[0][2] == {"toolCallId": "r1-delete_file",
                               "output": {"path": "notes.txt", "deleted": True}}
        assert "".join(d["chunk"] for _, e, d in after if e == "chunk") == APPROVED_ANSWER
        assert runs.invocations == 2
        # the whole reply is one message: the tool part ends output-available
        chunks = ui_chunks(await ui_stream(log, "r1"))
        kinds = [c["type"] for c in chunks]
        assert kinds.count("start") == 1
        assert kinds.index("tool-approval-request") < kinds.index("tool-output-available")
        # the continuation alone: what follows the pause, no second start
        cont = ui_chunks(await ui_stream(log, "r1", after=f"{paused.head}.999999"))
        assert [c["type"] for c in cont][:3] == ["tool-output-available", "finish-step",
                                                 "start-step"]
        assert "start" not in [c["type"] for c in cont]


async def test_denied_ends_the_call_denied_and_the_agent_goes_on() -> None:
    log = MemoryLog()
    async with Runs(log, [demo]) as runs:
        await runs.start("demo", {"prompt": "/approve", "pace": 0}, "r2")
        paused = await settled(runs, "r2")
        (pending,) = paused.pending_tools or []
        await runs.resume("r2", {"toolAnswers": [{
            "toolCallId": pending["toolCallId"], "approvalId": pending["approvalId"],
            "approved": False, "reason": "keep it"}]}, "a1")
        done = await settled(runs, "r2")
        assert done.status == "completed"
        assert done.output == {"text": DENIED_ANSWER}
        names = [e for _, e, _ in await events(log, "r2")]
        assert "tool_output_denied" in names
        assert "tool_output_available" not in names


async def test_answers_are_checked_against_what_the_run_waits_for() -> None:
    log = MemoryLog()
    async with Runs(log, [demo]) as runs:
        await runs.start("demo", {"prompt": "/approve", "pace": 0}, "r3")
        paused = await settled(runs, "r3")
        (pending,) = paused.pending_tools or []
        call = pending["toolCallId"]
        wrong: list[tuple[Any, str]] = [
            ({"toolAnswers": [{"toolCallId": "other", "approved": True}]}, "waits for"),
            ({"toolAnswers": [{"toolCallId": call, "approved": True,
                               "approvalId": "forged"}]}, "not the one asked for"),
            ({"toolAnswers": [{"toolCallId": call, "approvalId": pending["approvalId"]}]},
             "approved: true or false"),
            ({"toolAnswers": "yes"}, "must be a list"),
        ]
        for body, words in wrong:
            with pytest.raises(ToolAnswerError, match=words):
                await runs.resume("r3", body, "bad")
        assert (await runs.get("r3")).status == "paused"
        # a resume that answers nothing: the call stays pending, nothing is emitted again
        head = paused.head
        await runs.resume("r3", {"note": "later"}, "empty")
        again = await settled(runs, "r3")
        assert again.status == "paused"
        assert again.pending_tools == paused.pending_tools
        assert again.head == head


async def client_tool(run: RunContext[Chat]) -> Completed:
    """An agent whose tool runs in the browser: its output comes back with the resume."""
    try:
        where = await run.tool_call("get_location", {"precision": "city"}, execute=None,
                                    call_id="loc")
    except Exception as exc:
        return Completed(output={"error": str(exc)})
    return Completed(output={"where": where})


async def test_a_client_tool_pauses_for_its_output_which_is_emitted_and_returned() -> None:
    log = MemoryLog()
    async with Runs(log, [client_tool]) as runs:
        for run_id, answer, output in [
                ("c1", {"toolCallId": "loc", "output": {"city": "Paris"}},
                 {"where": {"city": "Paris"}}),
                ("c2", {"toolCallId": "loc", "errorText": "the user said no"},
                 {"error": "the user said no"})]:
            await runs.start("client_tool", None, run_id)
            paused = await settled(runs, run_id)
            assert paused.pending_tools is not None
            assert paused.pending_tools[0]["kind"] == "output"
            with pytest.raises(ToolAnswerError, match="needs output or errorText"):
                await runs.resume(run_id, {"toolAnswers": [{"toolCallId": "loc"}]}, "x")
            await runs.resume(run_id, {"toolAnswers": [answer]}, "ok")
            done = await settled(runs, run_id)
            assert done.output == output
            last = (await events(log, run_id))[-1]
            assert last[1] == ("tool_output_available" if "output" in answer
                               else "tool_output_error")


async def two_approvals(run: RunContext[Chat]) -> Completed | Paused:
    """Two calls in one step wait together (the low-level API a model's tool loop uses)."""
    if not run.resumed:
        for call_id in ("a", "b"):
            call = await ToolCall.start(run, "send", call_id=call_id)
            await call.input_available({"to": call_id})
            await call.request_approval(f"ap-{call_id}")
        return run.pause({"round": 1})
    results: dict[str, Any] = {}
    for pending in list(run.pending_tools):
        call = ToolCall.waiting(run, pending["toolCallId"])
        answer = run.tool_answer(call.call_id)
        assert answer is not None
        if answer.approved:
            await call.output({"sent": True})
            results[call.call_id] = "sent"
        else:
            await call.deny()
            results[call.call_id] = ToolDenied(answer.reason).reason
    return Completed(output={"state": run.state, "results": results})


async def test_two_pending_calls_in_one_pause() -> None:
    log = MemoryLog()
    async with Runs(log, [two_approvals]) as runs:
        await runs.start("two_approvals", None, "t1")
        paused = await settled(runs, "t1")
        assert [p["approvalId"] for p in paused.pending_tools or []] == ["ap-a", "ap-b"]
        assert paused.state == {"round": 1}
        await runs.resume("t1", {"toolAnswers": [
            {"toolCallId": "a", "approvalId": "ap-a", "approved": True},
            {"toolCallId": "b", "approvalId": "ap-b", "approved": False, "reason": "no"}]}, "r")
        done = await settled(runs, "t1")
        assert done.output == {"state": {"round": 1}, "results": {"a": "sent", "b": "no"}}


async def test_over_http_the_dispatcher_sees_pending_tools_and_a_wrong_answer_is_422() -> None:
    """``/status`` lists ``pendingTools``; a resume answering no pending call is ``422
    ToolAnswerError`` (the client raises it) and the run still waits; the right answer ends it."""
    import httpx

    from helpers.runs_server import serving
    from streamwire.client import AsyncDispatcher
    from streamwire.errors import ToolAnswerError
    from streamwire.frames import ChunkCodec

    with serving(MemoryLog, [demo]) as srv:
        async with httpx.AsyncClient() as client:
            d = AsyncDispatcher(client, srv.base, decode=ChunkCodec(Chat).decode)
            run = await d.start("demo", {"prompt": "/approve", "pace": 0}, run_id="h1")
            _ = [m async for m in run]  # the reply up to the pause
            status = await d.status("h1")
            assert status["status"] == "paused"
            [pending] = status["pendingTools"]
            assert (pending["kind"], pending["toolName"]) == ("approval", "delete_file")
            raw = await client.post(f"{srv.base}/runs/h1/resume", json={
                "resumeId": "bad", "input": {"toolAnswers": [{"toolCallId": "nope"}]}})
            assert raw.status_code == 422
            assert raw.json()["code"] == "ToolAnswerError"
            with pytest.raises(ToolAnswerError, match="not the one asked for"):
                await d.resume("h1", {"toolAnswers": [{
                    "toolCallId": pending["toolCallId"], "approvalId": "forged",
                    "approved": True}]}, resume_id="forged")
            assert (await d.status("h1"))["status"] == "paused"
            resumed = await d.resume("h1", {"toolAnswers": [{
                "toolCallId": pending["toolCallId"], "approvalId": pending["approvalId"],
                "approved": True}]}, resume_id="yes", cursor=status["head"])
            items = [m async for m in resumed]
            assert resumed.outcome is not None
            assert resumed.outcome.output == {"text": APPROVED_ANSWER}
            assert items[0] is not None
            assert items[0].name == "tool_output_available"
