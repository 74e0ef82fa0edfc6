"""The stream server against hostile input and load, over real sockets on every backend: each
hostile input gets the same clear 4xx with nothing half-applied; caps hold under a burst; readers
that never read are evicted with their sockets reset and their memory freed."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

import streamwire.server
from helpers.server import (
    LogFactory,
    PrivateRedis,
    append,
    backend,
    private_redis,
    read_all,
    serving,
    wait_for,
)
from streamwire._compat.uvicorn import resettable_transport
from streamwire.cli import main
from streamwire.frames import ChunkFrame, EndFrame
from streamwire.log.memory import MemoryLog
from streamwire.server import bearer_token

pytestmark = pytest.mark.anyio
__all__ = ["backend", "private_redis"]  # fixtures, used by name

SAFE = 2**53 - 1


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.fixture
def server_log_lines() -> Iterator[list[str]]:
    """Every line the server's logger writes (formatted, as an operator reads them)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    logger = logging.getLogger("streamwire.server")
    old_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


# ---- hostile input: the same 4xx on every backend, nothing half-applied -------------------------


async def test_integers_above_2_53_are_refused_everywhere(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/n")
            await append(client, "n", "one")
            for step in (SAFE + 1, 2**63, 2**64 + 1, 10**30):
                resp = await client.post("/streams/n/chunks",
                                         content=b'[{"step": 0, "chunk": 1}, {"step": %d, '
                                                 b'"chunk": 2}]' % step, headers={"content-type": "application/json"})
                assert resp.status_code == 400, resp.text
                assert "above 2^53 - 1" in resp.json()["error"]
                resp = await client.post("/streams/n/cleanup", content=b'{"step": %d}' % step,
                                         headers={"content-type": "application/json"})
                assert resp.status_code == 400, resp.text
                for params, headers in (({"cursor": str(step)}, {}),
                                        ({}, {"Last-Event-ID": str(step)})):
                    resp = await client.get("/streams/n/sse", params=params, headers=headers)
                    assert resp.status_code == 400, resp.text
                    assert "2^53 - 1" in resp.json()["error"]
            # the largest safe values are still served by the usual rules
            assert (await client.post("/streams/n/chunks",
                                      json=[{"step": SAFE, "chunk": 3}])).status_code == 200
            resp = await client.get("/streams/n/sse", params={"cursor": str(SAFE)})
            assert resp.status_code == 409  # a real cursor, above this stream's head
            info = (await client.get("/streams/n/info")).json()
            assert (info["head"], info["status"], info["truncatedAtStep"]) == (2, "active", None)


async def test_deeply_nested_json_is_400_not_500(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/d")
            for depth in (300, 1000, 5000, 100_000):
                bodies = {
                    "chunks": b'[{"step": 0, "chunk": ' + nested(depth) + b"}]",
                    "end": b'{"status": "completed", "output": ' + nested(depth) + b"}",
                    "fail": b'{"error": "x", "recoverable": false, "errorDetail": {"a": '
                            + nested(depth) + b"}}",
                }
                for route, body in bodies.items():
                    resp = await client.post(f"/streams/d/{route}", content=body, headers={"content-type": "application/json"})
                    assert resp.status_code == 400, (route, depth, resp.text[:200])
                    assert "nests arrays and objects" in resp.json()["error"]
            # brackets inside strings and escaped quotes do not count as nesting
            tricky = b'"' + b'[{\\"\\\\' * 400 + b'"'
            ok = await client.post("/streams/d/chunks",
                                   content=b'[{"step": 0, "chunk": [' + tricky + b", "
                                           + nested(200) + b"]}]", headers={"content-type": "application/json"})
            assert ok.status_code == 200, ok.text
            info = (await client.get("/streams/d/info")).json()
            assert (info["head"], info["status"]) == (1, "active")


async def test_invalid_utf8_and_lone_surrogates_in_a_chunk_are_refused(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/u")
            for bad in (b'"\xff"', b'"a\xfeb"', b'"\xed\xa0\x80"', b'"\xc0\xaf"', b'"\\ud800"',
                        b'{"k": "x\\udc00y"}', b'"\xf4\x90\x80\x80"'):
                resp = await client.post("/streams/u/chunks",
                                         content=b'[{"step": 0, "chunk": ' + bad + b"}]",
                                         headers={"content-type": "application/json"})
                assert resp.status_code == 400, (bad, resp.text)
            for bad_end in (b'{"status": "completed", "output": "\xff"}',
                            b'{"error": "\xed\xb0\x80", "recoverable": true}'):
                route = "end" if b"status" in bad_end else "fail"
                resp = await client.post(f"/streams/u/{route}", content=bad_end, headers={"content-type": "application/json"})
                assert resp.status_code == 400, (bad_end, resp.text)
            good = '"h\u00e9 \U0001f600 \\ud83d\\ude00"'.encode()
            resp = await client.post("/streams/u/chunks",
                                     content=b'[{"step": 0, "chunk": ' + good + b"}]", headers={"content-type": "application/json"})
            assert resp.json() == {"sequences": [1]}
            await client.post("/streams/u/end", json={"status": "completed"})
            frames = await read_all(client, "u")
            assert isinstance(frames[0], ChunkFrame)
            assert bytes(frames[0].chunk) == good  # passed through byte for byte
            assert frames[-1] == EndFrame(status="completed")


async def test_stream_ids_that_are_not_utf8_or_not_printable_are_refused(
        backend: LogFactory, server_log_lines: list[str]) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            for raw in ("alias%FF", "alias%FE", "a%C3", "%ED%A0%80", "a%0Db", "a%0Ab", "a%0D%0A"
                        "forged%20line", "nul%00", "del%7F", "nel%C2%85", "ls%E2%80%A8", "bidi%E2%80%AE"):
                for method, route in (("PUT", ""), ("GET", "/info"), ("GET", "/sse"),
                                      ("POST", "/chunks"), ("POST", "/end")):
                    resp = await client.request(method, f"/streams/{raw}{route}",
                                                content=b'[{"step": 0, "chunk": 1}]', headers={"content-type": "application/json"})
                    assert resp.status_code == 400, (raw, method, route, resp.text)
                    error = resp.json()["error"]
                    assert "not UTF-8" in error or "control or invisible" in error, error
            # a real U+FFFD, sent as its UTF-8 bytes, is an ordinary character of an id
            resp = await client.put("/streams/ok%EF%BF%BD")
            assert resp.status_code == 200, resp.text
            assert resp.json()["streamId"] == "ok\ufffd"
            async with client.stream("GET", "/streams/ok%EF%BF%BD/sse"):
                pass
    assert server_log_lines, "the server wrote no log line at all"
    for line in server_log_lines:
        assert not {"\r", "\n"} & set(line), line
        assert "forged" not in line, line


def test_a_token_no_http_client_can_send_is_refused_at_start(
        capsys: pytest.CaptureFixture[str]) -> None:
    for token in ("t\u00f6ken", "two words", "tab\there", "nl\n"):
        with pytest.raises(ValueError, match="visible ASCII"):
            bearer_token(token)
        assert main(["serve", "--port", "0", "--token", token]) == 2
        err = capsys.readouterr().err
        assert "--token: the bearer token must be visible ASCII" in err, err
    bearer_token("abc-._~+/=")  # RFC 6750's b64token characters pass


# ---- caps under a burst ----------------------------------------------------------------------------


async def open_sse(port: int, stream_id: str) -> tuple[int, asyncio.StreamWriter]:
    """A raw ``GET /sse``: the response's status and the open connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /streams/%s/sse HTTP/1.1\r\nHost: t\r\n\r\n" % stream_id.encode())
    line = await reader.readline()
    return int(line.split()[1]), writer


async def test_caps_hold_under_a_burst_of_connects(backend: LogFactory) -> None:
    per_stream, total, burst = 20, 30, 3000
    with serving(backend, max_connections=total, max_connections_per_stream=per_stream,
                 heartbeat_interval=None) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            for name in ("a", "b"):
                await client.put(f"/streams/{name}")
        port = int(srv.base.rsplit(":", 1)[1])
        names = ["a", "b"] * (burst // 2)
        with anyio.fail_after(60):
            results = await asyncio.gather(*(open_sse(port, n) for n in names))
        try:
            admitted = {n: sum(1 for (status, _), m in zip(results, names, strict=True)
                               if status == 200 and m == n) for n in ("a", "b")}
            statuses = {status for status, _ in results}
            assert statuses <= {200, 429, 503}, statuses
            assert sum(admitted.values()) == total, admitted
            assert max(admitted.values()) <= per_stream, admitted
            assert srv.app.statistics().open_connections == total
            assert srv.app.statistics().refused_total == burst - total
        finally:
            for _, writer in results:
                writer.close()
        await wait_for(lambda: srv.app.statistics().open_connections == 0, limit=10)
        # and the slots all came back: exactly per_stream more on one stream
        with anyio.fail_after(30):
            again = await asyncio.gather(*(open_sse(port, "a") for _ in range(200)))
        try:
            assert sum(1 for status, _ in again if status == 200) == per_stream
        finally:
            for _, writer in again:
                writer.close()


# ---- readers that never read -------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def server_sockets(port: int, peers: list[socket.socket]) -> int:
    """The server's open TCP sockets (local ``port``, state ESTABLISHED) connected to ``peers``
    (from /proc/net/tcp; TIME_WAIT leftovers of earlier tests may share a peer's port)."""
    peer_ports = {sock.getsockname()[1] for sock in peers}
    # a set: /proc/net/tcp is read in pieces while sockets come and go, so a line can repeat
    found: set[int] = set()
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            local, remote, state = line.split()[1:4]
            peer = int(remote.rsplit(":", 1)[1], 16)
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port and peer in peer_ports:
                found.add(peer)
    return len(found)


def _read_to_eof(sock: socket.socket) -> None:
    while sock.recv(65536):
        pass


def stalled_reader(port: int, stream_id: str) -> socket.socket:
    """A reader that sends its request and never reads a byte (a tiny receive window)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /streams/%s/sse HTTP/1.1\r\nHost: t\r\n\r\n" % stream_id.encode())
    return sock


async def test_readers_that_never_read_are_reset_and_free_everything(backend: LogFactory) -> None:
    readers = 200
    with serving(backend, max_connections_per_stream=readers, send_timeout=0.5,
                 heartbeat_interval=None) as srv:
        port = int(srv.base.rsplit(":", 1)[1])
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            await client.put("/streams/fast")
            await append(client, "fast", "first")
            before = rss_bytes()
            socks = [stalled_reader(port, "fast") for _ in range(readers)]
            try:
                await wait_for(lambda: srv.app.statistics().open_connections == readers, 20)
                refused = await client.get("/streams/fast/sse")
                assert refused.status_code == 429  # the cap counts the stalled readers exactly
                assert server_sockets(port, socks) == readers
                payload = "x" * 8192
                with anyio.fail_after(60):
                    while srv.app.statistics().evicted_total < readers:
                        await append(client, "fast", *([payload] * 16))
                        await anyio.sleep(0.01)
                await wait_for(lambda: srv.app.statistics().open_connections == 0, 15)
                # reset, not left flushing to a peer that never reads: the server holds no socket
                await wait_for(lambda: server_sockets(port, socks) == 0, 15)
                grown = rss_bytes() - before
                assert grown < 64 * 2**20, f"RSS grew by {grown / 2**20:.0f} MiB"
                socks[0].settimeout(5)
                with pytest.raises(ConnectionResetError):
                    _read_to_eof(socks[0])
            finally:
                for sock in socks:
                    sock.close()
            # every slot came back: the cap admits exactly `readers` again (a new run, so the
            # new stalled readers have no backlog to stall on and none is evicted meanwhile)
            assert (await client.post("/streams/fast/reset")).status_code == 200
            socks = [stalled_reader(port, "fast") for _ in range(readers)]
            try:
                await wait_for(lambda: srv.app.statistics().open_connections == readers, 20)
                assert (await client.get("/streams/fast/sse")).status_code == 429
            finally:
                for sock in socks:
                    sock.close()


# ---- signals and the reset adapter: public routes, or one checked adapter ------------------------

_CHAIN_SCRIPT = """
import asyncio, os, signal, sys
from streamwire.server._signals import chain_exit_signals

order = []

async def main(mode):
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    def server_handler(*_):
        order.append("server")
        loop.call_soon_threadsafe(done.set)
    if mode == "loop":  # granian's workers
        loop.add_signal_handler(signal.SIGTERM, server_handler)
    else:  # uvicorn's handle_exit
        signal.signal(signal.SIGTERM, server_handler)
    undo = chain_exit_signals(lambda: order.append("drain"))
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(done.wait(), 5)
    await asyncio.sleep(0.05)
    undo()
    os.kill(os.getpid(), signal.SIGTERM)  # undone: only the server's handler now
    await asyncio.sleep(0.05)
    print(",".join(order))

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.parametrize("mode", ["loop", "python"])
def test_exit_signals_chain_onto_loop_and_python_handlers(mode: str) -> None:
    out = subprocess.run([sys.executable, "-c", _CHAIN_SCRIPT, mode], capture_output=True,
                         text=True, timeout=30, check=True).stdout.strip()
    assert sorted(out.split(",")[:2]) == ["drain", "server"], out
    assert out.split(",")[2:] == ["server"], out


def test_server_modules_reach_into_no_private_attribute_of_another_library() -> None:
    server = Path(streamwire.server.__file__).parent
    for path in server.glob("*.py"):
        text = path.read_text()
        for private in ("_signal_handlers", "._callback", "._args", "._writer", "._transport",
                        "__self__", "init_headers", "def handle_exit", "- at `"):
            assert private not in text, f"{path.name} reads {private}"
    # the reach-ins that have no public route live in _compat, and name the versions they fit
    compat = server.parent / "_compat"
    assert "_UVICORN_TESTED" in (compat / "uvicorn.py").read_text()
    assert "__self__" in (compat / "uvicorn.py").read_text()
    assert "_SHAPE_HOLDS" in (compat / "msgspec.py").read_text()
    assert "_H11_TESTED" in (compat / "h11.py").read_text()


async def test_the_reset_adapter_fits_the_installed_uvicorn() -> None:
    """Fails loudly when a new uvicorn moves the transport the reset adapter uses (then check
    ``streamwire._compat.uvicorn`` against it and widen ``_UVICORN_TESTED``)."""
    found: list[object] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        found.append(resettable_transport(send))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),),
                              daemon=True)
    thread.start()
    try:
        await wait_for(lambda: server.started, 10)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    version = importlib.metadata.version("uvicorn")
    assert isinstance(found[0], asyncio.Transport), (
        f"uvicorn {version}: its ASGI send no longer leads to the connection's transport, or the "
        "version is outside streamwire._compat.uvicorn._UVICORN_TESTED; evicted readers would keep "
        "their sockets")


# ---- a failed write says whether it may have been stored ------------------------------------------


async def test_a_write_whose_answer_was_lost_is_504_unknown_not_503(
        private_redis: PrivateRedis) -> None:
    from streamwire.log.redis import RedisLog

    def log() -> RedisLog:
        return RedisLog(private_redis.url, prefix="swtest-outcome", command_timeout=0.5)

    with serving(log) as srv:
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            await client.put("/streams/o")
            await append(client, "o", "one")
            os.kill(private_redis.process.pid, signal.SIGSTOP)  # frozen: the answer never comes
            try:
                lost = await client.post("/streams/o/chunks", json=[{"step": 0, "chunk": 2}])
            finally:
                os.kill(private_redis.process.pid, signal.SIGCONT)
            assert lost.status_code == 504, lost.text
            assert lost.json() == {"error": "the stream log failed", "status": 504,
                                   "outcome": "unknown"}
            # and it was honest: the batch may be stored or not, all of it or none
            head = (await client.get("/streams/o/info")).json()["head"]
            assert head in (1, 2)
            private_redis.kill()  # nothing listens: the write is never sent
            for route, body in (("chunks", [{"step": 0, "chunk": 3}]),
                                ("end", {"status": "completed"})):
                refused = await client.post(f"/streams/o/{route}", json=body)
                assert refused.status_code == 503, refused.text
                assert refused.json() == {"error": "the stream log failed", "status": 503,
                                          "outcome": "not-stored"}
                assert refused.headers["retry-after"] == "1"
            info = await client.get("/streams/o/info")  # a read: no outcome to tell
            assert info.status_code == 503
            assert "outcome" not in info.json()


# ---- idempotent producers over HTTP ---------------------------------------------------------------


def producer(pid: str, epoch: int, seq: int) -> dict[str, str]:
    return {"Producer-Id": pid, "Producer-Epoch": str(epoch), "Producer-Seq": str(seq)}


async def test_a_retried_producer_request_is_stored_once(backend: LogFactory) -> None:
    with serving(backend) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/p")
            await append(client, "p", "plain")  # writers without producer headers: as before
            first = [{"step": 0, "chunk": {"i": 0}}, {"step": 0, "chunk": {"i": 1}}]
            for _ in range(3):  # the answer was lost twice: the same request again
                resp = await client.post("/streams/p/chunks", json=first,
                                         headers=producer("w1", 0, 0))
                assert resp.status_code == 200, resp.text
                assert resp.json() == {"sequences": [2, 3]}  # the original sequences
            resp = await client.post("/streams/p/chunks", json=[{"step": 0, "chunk": {"i": 2}}],
                                     headers=producer("w1", 0, 1))
            assert resp.json() == {"sequences": [4]}
            gap = await client.post("/streams/p/chunks", json=[{"step": 0, "chunk": 9}],
                                    headers=producer("w1", 0, 3))
            assert gap.status_code == 409, gap.text
            body = gap.json()
            assert (body["status"], body["code"], body["expectedSeq"], body["receivedSeq"]) == (
                409, "PRODUCER_SEQ_GAP", 2, 3)
            assert body["error"]
            assert gap.headers["producer-expected-seq"] == "2"
            # a new epoch (the producer restarted) fences the old one off
            resp = await client.post("/streams/p/chunks", json=[{"step": 0, "chunk": {"i": 3}}],
                                     headers=producer("w1", 1, 0))
            assert resp.json() == {"sequences": [5]}
            fenced = await client.post("/streams/p/chunks", json=[{"step": 0, "chunk": 9}],
                                       headers=producer("w1", 0, 2))
            assert fenced.status_code == 403, fenced.text
            body = fenced.json()
            assert (body["status"], body["code"], body["currentEpoch"]) == (
                403, "PRODUCER_FENCED", 1)
            end = {"status": "completed"}
            for _ in range(2):  # a retried end is a no-op, not a 409
                resp = await client.post("/streams/p/end", json=end, headers=producer("w1", 1, 1))
                assert resp.status_code == 200, resp.text
            frames = await read_all(client, "p")
            chunks = [bytes(f.chunk) for f in frames if isinstance(f, ChunkFrame)]
            assert chunks == [b'"plain"', b'{"i":0}', b'{"i":1}', b'{"i":2}', b'{"i":3}']
            assert frames[-1] == EndFrame(status="completed")


async def test_producer_headers_go_all_or_none_and_are_exact_integers() -> None:
    with serving(MemoryLog) as srv:
        async with httpx.AsyncClient(base_url=srv.base) as client:
            await client.put("/streams/q")
            bad: list[dict[str, str]] = [
                {"Producer-Id": "w"}, {"Producer-Id": "w", "Producer-Epoch": "0"},
                {"Producer-Epoch": "0", "Producer-Seq": "0"},
                producer("w", 0, 0) | {"Producer-Seq": "-1"},
                producer("w", 0, 0) | {"Producer-Epoch": str(SAFE + 1)},
                producer("w", 0, 0) | {"Producer-Seq": "1.0"},
                producer("", 0, 0), producer("x" * 257, 0, 0),
            ]
            for headers in bad:
                for route, body in (("chunks", [{"step": 0, "chunk": 1}]),
                                    ("end", {"status": "completed"}),
                                    ("fail", {"error": "x", "recoverable": True})):
                    resp = await client.post(f"/streams/q/{route}", json=body, headers=headers)
                    assert resp.status_code == 400, (headers, route, resp.text)
            info = (await client.get("/streams/q/info")).json()
            assert (info["head"], info["status"]) == (0, "active")
