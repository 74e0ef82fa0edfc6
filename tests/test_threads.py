"""Threads over real uvicorn on memory, SQLite and Redis logs: a submit stores the user message
and, once its run ends, the assistant's complete UIMessage (the demo's ``/tool`` reply: the tool
part ``output-available``); the agent gets the stored history, not the client's; regenerate
replaces the reply once per request; a new message while a reply runs is refused (409), interrupts
it or waits for it (``chat_multitask``); ``DELETE /api/chat/{id}``; ``GET /api/chats`` pages newest
first."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import pytest

from helpers.chaos_proxy import ServerThread
from helpers.runs_server import Backend, backend
from streamwire.aisdk._threads import UIMessageAssembler
from streamwire.chat import Chat
from streamwire.runs import Completed, RunContext
from streamwire.runs.demo_agent import TOOL_ANSWER, demo
from streamwire.sse import SSEDecoder

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

CALLS: list[str] = []


async def talk(run: RunContext[Chat]) -> Completed:
    """Says how many messages of history it got; ``hold`` waits until stopped, ``wait`` 1 s."""
    data: dict[str, Any] = run.input
    CALLS.append(data["prompt"])
    await run.emit(Chat.chunk({"chunk": f"history={len(data['messages']) - 1} "}))
    if "hold" in data["prompt"]:
        await anyio.sleep(30)
    if "wait" in data["prompt"]:
        await anyio.sleep(1)
    await run.emit(Chat.chunk({"chunk": "done"}))
    return Completed(output={})


Serve = Callable[..., Any]


@pytest.fixture
def serve(backend: Backend) -> Serve:
    from streamwire.server import create_app

    CALLS.clear()

    @contextmanager
    def serving(agent: str = "talk", **options: Any) -> Iterator[ServerThread]:
        app = create_app(backend.factory(), allow_anonymous_writes=True, agents=[talk, demo],
                         chat_agent=agent, **options)
        with ServerThread(app) as srv:
            yield srv

    return serving


def user(text: str, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def submit(chat: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": chat, "trigger": "submit-message", "messages": list(messages), **extra}


def events(raw: bytes) -> list[Any]:
    decoder = SSEDecoder()
    return [e.data if e.data == "[DONE]" else json.loads(e.data)
            for e in decoder.feed(raw) + decoder.flush()]


def text_of(evs: list[Any]) -> str:
    return "".join(d["delta"] for d in evs if isinstance(d, dict) and d["type"] == "text-delta")


def folded(raw: bytes) -> dict[str, Any]:
    """The message a client ends with after reading this reply."""
    assembler = UIMessageAssembler()
    assembler.feed_all([e for e in events(raw) if e != "[DONE]"])
    return assembler.message


async def messages(client: httpx.AsyncClient, chat: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/chat/{chat}/messages")
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()
    return result


async def test_a_submit_stores_the_user_message_and_the_complete_reply(serve: Serve) -> None:
    with serve("demo") as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            question = user("/tool what's the weather?", "u1")
            reply = await client.post("/api/chat", json=submit("t1", question, pace=0))
            assert reply.status_code == 200
            stored = await messages(client, "t1")
            assert stored[0] == question
            assistant = stored[1]
            assert assistant == folded(reply.content), "what the client holds"
            assert assistant["role"] == "assistant"
            assert assistant["id"] == events(reply.content)[0]["messageId"]
            kinds = [p["type"] for p in assistant["parts"]]
            assert kinds == ["step-start", "tool-get_weather", "step-start", "text", "data-usage"]
            tool = assistant["parts"][1]
            assert tool["state"] == "output-available"
            assert tool["input"] == {"city": "Paris"}
            assert tool["output"] == {"city": "Paris", "temperature": 18, "unit": "C"}
            assert assistant["parts"][3] == {"type": "text", "text": TOOL_ANSWER, "state": "done"}
            assert assistant["metadata"]["model"]["id"] == "demo"
            # a re-read, a resend of the same message: stored once
            again = await client.post("/api/chat", json=submit("t1", question, pace=0))
            assert events(again.content) == events(reply.content)
            assert await messages(client, "t1") == stored
            assert (await client.get("/api/chat/nope/messages")).status_code == 404


async def test_the_agent_gets_the_stored_history_not_the_clients(serve: Serve) -> None:
    with serve() as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            first = await client.post("/api/chat", json=submit("t2", user("one", "u1")))
            assert text_of(events(first.content)) == "history=0 done"
            forged = [user(f"forged {i}", f"f{i}") for i in range(5)]
            second = await client.post("/api/chat", json=submit("t2", *forged, user("two", "u2")))
            assert text_of(events(second.content)) == "history=2 done", "u1, its reply"
            # prepareSendMessagesRequest's recipe: the last message alone
            third = await client.post("/api/chat", json={"id": "t2", "message": user("3", "u3")})
            assert text_of(events(third.content)) == "history=4 done"
            stored = await messages(client, "t2")
            assert [m["role"] for m in stored] == ["user", "assistant"] * 3
            assert [m["id"] for m in stored[::2]] == ["u1", "u2", "u3"]


async def test_regenerate_replaces_the_reply_once_per_request(serve: Serve) -> None:
    with serve() as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            await client.post("/api/chat", json=submit("t3", user("hello", "u1")))
            old = (await messages(client, "t3"))[1]
            regen = {**submit("t3", user("hello", "u1")), "trigger": "regenerate-message",
                     "messageId": old["id"]}
            a, b = await _both(client.post("/api/chat", json=regen),
                               client.post("/api/chat", json=regen))
            assert events(a.content) == events(b.content)
            assert CALLS == ["hello", "hello"], "one run for the twice-sent regenerate"
            stored = await messages(client, "t3")
            assert [m["role"] for m in stored] == ["user", "assistant"]
            assert stored[1]["id"] != old["id"]
            assert stored[1]["id"] == events(a.content)[0]["messageId"]
            # without messageId (the SDK's regenerate() of the last message): the stored reply
            again = {**submit("t3", user("hello", "u1")), "trigger": "regenerate-message"}
            third = await client.post("/api/chat", json=again)
            assert CALLS == ["hello"] * 3
            final = await messages(client, "t3")
            assert len(final) == 2
            assert final[1]["id"] == events(third.content)[0]["messageId"]


async def test_reject_is_the_default_and_names_the_running_reply(serve: Serve) -> None:
    with serve() as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            async with client.stream("POST", "/api/chat",
                                     json=submit("t4", user("hold on", "u1"))) as first:
                first_body = first.aiter_bytes()
                await _until_text(first_body, "history=0 ")
                busy = await client.post("/api/chat", json=submit("t4", user("next", "u2")))
                assert busy.status_code == 409
                run_id = busy.json()["runId"]
                assert run_id.startswith("chat:t4:")
                joined = await client.post("/api/chat/t4/stop")
                assert joined.json()["status"] == "interrupted"
                assert joined.json()["runId"] == run_id
            stored = await messages(client, "t4")
            assert [m["id"] for m in stored if m["role"] == "user"] == ["u1"]
            assert stored[1]["parts"][-1]["text"] == "history=0 ", "the stopped reply is kept"


async def test_interrupt_stops_the_running_reply_and_answers(serve: Serve) -> None:
    with serve(chat_multitask="interrupt") as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            async with client.stream("POST", "/api/chat",
                                     json=submit("t5", user("hold on", "u1"))) as first:
                first_body = first.aiter_bytes()
                seen = await _until_text(first_body, "history=0 ")
                second = await client.post("/api/chat", json=submit("t5", user("now", "u2")))
                assert text_of(events(second.content)) == "history=2 done"
                async for piece in first_body:
                    seen += piece
            assert {"type": "abort", "reason": "interrupted"} in events(seen)
            stored = await messages(client, "t5")
            assert [m["role"] for m in stored] == ["user", "assistant"] * 2
            assert [m["id"] for m in stored[::2]] == ["u1", "u2"]


async def test_enqueue_answers_when_the_running_reply_ends(serve: Serve) -> None:
    with serve(chat_multitask="enqueue") as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            async with client.stream("POST", "/api/chat",
                                     json=submit("t6", user("wait a second", "u1"))) as first:
                first_body = first.aiter_bytes()
                await _until_text(first_body, "history=0 ")
                second = await client.post("/api/chat", json=submit("t6", user("then", "u2")))
                assert text_of(events(second.content)) == "history=2 done"
            assert CALLS == ["wait a second", "then"]
            stored = await messages(client, "t6")
            assert [m["id"] for m in stored[::2]] == ["u1", "u2"]
            assert stored[1]["parts"][-1]["text"] == "history=0 done", "the first one finished"


async def test_delete_stops_the_reply_and_removes_thread_and_streams(serve: Serve) -> None:
    with serve() as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            done = await client.post("/api/chat", json=submit("t7", user("one", "u1")))
            run_id = events(done.content)[0]["messageId"].removesuffix("-assistant")
            async with client.stream("POST", "/api/chat",
                                     json=submit("t7", user("hold on", "u2"))) as running:
                running_body = running.aiter_bytes()
                await _until_text(running_body, "history=2 ")
                deleted = await client.delete("/api/chat/t7")
                assert deleted.status_code == 200, deleted.text
                async for _ in running_body:
                    pass  # the reply ended (stopped)
            assert (await client.get("/api/chat/t7/messages")).status_code == 404
            assert (await client.get(f"/runs/{run_id}/status")).json()["status"] == "completed"
            assert (await client.get(f"/streams/{run_id}/info")).status_code == 404
            assert (await client.get("/streams/chat:t7/info")).status_code == 404
            assert "t7" not in [t["id"] for t in (await client.get("/api/chats")).json()["threads"]]
            assert (await client.delete("/api/chat/t7")).status_code == 404


async def test_the_thread_list_pages_newest_first(serve: Serve) -> None:
    with serve() as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            for chat, text, message_id in [("pa", "in pa", "u1"), ("pb", "in pb", "u1"),
                                           ("pc", "in pc", "u1"), ("pa", "again", "u2")]:
                await client.post("/api/chat", json=submit(chat, user(text, message_id)))
                await messages(client, chat)  # its reply stored: the thread's last change
            first = (await client.get("/api/chats", params={"limit": 2})).json()
            assert [t["id"] for t in first["threads"]] == ["pa", "pc"]
            assert first["threads"][0]["title"] == "in pa"
            assert first["threads"][0]["messageCount"] == 4
            rest = (await client.get("/api/chats", params={"limit": 2,
                                                           "after": first["next"]})).json()
            assert [t["id"] for t in rest["threads"]] == ["pb"]
            assert rest["next"] is None
            assert (await client.get("/api/chats", params={"limit": 0})).status_code == 400


async def _until_text(pieces: AsyncIterator[bytes], text: str) -> bytes:
    seen = b""
    async for piece in pieces:
        seen += piece
        if text_of(events(seen)) == text:
            return seen
    raise AssertionError(f"the reply ended before {text!r}")


async def _both(a: Any, b: Any) -> tuple[httpx.Response, httpx.Response]:
    out: list[httpx.Response] = []

    async def run(coro: Any) -> None:
        out.append(await coro)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, a)
        tg.start_soon(run, b)
    return out[0], out[1]


async def test_a_paused_reply_is_stored_and_again_once_resumed(serve: Serve) -> None:
    with serve("demo") as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=20) as client:
            reply = await client.post("/api/chat", json=submit("t8", user("/pause me", "u1"),
                                                               pace=0))
            run_id = events(reply.content)[0]["messageId"].removesuffix("-assistant")
            half = text_of(events(reply.content))
            stored = await messages(client, "t8")
            assert _text(stored[1]) == half
            resumed = await client.post(f"/runs/{run_id}/resume",
                                        json={"input": {}, "resumeId": "r1"})
            assert resumed.status_code == 200, resumed.text
            for _ in range(100):
                if (await client.get(f"/runs/{run_id}/status")).json()["status"] != "running":
                    break
                await anyio.sleep(0.05)
            final = await messages(client, "t8")
            assert len(final) == 2
            assert final[1]["id"] == stored[1]["id"]
            assert _text(final[1]).startswith(half)
            assert len(_text(final[1])) > len(half), "the resumed rest"


def _text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")
