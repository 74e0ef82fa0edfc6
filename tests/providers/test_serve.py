"""End to end: ``streamwire serve`` (a real subprocess) with chat agents that relay the official
SDKs' streams from the replay server; ``POST /api/chat`` answers the AI SDK stream ``useChat``
reads, and the next message's model request carries the thread's history through
``messages_from_ui``."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from helpers.provider_replay import ReplayServer
from helpers.runs_server import SRC, TESTS, free_port, serve_cli
from streamwire.sse import SSEDecoder


def ui_events(raw: bytes) -> list[Any]:
    decoder = SSEDecoder()
    return [e.data if e.data == "[DONE]" else json.loads(e.data)
            for e in decoder.feed(raw) + decoder.flush()]


def message(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def test_use_chat_through_serve(replay: ReplayServer) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}",
           "STREAMWIRE_TEST_REPLAY": replay.base}
    env.pop("STREAMWIRE_TOKEN", None)
    with serve_cli("--agent", "providers.agents:gpt", "--agent", "providers.agents:claude",
                   "--token", "t0ken", "--log-level", "warning", port=port, env=env), \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20,
                         headers={"authorization": "Bearer t0ken"}) as http:
        first = http.post("/api/chat", json={"id": "c1", "trigger": "submit-message",
                                             "agent": "gpt", "messages": [message("u1", "hi")]})
        assert first.status_code == 200, first.text
        got = ui_events(first.content)
        assert "".join(e["delta"] for e in got if e != "[DONE]" and e["type"] == "text-delta"
                       ) == "Hello, world!"
        usage = [e for e in got if e != "[DONE]" and e["type"] == "data-usage"]
        assert usage[-1]["data"]["totalTokens"] == 30
        assert got[-2:] == [{"type": "finish", "finishReason": "stop"}, "[DONE]"]
        assert replay.requests[-1].body["messages"] == [{"role": "user", "content": "hi"}]

        second = http.post("/api/chat", json={"id": "c1", "trigger": "submit-message",
                                              "agent": "claude",
                                              "messages": [message("u2", "and again")]})
        assert second.status_code == 200, second.text
        kinds = [e["type"] for e in ui_events(second.content) if e != "[DONE]"]
        assert "reasoning-delta" in kinds
        assert "text-delta" in kinds
        # the thread's history (the first reply included) went to the model, Anthropic's shape
        sent = replay.requests[-1]
        assert sent.path == "/anthropic_thinking/v1/messages"
        assert sent.body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello, world!"}]},
            {"role": "user", "content": [{"type": "text", "text": "and again"}]}]
