"""One writer per run stream, one id space, one JSON reader, and users' words (issue 22, 6-7), over
real uvicorn on memory, SQLite and Redis: the stream write routes refuse a run's stream (409) and a
chat's (400); client-chosen ids are never empty nor the chat routes'; every JSON route refuses
bodies nested too deep (400) or not sent as JSON (415); CORS lets a browser send every header the
API reads and read every one it answers; an agent's in-stream ``Chat.error`` fails its run the D-4
way; a failed reply speaks to its user, with the code for machines."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from helpers import runs_agents as agents
from helpers.runs_server import Backend, Served, backend, serving
from streamwire.aisdk import GENERIC_WORDS, REPLY_ERROR_WORDS, UIMessageStreamEncoder
from streamwire.aisdk._words import OWN_WORDS
from streamwire.chat import Chat
from streamwire.frames import FailFrame, TruncatedFrame
from streamwire.runs import Completed, RunContext
from streamwire.sse import SSEDecoder

pytestmark = pytest.mark.anyio
__all__ = ["backend"]  # the fixture, imported

SRC = Path(__file__).resolve().parents[1] / "src" / "streamwire"
ORIGIN = "https://app.example"
DEEP = b"[" * 300 + b"]" * 300
JSON_ROUTES = [("/streams/s/chunks", b'[{"step": 0, "chunk": 1}]'),
               ("/streams/s/end", b'{"status": "completed"}'),
               ("/streams/s/fail", b'{"error": "x", "recoverable": false}'),
               ("/streams/s/cleanup", b'{"step": 0}'),
               ("/runs", b'{"agent": "echo"}'),
               ("/runs/r1/resume", b'{"resumeId": "x"}'),
               ("/api/chat", json.dumps({"id": "c1", "messages": [
                   {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
               ).encode()),
               ("/api/chat/c1/stop", b'{"runId": "x"}')]


async def oops(run: RunContext[Chat]) -> Completed:
    """Writes a little, then fails its reply in-stream (the TRD's ``error`` event) and returns."""
    await run.emit(Chat.chunk({"chunk": "partial "}))
    await run.emit(Chat.error({"error": "rate_limited", "message": "the model is busy"}))
    return Completed(output="fine?")


@pytest.fixture
def served(backend: Backend) -> Iterator[Served]:
    options = {"allow_anonymous_writes": True, "chat_agent": "oops", "cors_origins": [ORIGIN]}
    with serving(backend.factory, [agents.echo, agents.slow, oops], app_options=options) as srv:
        yield srv


def ui_events(raw: bytes) -> list[Any]:
    decoder = SSEDecoder()
    return [e.data if e.data == "[DONE]" else json.loads(e.data)
            for e in decoder.feed(raw) + decoder.flush()]


async def settled(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            status: dict[str, Any] = (await client.get(f"/runs/{run_id}/status")).json()
            if status["status"] != "running":
                return status
            await anyio.sleep(0.05)


# ---- one writer per run stream -------------------------------------------------------------------

async def test_the_stream_write_routes_refuse_a_runs_stream(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        started = await client.post("/runs", json={"agent": "slow", "runId": "r-forge",
                                                    "input": {"pace": 0.05, "n": 400}})
        assert started.status_code == 201
        head = (await client.get("/streams/r-forge/info")).json()["head"]
        forged = [
            await client.post("/streams/r-forge/end", json={"status": "completed",
                                                            "output": {"forged": True}}),
            await client.post("/streams/r-forge/fail", json={"error": "x", "recoverable": False}),
            await client.post("/streams/r-forge/chunks", json=[{"step": 0, "chunk": {"x": 1}}]),
            await client.post("/streams/r-forge/cleanup", json={"step": 0}),
            await client.post("/streams/r-forge/reset"),
            await client.post("/streams/r-forge/reactivate"),
            await client.post("/streams/r-forge/keepalive"),
            await client.put("/streams/r-forge"),
        ]
        for answer in forged:
            assert answer.status_code == 409, (answer.request.url, answer.text)
            body = answer.json()
            assert body["code"] == "RUN_STREAM"
            assert "POST /runs/r-forge/stop" in body["error"]
            assert "GET /runs/r-forge/status" in body["error"]
        info = (await client.get("/streams/r-forge/info")).json()
        assert info["status"] == "active"  # still the run's alone
        assert info["head"] >= head
        await client.post("/runs/r-forge/stop")
        status = await settled(client, "r-forge")
        sse = (await client.get("/runs/r-forge/sse")).text
        # once settled it is still the run's: a reset cannot reopen it for a forger
        assert (await client.post("/streams/r-forge/reset")).status_code == 409
        assert (await client.post("/streams/r-forge/end", json={"status": "completed"})
                ).status_code == 409
        assert (await client.get("/runs/r-forge/sse")).text == sse
    assert status["status"] == "interrupted"
    assert sse.count("event: end") == 1
    assert "forged" not in sse
    assert '"interrupted"' in sse


async def test_a_plain_stream_is_still_its_writers(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        assert (await client.put("/streams/plain-1")).status_code == 200
        assert (await client.post("/streams/plain-1/chunks", json=[{"step": 0, "chunk": 1}])
                ).status_code == 200
        assert (await client.post("/streams/plain-1/end", json={"status": "completed"})
                ).status_code == 200


# ---- one id space --------------------------------------------------------------------------------

async def test_client_ids_are_never_empty_nor_the_chat_routes(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        answers = {
            "runId chat:": await client.post("/runs", json={"agent": "echo", "runId": "chat:c1"}),
            "key chat:": await client.post("/runs", json={"agent": "echo"},
                                           headers={"Idempotency-Key": "chat:c1"}),
            "empty runId": await client.post("/runs", json={"agent": "echo", "runId": ""}),
            "empty key": await client.post("/runs", json={"agent": "echo"},
                                           headers={"Idempotency-Key": ""}),
            "put chat:": await client.put("/streams/chat:c1"),
            "chunks chat:": await client.post("/streams/chat:c1/chunks",
                                              json=[{"step": 0, "chunk": {"runId": "victim"}}]),
        }
        for what, answer in answers.items():
            assert answer.status_code == 400, (what, answer.text)
        assert "chat routes" in answers["runId chat:"].json()["error"]
        assert "empty" in answers["empty key"].json()["error"]
        assert served.runs.invocations == 0, "no refused start ran the agent"
        # a retry with the same key finds the same run (the key is not ignored)
        first = await client.post("/runs", json={"agent": "echo"}, headers={"Idempotency-Key": "k1"})
        again = await client.post("/runs", json={"agent": "echo"}, headers={"Idempotency-Key": "k1"})
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.json()["runId"] == again.json()["runId"] == "k1"


async def test_a_chats_streams_live_under_chat_and_no_client_reaches_them(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        reply = await client.post("/api/chat", content=JSON_ROUTES[6][1],
                                  headers={"content-type": "application/json"})
        assert reply.status_code == 200
        start = ui_events(reply.content)[0]
        run_id = start["messageId"].removesuffix("-assistant")
        assert run_id.startswith("chat:c1:")
        for path in (f"/streams/{run_id}/end", "/streams/chat:c1/end"):
            forged = await client.post(path, json={"status": "completed"})
            assert forged.status_code == 400, forged.text
        taken = await client.post("/runs", json={"agent": "echo", "runId": run_id})
        assert taken.status_code == 400
        assert (await client.get(f"/runs/{run_id}/status")).json()["agent"] == "oops"


# ---- one JSON reader -----------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "good"), JSON_ROUTES, ids=[p for p, _ in JSON_ROUTES])
async def test_every_json_route_refuses_deep_bodies_and_other_content_types(
        served: Served, path: str, good: bytes) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        await client.put("/streams/s")
        deep = await client.post(path, content=DEEP, headers={"content-type": "application/json"})
        assert deep.status_code == 400, deep.text
        assert "nests arrays and objects 300 deep, over the limit of 256" in deep.json()["error"]
        for content_type in ("text/plain", "text/plain;charset=UTF-8",
                             "application/x-www-form-urlencoded", None):
            headers = {"content-type": content_type} if content_type else {}
            answer = await client.post(path, content=good, headers=headers)
            assert answer.status_code == 415, (content_type, answer.text)
            assert "Content-Type: application/json" in answer.json()["error"]
        ok = await client.post(path, content=good,
                               headers={"content-type": "application/json; charset=utf-8"})
        assert ok.status_code not in (400, 413, 415), ok.text


async def test_a_bodyless_stop_needs_no_content_type(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        await client.post("/runs", json={"agent": "echo", "runId": "r-stop"})
        assert (await client.post("/runs/r-stop/stop")).status_code == 200
        assert (await client.post("/api/chat/nobody/stop")).status_code == 404  # read, not 415


# ---- CORS ----------------------------------------------------------------------------------------

async def test_cors_allows_every_request_header_and_exposes_the_answers(served: Served) -> None:
    asked = ["authorization", "content-type", "idempotency-key", "last-event-id", "producer-id",
             "producer-epoch", "producer-seq"]
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        for path in ("/runs", "/streams/s/chunks", "/api/chat"):
            pre = await client.options(path, headers={
                "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": ", ".join(asked)})
            assert pre.status_code == 200, (path, pre.text)
            allowed = {h.strip().lower()
                       for h in pre.headers["access-control-allow-headers"].split(",")}
            assert set(asked) <= allowed
        started = await client.post("/runs", json={"agent": "echo"}, headers={"Origin": ORIGIN})
        exposed = started.headers["access-control-expose-headers"].lower()
        for name in ("retry-after", "content-location", "producer-epoch",
                     "producer-expected-seq", "producer-received-seq"):
            assert name in exposed
        run_id = started.json()["runId"]
        streamed = await client.get(f"/runs/{run_id}/sse", headers={"Origin": ORIGIN})
        assert "retry-after" in streamed.headers["access-control-expose-headers"].lower()


# ---- Chat.error, and users' words ----------------------------------------------------------------

async def test_an_in_stream_chat_error_fails_the_run_the_d4_way(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=10) as client:
        reply = await client.post("/api/chat", content=JSON_ROUTES[6][1],
                                  headers={"content-type": "application/json"})
        evs = ui_events(reply.content)
        run_id = evs[0]["messageId"].removesuffix("-assistant")
        status = await settled(client, run_id)
        plain = await client.post("/runs", json={"agent": "oops", "runId": "r-oops"})
        assert plain.status_code == 201
        direct = await settled(client, "r-oops")
    assert evs[-4:] == [
        {"type": "message-metadata",
         "messageMetadata": {"error": {"code": "AGENT_ERROR", "recoverable": False}}},
        {"type": "error", "errorText": GENERIC_WORDS},
        {"type": "finish", "finishReason": "error"}, "[DONE]"]
    assert not any(e.get("finishReason") == "stop" for e in evs if isinstance(e, dict))
    for body in (status, direct):
        assert body["status"] == "failed"
        assert body["error"] == "the model is busy"
        assert body["errorDetail"] == {"code": "AGENT_ERROR", "error": "rate_limited"}
        assert body["recoverable"] is False
        assert "output" not in body


def _emitted_codes() -> set[str]:
    """Every ``errorDetail`` code the server's source writes: as a literal, or as a constant
    named after its value (``TIMEOUT: Final = "TIMEOUT"``)."""
    found: set[str] = set()
    literal = re.compile(r"""(?:["']code["']\s*:\s*|code=)["']([A-Z][A-Z_]+)["']""")
    constant = re.compile(r"""^([A-Z][A-Z_]+): Final = ["']\1["']""", re.MULTILINE)
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        found.update(literal.findall(text), constant.findall(text))
    return found


#: Codes of HTTP error answers (a client's, never a reply's ending) and the OpenAPI example.
_NOT_REPLY_ENDINGS = {"PRODUCER_SEQ_GAP", "PRODUCER_FENCED", "AGENTS_NOT_STARTED", "RUN_STREAM",
                      "UPSTREAM_TIMEOUT"}


def test_the_words_table_covers_every_code_the_server_emits() -> None:
    emitted = _emitted_codes()
    assert {"WORKER_SHUTDOWN", "WORKER_LOST", "WRITER_GONE", "AGENT_ERROR", "TIMEOUT"} <= emitted
    missing = emitted - _NOT_REPLY_ENDINGS - set(REPLY_ERROR_WORDS) - OWN_WORDS
    assert not missing, f"add these codes to aisdk/_words.py: {sorted(missing)}"
    for code, words in REPLY_ERROR_WORDS.items():
        assert words[0].isupper(), "a sentence"
        assert "_" not in words, "words, not codes"
        assert code not in words


@pytest.mark.parametrize("frame", [
    FailFrame("the worker running the agent shut down", True, {"code": "WORKER_SHUTDOWN"}),
    FailFrame("ValueError: secret internal text", False, {"code": "AGENT_ERROR",
                                                          "type": "ValueError"}),
    FailFrame("the stream's writer is gone: no append or keepalive within writer_timeout", True,
              {"code": "WRITER_GONE"}),
    TruncatedFrame(4),
], ids=["shutdown", "agent", "writer-gone", "truncated"])
def test_a_failed_reply_speaks_to_its_user_and_gives_machines_the_code(
        frame: FailFrame | TruncatedFrame) -> None:
    chunks = UIMessageStreamEncoder("m").chunks(frame)
    code = (frame.error_detail or {})["code"]
    recoverable = isinstance(frame, FailFrame) and frame.recoverable
    assert chunks[-3:] == [
        {"type": "message-metadata",
         "messageMetadata": {"error": {"code": code, "recoverable": recoverable}}},
        {"type": "error", "errorText": REPLY_ERROR_WORDS[code]},
        {"type": "finish", "finishReason": "error"}]
    assert "secret" not in json.dumps(chunks)
    assert "writer_timeout" not in json.dumps(chunks)


def test_an_agents_own_code_keeps_its_message() -> None:
    chunks = UIMessageStreamEncoder("m").chunks(FailFrame("quota exceeded", False,
                                                          {"code": "QUOTA"}))
    assert chunks[-2] == {"type": "error", "errorText": "quota exceeded"}
    assert chunks[-3]["messageMetadata"] == {"error": {"code": "QUOTA", "recoverable": False}}


def test_the_chat_page_shows_words_not_internal_text() -> None:
    page = (Path(__file__).resolve().parents[1] / "examples" / "chat" / "index.html").read_text()
    assert "String(error)" not in page
    assert "metadata.error.code" in page
    assert "HTTP ${response.status}: ${await response.text()}" not in page
