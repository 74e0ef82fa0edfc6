"""The ``/api/chat`` routes over real uvicorn (memory, SQLite and Redis logs): a reply as a UI message
stream, exactly one run per submit, resume after a reload (``204`` when nothing runs, the replay
from the start, ``Last-Event-ID`` from that event on), stop, D-4's ending, the authorization hook
and the refusals."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request

from helpers.chaos_proxy import ServerThread
from helpers.demo_server import TOKEN, DemoServer
from helpers.runs_server import Backend, backend
from streamwire.chat import Chat
from streamwire.errors import UsageError
from streamwire.runs import Completed, RunContext
from streamwire.sse import SSEDecoder

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

CALLS: list[str] = []
RELEASE: dict[str, anyio.Event] = {}


async def echo(run: RunContext[Chat]) -> Completed:
    """Streams the prompt's words; ``hold`` waits (polling) until the test lets it go on."""
    data: dict[str, Any] = run.input
    CALLS.append(data["prompt"])
    await run.emit(Chat.reasoning({"chunk": "thinking"}))
    for i, word in enumerate(data["prompt"].split()):
        await run.emit(Chat.chunk({"chunk": word + " "}))
        if i == 1 and data.get("hold"):
            await anyio.sleep(60)  # until stopped
    if "fail" in data["prompt"]:
        raise RuntimeError("secret internal detail")
    await run.emit(Chat.sources([{"url": "https://example.org", "title": "Example"}]))
    return Completed(output={"stopReason": "end_turn"})


def body(text: str, chat: str = "c1", user_id: str = "u1", **extra: Any) -> dict[str, Any]:
    return {"id": chat, "trigger": "submit-message", "messageId": None, **extra,
            "messages": [{"id": "u0", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
                         {"id": "a0", "role": "assistant", "parts": [{"type": "text", "text": "yo"}]},
                         {"id": user_id, "role": "user", "parts": [{"type": "text", "text": text}]}]}


def events(raw: bytes) -> list[tuple[str, Any]]:
    decoder = SSEDecoder()
    return [(e.id, e.data if e.data == "[DONE]" else json.loads(e.data))
            for e in decoder.feed(raw) + decoder.flush()]


def text_of(evs: list[tuple[str, Any]]) -> str:
    return "".join(d["delta"] for _, d in evs if isinstance(d, dict) and d["type"] == "text-delta")


AUTH_SEEN: list[tuple[str, str]] = []


def authorize(request: Request, name: str, access: str) -> None:
    AUTH_SEEN.append((name, access))
    if name == "forbidden":
        raise HTTPException(403, "not your chat")


@pytest.fixture
def server(backend: Backend) -> Iterator[ServerThread]:
    from streamwire.server import create_app

    CALLS.clear()
    app = create_app(backend.factory(), authorize=authorize, agents=[echo], chat_agent="echo")
    with ServerThread(app) as srv:
        yield srv


async def test_a_reply_is_a_ui_message_stream_of_one_run(server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        response = await client.post("/api/chat", json=body("one two three", pace=0))
        assert response.status_code == 200, response.text
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["content-type"].startswith("text/event-stream")
        evs = events(response.content)
    start = evs[0][1]
    assert start["type"] == "start"
    assert start["messageId"].endswith("-assistant")
    assert text_of(evs) == "one two three "
    assert [d for _, d in evs[-3:]] == [{"type": "finish-step"},
                                         {"type": "finish", "finishReason": "stop"}, "[DONE]"]
    assert CALLS == ["one two three"]
    assert ("c1", "write") in AUTH_SEEN


async def test_a_double_submit_starts_one_run_and_both_get_the_reply(server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        first, second = await _both(client.post("/api/chat", json=body("same words here")),
                                    client.post("/api/chat", json=body("same words here")))
        assert first.status_code == second.status_code == 200
        assert events(first.content) == events(second.content)
        assert CALLS == ["same words here"], "exactly one run"
        edited = await client.post("/api/chat", json=body("other words now"))
        assert text_of(events(edited.content)) == "other words now "
        again = await client.post("/api/chat", json=body("same words here", trigger="x"))
        assert again.status_code == 400
        regen = await client.post("/api/chat", json=body("same words here",
                                                          trigger="regenerate-message"))
        assert text_of(events(regen.content)) == "same words here "
    assert CALLS == ["same words here", "other words now", "same words here"]


async def _both(a: Any, b: Any) -> tuple[httpx.Response, httpx.Response]:
    out: list[httpx.Response] = []

    async def run(coro: Any) -> None:
        out.append(await coro)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, a)
        tg.start_soon(run, b)
    return out[0], out[1]


async def test_resume_after_a_reload_then_stop(server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        assert (await client.get("/api/chat/c9/stream")).status_code == 204, "no reply yet"
        seen = b""
        async with client.stream("POST", "/api/chat", json=body("a b c d", chat="c9", hold=True)
                                 ) as response:
            async for piece in response.aiter_bytes():
                seen += piece
                if text_of(events(seen)) == "a b ":
                    break  # the page reloads: this connection is gone
        resumed = b""
        async with client.stream("GET", "/api/chat/c9/stream") as response:
            assert response.status_code == 200
            async for piece in response.aiter_bytes():
                resumed += piece
                if text_of(events(resumed)) == "a b ":
                    break
        replay = events(resumed)
        assert replay[0][1]["messageId"] == events(seen)[0][1]["messageId"], "the same message"
        cursor = replay[-1][0]
        stop = await client.post("/api/chat/c9/stop", json={"runId": "not-this-one"})
        assert stop.status_code == 409
        rest = b""
        async with client.stream("GET", "/api/chat/c9/stream",
                                 headers={"Last-Event-ID": cursor}) as response:
            stopped = await client.post("/api/chat/c9/stop")
            assert stopped.status_code == 200, stopped.text
            assert stopped.json()["status"] == "interrupted"
            async for piece in response.aiter_bytes():
                rest += piece
        tail = events(rest)
        full = replay + tail
        assert [i for i, _ in full] == sorted({i for i, _ in full}, key=_position), "no event twice"
        assert tail[0][0] != cursor
        assert [d for _, d in tail[-3:]] == [{"type": "abort", "reason": "interrupted"},
                                              {"type": "finish", "finishReason": "stop"}, "[DONE]"]
        assert (await client.get("/api/chat/c9/stream")).status_code == 204, "it ended"
        after = await client.get("/api/chat/c9/stream", headers={"Last-Event-ID": cursor})
        assert events(after.content) == tail, "with a cursor, the rest even once it ended"


def _position(event_id: str) -> tuple[int, int]:
    seq, _, index = event_id.partition(".")
    return int(seq), int(index or 0)


async def test_d4_a_failed_run_ends_with_error_then_finish_error(server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        response = await client.post("/api/chat", json=body("please fail now", chat="cf"))
    evs = [d for _, d in events(response.content)]
    assert text_of(events(response.content)) == "please fail now "
    assert evs[-3]["type"] == "error"
    assert "secret" not in evs[-3]["errorText"], "no internal text by default"
    assert evs[-2:] == [{"type": "finish", "finishReason": "error"}, "[DONE]"]


async def test_refusals(server: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        cases = [
            (await client.post("/api/chat", content=b"{not json", headers={"content-type": "application/json"}), 400),
            (await client.post("/api/chat", json={"id": 7, "messages": []}), 422),
            (await client.post("/api/chat", json={"id": "c1", "messages": []}), 400),
            (await client.post("/api/chat", json=body("x", chat="bad/id")), 400),
            (await client.post("/api/chat", json=body("x", chat="forbidden")), 403),
            (await client.get("/api/chat/forbidden/stream"), 403),
            (await client.post("/api/chat/forbidden/stop"), 403),
            (await client.get("/api/chat/c1/stream", headers={"Last-Event-ID": "x"}), 400),
            (await client.get("/api/chat/" + "c" * 200 + "/stream"), 400),
            (await client.post("/api/chat/nothing-here/stop"), 404),
        ]
    for response, status in cases:
        assert response.status_code == status, (response.request.url, response.text)
        assert "error" in response.json()
    assert ("forbidden", "read") in AUTH_SEEN


def test_chat_agent_must_be_a_served_agent() -> None:
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    with pytest.raises(UsageError, match="not one of the served agents"):
        create_app(MemoryLog(), allow_anonymous_writes=True, agents=[echo], chat_agent="nope")
    with pytest.raises(UsageError, match="needs agents="):
        create_app(MemoryLog(), allow_anonymous_writes=True, chat_agent="echo")


def test_a_server_shutting_down_ends_open_replies_as_drops_at_once() -> None:
    """SIGTERM with a reply streaming: the server drains it (no ``finish``, no ``[DONE]``: the
    client sees a drop and resumes elsewhere) and exits within its grace period, instead of
    waiting for the reply to end (with no drain of the runs: ``--drain-timeout 0``)."""
    server = DemoServer("--grace", "5", "--drain-timeout", "0")
    server.start()
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as client:
            body = {"id": "slow", "trigger": "submit-message", "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi /slow"}]}]}
            seen = b""
            with client.stream("POST", f"{server.url}/api/chat", json=body) as response:
                for piece in response.iter_bytes():
                    seen += piece
                    if b"text-delta" in seen and server.proc is not None:
                        stopped_at = time.monotonic()
                        server.proc.send_signal(signal.SIGTERM)
                        server_proc, server.proc = server.proc, None
                assert server_proc.wait(10) == 0
                took = time.monotonic() - stopped_at
    finally:
        server.stop()
    kinds = [d["type"] for _, d in events(seen) if isinstance(d, dict)]
    assert "text-delta" in kinds
    assert "finish" not in kinds, "a drop, not an end"
    assert not seen.rstrip().endswith(b"[DONE]")
    assert took < 4, f"the shutdown waited {took:.1f} s for the reply (grace: 5 s)"


def test_the_openapi_document_lists_the_chat_routes_and_its_refs_resolve() -> None:
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    doc = create_app(MemoryLog(), allow_anonymous_writes=True, agents=[echo],
                     chat_agent="echo").openapi_document()
    assert doc["paths"]["/api/chat"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    assert "204" in doc["paths"]["/api/chat/{chat_id}/stream"]["get"]["responses"]
    assert "409" in doc["paths"]["/api/chat/{chat_id}/stop"]["post"]["responses"]
    refs = [ref for ref in json.dumps(doc).split('"$ref": "')[1:]]
    for ref in refs:
        kind, name = ref.split('"')[0].removeprefix("#/components/").split("/")
        assert name in doc["components"][kind], ref
    plain = create_app(MemoryLog(), allow_anonymous_writes=True, agents=[echo])
    assert "/api/chat" not in plain.openapi_document()["paths"]
