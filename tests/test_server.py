"""streamwire.server over real sockets: uvicorn on 127.0.0.1 in a thread, httpx clients, every
backend that exists (memory, SQLite, Redis)."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import socket
import threading
import time
from typing import Any

import anyio
import httpx
import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request

from conftest import require
from helpers.server import (
    LogFactory,
    PrivateRedis,
    append,
    backend,
    chunks_of,
    next_frame,
    private_redis,
    read_all,
    serving,
    sse,
    wait_for,
)
from streamwire.frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    RewoundFrame,
    TruncatedFrame,
)
from streamwire.log.memory import MemoryLog
from streamwire.server import bearer_token, create_app

pytestmark = pytest.mark.anyio
__all__ = ["backend", "private_redis"]  # fixtures, used by name

# ---- routes, on every backend -------------------------------------------------------------------


async def test_create_info_append_end_and_replay(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            created = await client.put("/streams/s1")
            assert created.status_code == 200
            assert created.json()["head"] == 0
            again = await client.put("/streams/s1")  # idempotent
            assert again.status_code == 200
            assert again.json()["streamId"] == "s1"
            assert await append(client, "s1", {"t": "a"}, "b", [1, 2]) == [1, 2, 3]
            assert await append(client, "s1", None, step=2) == [4]
            info = (await client.get("/streams/s1/info")).json()
            assert info["head"] == 4
            assert info["status"] == "active"
            assert info["oldestRetainedSequence"] == 1
            assert info["truncatedAtStep"] is None
            end = await client.post("/streams/s1/end",
                                    json={"status": "completed", "output": {"x": 1},
                                          "usage": {"tokens": 3}})
            assert end.status_code == 200
            assert end.json()["status"] == "completed"
            frames = await read_all(client, "s1")
            assert chunks_of(frames) == [(1, b'{"t":"a"}'), (2, b'"b"'), (3, b"[1,2]"), (4, b"null")]
            assert frames[4:] == [CaughtUpFrame(head=4),
                                  EndFrame(status="completed", output={"x": 1},
                                           usage={"tokens": 3})]
            head = await client.head("/streams/s1/sse")
            assert head.status_code == 200
            assert head.headers["content-type"].startswith("text/event-stream")
            assert (await client.head("/streams/nope/sse")).status_code == 404
            # a re-attaching reader gets only what it lacks; Last-Event-ID wins over ?cursor
            frames = await read_all(client, "s1", cursor=0, headers={"Last-Event-ID": "3"})
            assert chunks_of(frames) == [(4, b"null")]


async def test_reader_attached_before_the_first_chunk(backend: LogFactory) -> None:
    with serving(backend, heartbeat_interval=0.2) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/early")
            async with sse(client, "early") as (resp, items):
                assert resp.headers["content-type"].startswith("text/event-stream")
                assert resp.headers["cache-control"] == "no-cache"
                assert resp.headers["x-accel-buffering"] == "no"
                with anyio.fail_after(5):
                    first = await items.__anext__()
                    assert first == "waiting"  # the park marker, before anything else
                    assert await next_frame(items) == CaughtUpFrame(head=0)
                    second = await items.__anext__()  # a heartbeat while still waiting
                    assert second == "waiting"
                await append(client, "early", "hello")
                frame = await next_frame(items)
                assert isinstance(frame, ChunkFrame)
                assert (frame.sequence, bytes(frame.chunk)) == (1, b'"hello"')
                with anyio.fail_after(5):
                    beat = await items.__anext__()
                assert beat == "heartbeat"  # no longer waiting once a chunk went out
                await client.post("/streams/early/end", json={"status": "paused"})
                assert await next_frame(items) == EndFrame(status="paused")
                rest = [item async for item in items]
                assert rest == []  # exactly one terminal, then the body closed


async def test_two_readers_at_different_cursors(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/two")
            await append(client, "two", *range(5))
            async with sse(client, "two", cursor=0) as (_, a), \
                    sse(client, "two", headers={"Last-Event-ID": "3"}) as (_, b):
                got_a = [await next_frame(a) for _ in range(6)]
                got_b = [await next_frame(b) for _ in range(3)]
                assert chunks_of(got_a) == [(i + 1, str(i).encode()) for i in range(5)]
                assert got_a[5] == CaughtUpFrame(head=5)
                assert chunks_of(got_b) == [(4, b"3"), (5, b"4")]
                assert got_b[2] == CaughtUpFrame(head=5)
                await append(client, "two", "live")
                for items in (a, b):
                    live = await next_frame(items)
                    assert isinstance(live, ChunkFrame)
                    assert (live.sequence, bytes(live.chunk)) == (6, b'"live"')
                await client.post("/streams/two/fail",
                                  json={"error": "boom", "errorDetail": {"code": "X"},
                                        "recoverable": False})
                for items in (a, b):
                    assert await next_frame(items) == FailFrame(
                        error="boom", recoverable=False, error_detail={"code": "X"})


async def test_cleanup_while_attached_and_truncated_after(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/c")
            await append(client, "c", "s1a", "s1b", step=1)
            await append(client, "c", "s2a", "s2b", step=2)
            async with sse(client, "c") as (_, items):
                assert len([await next_frame(items) for _ in range(5)]) == 5  # 4 chunks, caught-up
                resp = await client.post("/streams/c/cleanup", json={"step": 1})
                assert resp.status_code == 200
                marker = await next_frame(items)
                assert isinstance(marker, RewoundFrame)
                assert (marker.at_step, marker.at_sequence) == (1, 4)
                assert resp.json()["atStep"] == 1
                await append(client, "c", "s2-again", step=2)
                again = await next_frame(items)
                assert isinstance(again, ChunkFrame)
                assert again.sequence == 5
            info = (await client.get("/streams/c/info")).json()
            assert info["truncatedAtStep"] == 1
            assert info["oldestRetainedSequence"] == 1
            # a cleanup that removes every chunk raises the floor to the head: a reader from 0
            # is below it while the marker is set, so it gets truncated{floor}, not a silent gap
            await client.post("/streams/c/cleanup", json={"step": 0})
            info = (await client.get("/streams/c/info")).json()
            assert info["floor"] == 5
            assert await read_all(client, "c", cursor=0) == [TruncatedFrame(floor=5)]


async def test_reset_and_reactivate(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/r")
            await append(client, "r", "old")
            await client.post("/streams/r/end", json={"status": "interrupted"})
            frames = await read_all(client, "r")
            assert frames[-1] == EndFrame(status="interrupted")
            reactivated = await client.post("/streams/r/reactivate")
            assert reactivated.json()["status"] == "active"
            await append(client, "r", "more")
            await client.post("/streams/r/end", json={"status": "completed"})
            assert chunks_of(await read_all(client, "r", cursor=1)) == [(2, b'"more"')]
            reset = await client.post("/streams/r/reset")
            assert reset.status_code == 200
            assert reset.json()["status"] == "active"
            await append(client, "r", "new run")
            await client.post("/streams/r/end", json={"status": "completed"})
            frames = await read_all(client, "r", cursor=0)
            assert [bytes(f.chunk) for f in frames if isinstance(f, ChunkFrame)] == [b'"new run"']


async def test_unknown_streams_are_404(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            answers = [
                await client.get("/streams/nope/info"),
                await client.get("/streams/nope/sse"),
                await client.post("/streams/nope/chunks", json=[{"step": 0, "chunk": 1}]),
                await client.post("/streams/nope/chunks", json=[]),
                await client.post("/streams/nope/end", json={"status": "completed"}),
                await client.post("/streams/nope/fail", json={"error": "x", "recoverable": True}),
                await client.post("/streams/nope/cleanup", json={"step": 0}),
                await client.post("/streams/nope/reset"),
                await client.post("/streams/nope/reactivate"),
            ]
            for resp in answers:
                assert resp.status_code == 404, (resp.request.url, resp.text)
                assert resp.json() == {"error": "no stream with id 'nope'", "status": 404}


# ---- bad input (memory: these are the server's own checks) -------------------------------------


async def test_malformed_bodies_and_parameters_change_nothing() -> None:
    with serving(MemoryLog, max_body_size=4096, max_batch_chunks=3,
                 max_stream_id_length=16) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/m")
            await append(client, "m", "one")
            cases: list[tuple[str, Any, int, str]] = [
                ("chunks", b"[{", 400, "not valid JSON"),
                ("chunks", b'{"step": 1, "chunk": 1}', 422, "Expected `array`"),
                ("chunks", b'[{"step": 1, "chunk": 2}, {"step": "x", "chunk": 3}]', 422,
                 "`$[1].step`"),
                ("chunks", b'[{"step": -1, "chunk": 2}]', 422, ">= 0"),
                ("chunks", b'[{"step": 1}]', 422, "missing required field `chunk`"),
                ("chunks", b'[{"step": 1, "chunk": 1, "extra": 0}]', 422, "unknown field"),
                ("chunks", b"[" + b",".join([b'{"step":1,"chunk":1}'] * 4) + b"]", 413,
                 "max_batch_chunks"),
                ("chunks", b'[{"step":1,"chunk":"' + b"x" * 5000 + b'"}]', 413, "max_body_size"),
                ("end", b'{"status": "done"}', 422, "Invalid enum value 'done'"),
                ("end", b"", 400, "not valid JSON"),
                ("fail", b'{"error": "x"}', 422, "missing required field `recoverable`"),
                ("cleanup", b'{"step": "1"}', 422, "Expected `int`"),
            ]
            for route, body, status, says in cases:
                resp = await client.post(f"/streams/m/{route}", content=body,
                                         headers={"content-type": "application/json"})
                assert resp.status_code == status, (route, body[:60], resp.text)
                assert says in resp.json()["error"], (route, resp.text)
            info = (await client.get("/streams/m/info")).json()
            assert (info["head"], info["status"]) == (1, "active")  # nothing half-applied

            for params, headers, says in [
                ({"cursor": "x"}, {}, "cursor must be a non-negative integer"),
                ({"cursor": "-1"}, {}, "cursor must be"),
                ({}, {"Last-Event-ID": "1.5"}, "Last-Event-ID must be"),
            ]:
                resp = await client.get("/streams/m/sse", params=params, headers=headers)
                assert resp.status_code == 400
                assert says in resp.json()["error"]
            resp = await client.get("/streams/m/sse", params={"cursor": "7"})
            assert resp.status_code == 409
            assert "above the stream's head 1" in resp.json()["error"]
            resp = await client.get("/streams/" + "x" * 17 + "/info")
            assert resp.status_code == 400
            assert "max_stream_id_length" in resp.json()["error"]

            await client.post("/streams/m/end", json={"status": "completed"})
            late = await client.post("/streams/m/chunks", json=[{"step": 1, "chunk": 1}])
            assert late.status_code == 409  # StreamStateError's status_hint


async def test_multiline_chunk_json_stays_one_frame() -> None:
    with serving(MemoryLog) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/ml")
            resp = await client.post("/streams/ml/chunks",
                                     content=b'[{"step": 0, "chunk": {\n  "a": "x\\ny"\r\n}}]',
                                     headers={"content-type": "application/json"})
            assert resp.json() == {"sequences": [1]}
            await client.post("/streams/ml/end", json={"status": "completed"})
            frames = await read_all(client, "ml")
            assert isinstance(frames[0], ChunkFrame)
            import msgspec

            assert msgspec.json.decode(bytes(frames[0].chunk)) == {"a": "x\ny"}
            assert frames[-1] == EndFrame(status="completed")


# ---- security -------------------------------------------------------------------------------------


async def test_authorization_hook_refuses_with_401_403_404() -> None:
    calls: list[tuple[str, str]] = []

    async def authorize(request: Request, stream_id: str, access: str) -> None:
        calls.append((stream_id, access))
        if stream_id == "hidden":
            raise HTTPException(404, "no stream with id 'hidden'")
        if access == "write" and request.headers.get("x-key") != "k":
            raise HTTPException(401, "who are you?", {"WWW-Authenticate": "Key"})
        if access == "read" and stream_id.startswith("secret"):
            raise HTTPException(403, "not yours")

    with serving(MemoryLog, authorize=authorize) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            refused = await client.put("/streams/secret1")
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == "Key"
            assert refused.json() == {"error": "who are you?", "status": 401}
            ok = await client.put("/streams/secret1", headers={"x-key": "k"})
            assert ok.status_code == 200
            assert (await client.get("/streams/secret1/info")).status_code == 403
            sse_refused = await client.get("/streams/secret1/sse")
            assert sse_refused.status_code == 403
            assert sse_refused.json()["error"] == "not yours"
            assert (await client.get("/streams/hidden/sse")).status_code == 404
            assert (await client.post("/streams/secret1/end",
                                      json={"status": "completed"})).status_code == 401
            assert calls[:3] == [("secret1", "write"), ("secret1", "write"), ("secret1", "read")]
            assert ("secret1", "read") in calls[3:]
            assert ("hidden", "read") in calls


async def test_bearer_token_protects_writes_and_optionally_reads() -> None:
    for protect_reads in (False, True):
        with serving(MemoryLog, authorize=bearer_token("s3cret", protect_reads=protect_reads)) as srv:
            async with httpx.AsyncClient(base_url=srv.base) as client:
                good = {"Authorization": "Bearer s3cret"}
                missing = await client.put("/streams/t")
                assert missing.status_code == 401
                assert "Bearer" in missing.headers["www-authenticate"]
                wrong = await client.put("/streams/t", headers={"Authorization": "Bearer nope"})
                assert wrong.status_code == 403
                assert (await client.put("/streams/t", headers=good)).status_code == 200
                read = await client.get("/streams/t/info")
                assert read.status_code == (401 if protect_reads else 200)
                assert (await client.get("/streams/t/info", headers=good)).status_code == 200


async def test_internal_errors_stay_off_the_wire_unless_exposed() -> None:
    def broken(request: Request, stream_id: str, access: str) -> None:
        raise RuntimeError("db password is hunter2")

    for expose in (False, True):
        with serving(MemoryLog, authorize=broken, expose_errors=expose) as srv:
            async with httpx.AsyncClient(base_url=srv.base) as client:
                for resp in (await client.put("/streams/e"), await client.get("/streams/e/sse")):
                    assert resp.status_code == 500
                    assert ("hunter2" in resp.text) is expose
                    if not expose:
                        assert resp.json() == {"error": "internal server error", "status": 500}


async def test_a_broken_log_is_503_without_its_internals() -> None:
    require(importlib.util.find_spec("streamwire.log.redis") is not None,
            "needs streamwire.log.redis")
    from streamwire.log.redis import RedisLog

    with socket.socket() as closed:  # a port nobody listens on: every Redis call fails
        closed.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{closed.getsockname()[1]}/0"
        for expose in (False, True):
            with serving(lambda: RedisLog(url, prefix="swtest-down"), expose_errors=expose) as srv:
                async with httpx.AsyncClient(base_url=srv.base) as client:
                    for resp, outcome in ((await client.get("/streams/x/sse"), {}),
                                          (await client.put("/streams/x"),
                                           {"outcome": "not-stored"})):
                        assert resp.status_code == 503
                        body = resp.json()
                        if expose:
                            assert body["error"] != "the stream log failed"
                        else:
                            # a write also says what happened: nothing was stored (retry)
                            assert body == {"error": "the stream log failed", "status": 503,
                                            **outcome}


async def test_a_log_that_breaks_mid_stream_ends_it_with_a_recoverable_fail(
        private_redis: PrivateRedis) -> None:
    """The log's Redis dies while a reader is attached: the reader gets one
    ``fail{recoverable: true}`` (re-attach from the cursor), with no internal text."""
    from streamwire.log.redis import RedisLog

    with serving(lambda: RedisLog(private_redis.url, prefix="swtest-break")) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/b")
            await append(client, "b", "one")
            async with sse(client, "b") as (_, items):
                assert isinstance(await next_frame(items), ChunkFrame)
                assert await next_frame(items) == CaughtUpFrame(head=1)
                private_redis.kill()
                frame = await next_frame(items)
                assert isinstance(frame, FailFrame)
                assert frame.recoverable is True
                assert frame.error == "the stream log failed"
                assert [item async for item in items if not isinstance(item, str)] == []


async def test_cors_for_browser_readers() -> None:
    origin = "https://app.example"
    with serving(MemoryLog, cors_origins=[origin]) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/b")
            await client.post("/streams/b/end", json={"status": "completed"})
            preflight = await client.options(
                "/streams/b/sse", headers={"Origin": origin,
                                           "Access-Control-Request-Method": "GET",
                                           "Access-Control-Request-Headers": "last-event-id"})
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == origin
            assert "last-event-id" in preflight.headers["access-control-allow-headers"].lower()
            async with sse(client, "b", headers={"Origin": origin}) as (resp, _):
                assert resp.headers["access-control-allow-origin"] == origin
            async with sse(client, "b", headers={"Origin": "https://evil.example"}) as (resp, _):
                assert "access-control-allow-origin" not in resp.headers
            info = await client.get("/streams/b/info", headers={"Origin": origin})
            assert info.headers["access-control-allow-origin"] == origin
            bad = await client.options("/streams/b/sse", headers={
                "Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
            assert bad.status_code == 400


# ---- load and faults ------------------------------------------------------------------------------


async def test_connection_caps_answer_429_and_503_with_retry_after() -> None:
    with serving(MemoryLog, max_connections=2, max_connections_per_stream=1,
                 retry_after=7) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            for sid in ("p", "q", "r"):
                await client.put(f"/streams/{sid}")
            async with sse(client, "p") as (first, items):
                assert first.status_code == 200
                await next_frame(items)
                second = await client.get("/streams/p/sse")
                assert second.status_code == 429
                assert second.headers["retry-after"] == "7"
                assert "max_connections_per_stream" in second.json()["error"]
                async with sse(client, "q") as (other, items_q):
                    assert other.status_code == 200
                    await next_frame(items_q)
                    third = await client.get("/streams/r/sse")
                    assert third.status_code == 503
                    assert "max_connections" in third.json()["error"]
            assert srv.app.statistics().refused_total == 2


async def test_a_client_that_leaves_is_noticed_at_once() -> None:
    with serving(MemoryLog, heartbeat_interval=None) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/gone")
            async with sse(client, "gone") as (_, items):
                assert await next_frame(items) == CaughtUpFrame(head=0)
                assert srv.app.statistics().open_connections == 1
            # the stream is quiet and no heartbeat runs: only http.disconnect can tell
            started = time.monotonic()
            await wait_for(lambda: srv.app.statistics().open_connections == 0, limit=3)
            assert time.monotonic() - started < 1.0


async def test_a_slow_reader_is_evicted_while_a_fast_one_keeps_up(backend: LogFactory) -> None:
    with serving(backend, send_timeout=0.5, heartbeat_interval=None) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/flood")
            await append(client, "flood", "first")
            # the slow reader: a tiny receive window, sends its request and never reads
            slow = socket.socket()
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", int(srv.base.rsplit(":", 1)[1])))
            slow.sendall(b"GET /streams/flood/sse HTTP/1.1\r\nHost: t\r\n\r\n")
            await wait_for(lambda: srv.app.statistics().open_connections == 1)
            payload = "x" * 65536
            async with sse(client, "flood") as (_, fast):
                assert isinstance(await next_frame(fast), ChunkFrame)
                assert await next_frame(fast) == CaughtUpFrame(head=1)
                received = 0
                for _ in range(20):  # 20 x 5 x 64 KiB = 6.4 MB, far past any socket buffer
                    await append(client, "flood", *[payload] * 5)
                    for _ in range(5):
                        frame = await next_frame(fast)
                        assert isinstance(frame, ChunkFrame)
                        received += 1
                await wait_for(lambda: srv.app.statistics().evicted_total == 1, limit=5)
                await client.post("/streams/flood/end", json={"status": "completed"})
                assert await next_frame(fast) == EndFrame(status="completed")
                assert received == 100
            # the evicted reader's connection is reset (nothing more is flushed to it): what it
            # had already received, then the reset, and never a terminal frame
            slow.setblocking(False)
            data = bytearray()
            with anyio.fail_after(10):
                while True:
                    try:
                        piece = slow.recv(1 << 20)
                    except BlockingIOError:
                        await anyio.sleep(0.01)
                        continue
                    except ConnectionResetError:
                        break
                    if not piece:
                        break
                    data += piece
            slow.close()
            assert data.startswith(b"HTTP/1.1 200")
            assert b"event: chunk" in data
            assert b"event: end" not in data
            assert b"event: fail" not in data
            # the server lets the reset connection go as its loop hears of it, which may be just
            # after the client saw the reset
            await wait_for(lambda: srv.app.statistics().open_connections == 0, limit=5)


async def test_shutdown_ends_every_open_stream_with_a_recoverable_fail(backend: LogFactory) -> None:
    with serving(backend, shutdown_grace_period=2.0) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/d1")
            await client.put("/streams/d2")
            await append(client, "d1", "a")
            async with sse(client, "d1") as (_, a), sse(client, "d2") as (_, b):
                await next_frame(a)
                await next_frame(a)
                await next_frame(b)
                started = time.monotonic()
                srv.server.handle_exit(signal.SIGTERM, None)  # what uvicorn does on SIGTERM
                for items in (a, b):
                    frame = await next_frame(items)
                    assert isinstance(frame, FailFrame)
                    assert frame.recoverable is True
                    assert frame.error_detail == {"code": "SERVER_SHUTDOWN"}
                    assert [item async for item in items] == []
            srv.thread.join(5)
            assert not srv.thread.is_alive()
            assert time.monotonic() - started < 3.0


async def test_drain_api_ends_streams_and_refuses_new_readers() -> None:
    with serving(MemoryLog) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/dr")
            async with sse(client, "dr") as (_, items):
                assert await next_frame(items) == CaughtUpFrame(head=0)
                loop = srv.server._loop  # the server's loop: drain() runs there
                assert loop is not None
                done = asyncio.run_coroutine_threadsafe(srv.app.drain(2.0), loop)
                frame = await next_frame(items)
                assert isinstance(frame, FailFrame)
                assert frame.error_detail == {"code": "SERVER_SHUTDOWN"}
            assert await anyio.to_thread.run_sync(done.result, 5) is True
            refused = await client.get("/streams/dr/sse")
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            assert "shutting down" in refused.json()["error"]
            assert srv.app.statistics().draining is True
            # writes still work while draining: producers finish their runs elsewhere
            assert (await client.post("/streams/dr/end", json={"status": "completed"})
                    ).status_code == 200


async def test_a_connection_the_server_cancels_still_gets_its_fail_frame() -> None:
    """uvicorn's ``timeout_graceful_shutdown`` cancels the handlers it waited for: a plain
    ``uvicorn.Server`` (no drain on exit) must still end each stream with the recoverable fail."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(MemoryLog(), allow_anonymous_writes=True),
                            log_level="warning",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),),
                              daemon=True)
    thread.start()
    try:
        await wait_for(lambda: server.started)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await client.put("/streams/cut")
            async with sse(client, "cut") as (_, items):
                assert await next_frame(items) == CaughtUpFrame(head=0)
                server.should_exit = True  # no signal, no drain: only the cancellation
                frame = await next_frame(items)
                assert isinstance(frame, FailFrame)
                assert (frame.recoverable, frame.error_detail) == (True, {"code": "SERVER_SHUTDOWN"})
                assert [item async for item in items if not isinstance(item, str)] == []
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert not thread.is_alive()


async def test_retry_field_goes_first_for_browser_readers() -> None:
    with serving(MemoryLog, retry=2500) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/rt")
            await client.post("/streams/rt/end", json={"status": "completed"})
            body = (await client.get("/streams/rt/sse")).content
    # an ended stream with no chunk is not "waiting": the retry field, then the frames
    assert body.startswith(b"retry: 2500\n\nevent: caught-up\n")
    assert body.endswith(b'event: end\ndata: {"status":"completed"}\n\n')


def test_bad_settings_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="heartbeat_interval"):
        create_app(MemoryLog(), heartbeat_interval=0, allow_anonymous_writes=True)
    with pytest.raises(ValueError, match="send_timeout"):
        create_app(MemoryLog(), send_timeout=float("inf"), allow_anonymous_writes=True)


# ---- the app itself ---------------------------------------------------------------------------------


async def test_openapi_document_matches_the_routes() -> None:
    with serving(MemoryLog) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            doc = (await client.get("/openapi.json")).json()
    assert doc["openapi"].startswith("3.")
    documented = {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops}
    served = set()
    for route in srv.app.routes:
        methods = getattr(route, "methods", None) or set()
        path = getattr(route, "path", "")
        served |= {(path, m) for m in methods if m != "HEAD" and path != "/openapi.json"
                   and not path.endswith((".js", ".css"))}  # the pages' script and style
    assert documented == served


async def test_mounted_in_fastapi() -> None:
    from fastapi import FastAPI

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    outer = FastAPI()
    stream_app = create_app(MemoryLog(), allow_anonymous_writes=True)
    outer.mount("/api", stream_app)
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(outer, log_level="warning"))
    thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),),
                              daemon=True)
    thread.start()
    try:
        await wait_for(lambda: server.started)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/api") as client:
            assert (await client.put("/streams/f")).status_code == 200
            await append(client, "f", "via fastapi")
            await client.post("/streams/f/end", json={"status": "completed"})
            frames = await read_all(client, "f")
            assert chunks_of(frames) == [(1, b'"via fastapi"')]
            assert frames[-1] == EndFrame(status="completed")
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


async def test_a_client_that_leaves_mid_replay_stops_the_replay() -> None:
    # A replay from the log never waits on anything, so the pump must yield now and then or the
    # disconnect listener never runs and the whole backlog is written into a dead socket.
    log = MemoryLog()
    await log.create_stream("backlog")
    for start in range(0, 60_000, 5_000):
        await log.append_many("backlog", [(1, b'"%d"' % i) for i in range(start, start + 5_000)])
    with serving(lambda: log, heartbeat_interval=None) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            async with sse(client, "backlog") as (_, items):
                assert isinstance(await next_frame(items), ChunkFrame)
            started = time.monotonic()
            await wait_for(lambda: srv.app.statistics().open_connections == 0, limit=10)
            assert time.monotonic() - started < 1.0
