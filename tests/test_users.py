"""Users over real uvicorn (memory, SQLite and Redis logs): ``authorize`` names the caller (a
``User``, a user id, or None), ``jwt_bearer`` reads HS256 JWTs, what a user starts is theirs
(other callers get what a missing run or chat answers), ``GET /streams`` lists runs' and chats'
streams only to their owner, the agent sees ``run.user``; chat agents picked by the body's
``agent``; ``streamwire token`` and ``serve --jwt-secret``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import jwt
import pytest
from starlette.requests import Request

from helpers.chaos_proxy import ServerThread
from helpers.runs_server import SRC, TESTS, Backend, backend, free_port, serve_cli
from streamwire.chat import Chat
from streamwire.cli import main
from streamwire.runs import Completed, RunContext
from streamwire.server import User, create_app, jwt_bearer
from streamwire.server._auth import mint_token
from streamwire.sse import SSEDecoder

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

SECRET = "s" * 16 + "-a-test-secret-of-32+-bytes"
USERS: list[str | None] = []


async def echo(run: RunContext[Chat]) -> Completed:
    """Streams the prompt's words; ``hold`` waits after the second until stopped."""
    USERS.append(run.user)
    data: dict[str, Any] = run.input
    for i, word in enumerate(data["prompt"].split()):
        await run.emit(Chat.chunk({"chunk": word + " "}))
        if i == 1 and data.get("hold"):
            await anyio.sleep(60)
    return Completed()


async def shout(run: RunContext[Chat]) -> Completed:
    await run.emit(Chat.chunk({"chunk": str(run.input["prompt"]).upper()}))
    return Completed()


def auth(user: str, **options: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_token(SECRET, user, **options)}"}


A, B = auth("A"), auth("B")


def body(text: str, chat: str = "c1", **extra: Any) -> dict[str, Any]:
    return {"id": chat, "trigger": "submit-message", "messageId": None, **extra,
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}]}


def events(raw: bytes) -> list[Any]:
    decoder = SSEDecoder()
    return [e.data if e.data == "[DONE]" else json.loads(e.data)
            for e in decoder.feed(raw) + decoder.flush()]


def text_of(evs: list[Any]) -> str:
    return "".join(d["delta"] for d in evs if isinstance(d, dict) and d["type"] == "text-delta")


@pytest.fixture
def server(backend: Backend) -> Iterator[ServerThread]:
    USERS.clear()
    app = create_app(backend.factory(), authorize=jwt_bearer(SECRET), agents=[echo, shout],
                     chat_agent="echo", chat_agents=["shout"])
    with ServerThread(app) as srv:
        yield srv


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        yield c


async def test_a_users_thread_is_theirs_alone(client: httpx.AsyncClient) -> None:
    """The thread routes follow the same rule: B and anonymous callers get what a missing thread
    answers on A's messages and delete, and ``GET /api/chats`` lists each caller's own."""
    mine = await client.post("/api/chat", json=body("a b", chat="ta"), headers=A)
    theirs = await client.post("/api/chat", json=body("x y", chat="tb"), headers=B)
    assert (mine.status_code, theirs.status_code) == (200, 200)
    missing = {"error": "chat 'ta' has no thread", "status": 404}
    for who in (B, {}):
        got = await client.get("/api/chat/ta/messages", headers=who)
        assert (got.status_code, {k: got.json()[k] for k in missing}) == (404, missing)
    gone = await client.delete("/api/chat/ta", headers=B)
    assert gone.status_code == 404
    listed = {who: [t["id"] for t in (await client.get("/api/chats", headers=h)).json()["threads"]]
              for who, h in (("A", A), ("B", B), ("anonymous", {}))}
    assert listed == {"A": ["ta"], "B": ["tb"], "anonymous": []}
    messages = (await client.get("/api/chat/ta/messages", headers=A)).json()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert (await client.delete("/api/chat/ta", headers=A)).status_code == 200
    assert (await client.get("/api/chat/ta/messages", headers=A)).status_code == 404
    assert [t["id"] for t in (await client.get("/api/chats", headers=B)).json()["threads"]] == [
        "tb"]


async def test_a_users_chat_and_its_run_are_theirs_alone(client: httpx.AsyncClient) -> None:
    seen = b""
    async with client.stream("POST", "/api/chat", json=body("a b c", hold=True),
                             headers=A) as reply:
        assert reply.status_code == 200
        async for piece in reply.aiter_bytes():
            seen += piece
            if text_of(events(seen)) == "a b ":
                break
        run_id = events(seen)[0]["messageId"].removesuffix("-assistant")
        missing = {"error": f"no run with id {run_id!r}", "status": 404, "code": "RunNotFoundError"}
        for who in (B, {}):  # another user, and anonymous
            for path in (f"/runs/{run_id}/status", f"/runs/{run_id}/sse"):
                got = await client.get(path, headers=who)
                assert (got.status_code, got.json()) == (404, missing), path
            got = await client.post(f"/runs/{run_id}/stop", headers=who)
            assert got.status_code == (404 if who else 401)
            for stream in (run_id, "chat:c1"):
                for route in ("sse", "info"):
                    got = await client.get(f"/streams/{stream}/{route}", headers=who)
                    assert (got.status_code, got.json()["error"]) == (
                        404, f"no stream with id {stream!r}"), (stream, route)
            # the chat answers as one with no reply
            assert (await client.get("/api/chat/c1/stream", headers=who)).status_code == 204
            listed = (await client.get("/streams", headers=who)).json()["streams"]
            assert [s["streamId"] for s in listed] == []
        stop = await client.post("/api/chat/c1/stop", headers=B)
        assert stop.status_code == 404
        assert stop.json()["error"] == "chat 'c1' has no reply to stop"
        taken = await client.post("/api/chat", json=body("mine now"), headers=B)
        assert (taken.status_code, taken.json()["error"]) == (404, "no chat with id 'c1'")
        same = await client.post("/api/chat", json=body("a b c", hold=True), headers=B)
        assert same.status_code == 404, "the same message does not join A's reply"
        resumed = await client.post(f"/runs/{run_id}/resume", json={"resumeId": "r"}, headers=B)
        assert resumed.status_code == 404
        # A sees all of it
        assert (await client.get(f"/runs/{run_id}/status", headers=A)).json()["status"] == "running"
        mine = (await client.get("/streams", headers=A)).json()["streams"]
        assert {s["streamId"] for s in mine} == {"chat:c1", run_id}
        assert (await client.get(f"/streams/{run_id}/info", headers=A)).status_code == 200
        async with client.stream("GET", "/api/chat/c1/stream", headers=A) as again:
            assert again.status_code == 200
        stopped = await client.post("/api/chat/c1/stop", headers=A)
        assert (stopped.status_code, stopped.json()["status"]) == (200, "interrupted")
    assert USERS == ["A"]
    replay = await client.get(f"/runs/{run_id}/sse", headers=A)
    assert replay.status_code == 200
    assert b"interrupted" in replay.content


async def test_runs_api_owner_and_plain_streams(client: httpx.AsyncClient) -> None:
    started = await client.post("/runs", json={"agent": "echo", "input": {"prompt": "x y"},
                                              "runId": "r1"}, headers=A)
    assert started.status_code == 201
    taken = await client.post("/runs", json={"agent": "echo", "input": {"prompt": "x y"},
                                            "runId": "r1"}, headers=B)
    assert taken.status_code == 409, "B does not get A's run by repeating its start"
    assert (await client.post("/runs", json={"agent": "echo", "input": {"prompt": "x y"},
                                             "runId": "r1"}, headers=A)).status_code == 200
    for _ in range(100):
        status = (await client.get("/runs/r1/status", headers=A)).json()
        if status["status"] != "running":
            break
        await anyio.sleep(0.05)
    assert status["status"] == "completed"
    assert (await client.get("/runs/r1/status", headers=B)).status_code == 404
    # writes to a run's stream: another user learns nothing (404), its owner the run routes (409)
    assert (await client.post("/streams/r1/end", json={}, headers=B)).status_code == 404
    assert (await client.post("/streams/r1/end", json={}, headers=A)).status_code == 409
    # plain streams are everyone's, with a valid JWT to write
    assert (await client.put("/streams/plain", headers=B)).status_code in (200, 201)
    assert (await client.put("/streams/plain2")).status_code == 401
    for who, expected in ((A, {"plain", "r1"}), (B, {"plain"}), ({}, {"plain"})):
        listed = (await client.get("/streams", headers=who)).json()
        assert {s["streamId"] for s in listed["streams"]} == expected
    assert (await client.get("/streams/plain/info")).status_code == 200
    assert USERS == ["A"]


async def test_bad_tokens_are_401_with_the_reason(server: ServerThread,
                                                  client: httpx.AsyncClient) -> None:
    expired = jwt.encode({"sub": "A", "exp": int(time.time()) - 60}, SECRET, algorithm="HS256")
    forged = mint_token("x" * 40, "A")
    no_exp = jwt.encode({"sub": "A"}, SECRET, algorithm="HS256")
    none_alg = jwt.encode({"sub": "A", "exp": int(time.time()) + 60}, None, algorithm="none")
    cases = {expired: "the bearer token has expired",
             forged: "the bearer token's signature is not valid",
             no_exp: "the bearer token lacks a required claim (sub, exp)",
             none_alg: "the bearer token is not signed with HS256",
             "not.a.jwt": "the bearer token is not a valid JWT"}
    for token, reason in cases.items():
        for method, path in (("POST", "/api/chat"), ("GET", "/streams"),
                             ("GET", "/streams/x/sse")):
            got = await client.request(method, path, json=body("hi"),
                                       headers={"Authorization": f"Bearer {token}"})
            assert (got.status_code, got.json()["error"]) == (401, reason), (path, reason)
            assert 'error="invalid_token"' in got.headers["www-authenticate"]
    got = await client.post("/api/chat", json=body("hi"))
    assert (got.status_code, got.json()["error"]) == (401, "a bearer token (a JWT) is required")
    assert USERS == []


async def test_the_body_picks_an_allowed_chat_agent(client: httpx.AsyncClient) -> None:
    got = await client.post("/api/chat", json=body("hey you", agent="shout"), headers=A)
    assert text_of(events(got.content)) == "HEY YOU"
    got = await client.post("/api/chat", json=body("hey you", chat="c2"), headers=A)
    assert text_of(events(got.content)) == "hey you "
    bad = await client.post("/api/chat", json=body("hey", chat="c3", agent="nope"), headers=A)
    assert bad.status_code == 400
    assert bad.json()["agents"] == ["echo", "shout"]
    assert "echo, shout" in bad.json()["error"]


async def test_a_hook_may_name_users_by_id_and_anonymous_stays_open() -> None:
    from streamwire.log.memory import MemoryLog

    async def who(request: Request, stream_id: str, access: str) -> str | None:
        return request.headers.get("x-user")

    USERS.clear()
    app = create_app(MemoryLog(), authorize=who, agents=[echo], chat_agent="echo")
    with ServerThread(app) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=10) as c:
            got = await c.post("/api/chat", json=body("anon words", chat="open"))
            assert text_of(events(got.content)) == "anon words "
            run_id = events(got.content)[0]["messageId"].removesuffix("-assistant")
            # nobody's: everyone may read it, as before users
            for headers in ({}, {"x-user": "B"}):
                assert (await c.get(f"/runs/{run_id}/status", headers=headers)).status_code == 200
            # but GET /streams shows runs' and chats' streams to their owners only
            assert (await c.get("/streams")).json()["streams"] == []
            got = await c.post("/api/chat", json=body("mine", chat="own"), headers={"x-user": "C"})
            assert text_of(events(got.content)) == "mine "
            assert (await c.post("/api/chat/own/stop")).status_code == 404
    assert USERS == [None, "C"]


def test_user_is_a_frozen_principal() -> None:
    user = User("A", {"sub": "A"})
    with pytest.raises(AttributeError):
        user.id = "B"  # type: ignore[misc]
    with pytest.raises(ValueError, match="at least 32 bytes"):
        jwt_bearer("short")


def test_token_command_mints_what_the_server_accepts(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["token", "--sub", "alice", "--secret", SECRET, "--ttl", "60"]) == 0
    token = capsys.readouterr().out.strip()
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert claims["sub"] == "alice"
    assert claims["exp"] - claims["iat"] == 60
    monkeypatch.setenv("STREAMWIRE_JWT_SECRET", SECRET)
    assert main(["token", "--sub", "bob"]) == 0
    claims = jwt.decode(capsys.readouterr().out.strip(), SECRET, algorithms=["HS256"])
    assert claims["sub"] == "bob"
    assert claims["exp"] - claims["iat"] == 3600
    assert main(["token", "--sub", "bob", "--secret", "short"]) == 2
    assert "at least 32 bytes" in capsys.readouterr().err
    monkeypatch.delenv("STREAMWIRE_JWT_SECRET")
    assert main(["token", "--sub", "bob"]) == 2
    assert "STREAMWIRE_JWT_SECRET" in capsys.readouterr().err


def test_serve_with_a_jwt_secret() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}", "STREAMWIRE_JWT_SECRET": SECRET}
    env.pop("STREAMWIRE_TOKEN", None)
    both = subprocess.run([sys.executable, "-m", "streamwire.cli", "serve", "--token", "t0ken"],
                          env=env, capture_output=True, timeout=30)
    assert both.returncode == 2
    assert b"--jwt-secret excludes --token" in both.stderr
    with serve_cli("--agent", "demo", "--log-level", "warning", port=port, env=env), \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            assert c.post("/api/chat", json=body("hello")).status_code == 401
            got = c.post("/api/chat", json=body("hello"), headers=A)
            assert got.status_code == 200
            assert text_of(events(got.content))
            run_id = events(got.content)[0]["messageId"].removesuffix("-assistant")
            assert c.get(f"/runs/{run_id}/status", headers=B).status_code == 404
            assert c.get(f"/runs/{run_id}/status", headers=A).status_code == 200
            assert c.get("/streams").json()["streams"] == []
