"""Runs a relaying chat agent through a real ``Runs`` over a ``MemoryLog`` and reads back what a
client would: the run's chat events, the AI SDK UI message stream ``useChat`` reads, and the
run's ``/status`` body."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from streamwire.aisdk import UIMessageStreamEncoder
from streamwire.chat import Chat
from streamwire.frames import ChunkFrame, EndFrame, FailFrame, TerminalFrame
from streamwire.log.memory import MemoryLog
from streamwire.runs import Completed, RunContext, Runs

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Relayed:
    events: list[tuple[str, Any]]
    ui: list[dict[str, Any]]
    status: dict[str, Any]
    terminal: TerminalFrame

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def text(self) -> str:
        return "".join(data["chunk"] for name, data in self.events if name == "chunk")

    def of(self, name: str) -> list[Any]:
        return [data for event, data in self.events if event == name]


async def run_relay(call: Callable[[RunContext[Chat]], Awaitable[Completed]], *,
                    stop_after: float | None = None) -> Relayed:
    """Run ``call`` as the agent ``relaying`` and read back its stream (``stop_after``: stop the
    run that many seconds after its start)."""

    async def relaying(run: RunContext[Chat]) -> Completed:
        return await call(run)

    log = MemoryLog()
    async with Runs(log, [relaying]) as runs:
        await runs.start("relaying", {}, run_id="r1")
        if stop_after is not None:
            await anyio.sleep(stop_after)
            await runs.stop("r1")
        with anyio.fail_after(10):
            while (await runs.get("r1")).status == "running":  # noqa: ASYNC110
                await anyio.sleep(0.01)
        status = await runs.status("r1")
        events: list[tuple[str, Any]] = []
        ui: list[dict[str, Any]] = []
        encoder = UIMessageStreamEncoder("m1")
        terminal: TerminalFrame | None = None
        async for frame in log.read("r1"):
            ui += encoder.chunks(frame)
            if isinstance(frame, ChunkFrame):
                envelope = json.loads(bytes(frame.chunk))
                events.append((envelope["event"], envelope["data"]))
            elif isinstance(frame, EndFrame | FailFrame):
                terminal = frame
        assert encoder.skipped == 0, "the client would throw on a chunk"
    await log.aclose()
    assert terminal is not None
    return Relayed(events, ui, status, terminal)


def ui_types(ui: list[dict[str, Any]]) -> list[str]:
    return [chunk["type"] for chunk in ui]


def assert_failed_in_users_words(relayed: Relayed, *, provider: str, kind: str,
                                 words: str) -> None:
    """The run failed ``PROVIDER_ERROR``: its open tool part was closed with ``words`` before
    the end, the reply's ``error`` says ``words``, and no provider text reached anyone."""
    assert relayed.status["status"] == "failed"
    assert relayed.status["errorDetail"] == {"code": "PROVIDER_ERROR", "provider": provider,
                                             "kind": kind}
    assert relayed.status["error"] == words
    name, data = relayed.events[-1]
    assert name == "tool_output_error"
    assert data["errorText"] == words
    types = ui_types(relayed.ui)
    assert types[-4:] == ["finish-step", "message-metadata", "error", "finish"]
    assert relayed.ui[-2] == {"type": "error", "errorText": words}
    assert relayed.ui[-3]["messageMetadata"]["error"]["code"] == "PROVIDER_ERROR"
    assert relayed.ui[-1] == {"type": "finish", "finishReason": "error"}
    everything = json.dumps([relayed.events, relayed.ui, relayed.status])
    assert "internal trace" not in everything
