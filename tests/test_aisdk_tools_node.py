"""Tool replies through the real AI SDK client: ``tests/node/tools.test.mjs`` (node's own test
runner) reads the UI message streams written here, by the tool helper through the encoder, with
the pinned ``ai`` package's ``DefaultChatTransport`` (every chunk validated by its v6 schema) and
``readUIMessageStream``, and checks the final ``UIMessage``: a two-step tool reply (a
``step-start`` part per step, ``tool-get_weather`` in state ``output-available`` with its input
and output, then the text), an approval request (``approval-requested``, its ``approval.id``), a
denial, and a failure while a tool runs (the part ends ``output-error`` before the error)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio

from conftest import require
from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.chat import Chat
from streamwire.contract import Message
from streamwire.frames import ChunkCodec, EndFrame, FailFrame, TerminalFrame
from streamwire.runs._tools import ToolCall, step_finish, step_start, tool_call

ROOT = Path(__file__).resolve().parent.parent
CODEC = ChunkCodec(Chat)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[Message[Chat, Any]] = []

    async def emit(self, msg: Message[Chat, Any]) -> int:
        self.sent.append(msg)
        return len(self.sent)


def sse_body(messages: list[Message[Chat, Any]], terminal: TerminalFrame) -> bytes:
    encoder = UIMessageStreamEncoder("reply-1")
    frames = [*(CODEC.frame(i, msg) for i, msg in enumerate(messages, 1)), terminal]
    return encoder.encode_start() + b"".join(encoder.feed(frame) for frame in frames)


async def get_weather(args: Any) -> Any:
    return {"city": args["city"], "celsius": 18, "sky": "clear"}


async def two_steps() -> bytes:
    run = Recorder()
    await step_start(run)
    await run.emit(Chat.chunk({"chunk": "Let me check the weather."}))
    await tool_call(run, "get_weather", {"city": "Paris"}, execute=get_weather, call_id="call-1")
    await step_finish(run)
    await step_start(run)
    for word in ("It is ", "18 °C ", "in Paris."):
        await run.emit(Chat.chunk({"chunk": word}))
    await step_finish(run)
    return sse_body(run.sent, EndFrame("completed"))


async def approval_requested() -> bytes:
    run = Recorder()
    await step_start(run)
    call = await ToolCall.start(run, "delete_file", call_id="call-2")
    await call.input_delta('{"path":')
    await call.input_delta('"notes.txt"}')
    await call.input_available({"path": "notes.txt"})
    await call.request_approval("approval-1")
    return sse_body(run.sent, EndFrame("paused", state={"approval": "approval-1"}))


async def denied() -> bytes:
    run = Recorder()
    call = await ToolCall.start(run, "delete_file", call_id="call-3")
    await call.input_available({"path": "notes.txt"})
    await call.request_approval("approval-2")
    await call.deny()
    await step_finish(run)
    await step_start(run)
    await run.emit(Chat.chunk({"chunk": "I left notes.txt alone."}))
    return sse_body(run.sent, EndFrame("completed"))


async def failed_mid_tool() -> bytes:
    run = Recorder()
    call = await ToolCall.start(run, "get_weather", call_id="call-4")
    await call.input_delta('{"city":"Pa')
    return sse_body(run.sent, FailFrame("the worker running the agent shut down", True,
                                        {"code": "WORKER_SHUTDOWN"}))


def _node() -> str:
    node = shutil.which("node")
    require(node is not None, "Node.js is not installed")
    require((ROOT / "node_modules" / "ai" / "package.json").exists(),
            "the ai package is not installed: run `npm ci` (.ci/run does)")
    assert node is not None
    return node


async def write_replies(folder: Path) -> None:
    for name, body in [("two-steps", await two_steps()), ("approval", await approval_requested()),
                       ("denied", await denied()), ("failed", await failed_mid_tool())]:
        (folder / f"{name}.sse").write_bytes(body)


def test_the_ai_sdk_client_builds_tool_parts_steps_and_approvals(tmp_path: Path) -> None:
    node = _node()
    anyio.run(write_replies, tmp_path)
    env = {**os.environ, "STREAMWIRE_TOOL_REPLIES": str(tmp_path)}
    done = subprocess.run([node, "--test", "--test-reporter=spec", "tests/node/tools.test.mjs"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "pass 4" in report, report
    assert "fail 0" in report, report
