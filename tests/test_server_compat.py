"""The server's reach-ins into uvicorn and msgspec (``streamwire._compat``): each fits the installed
version, and each says so -- or takes its fallback -- when a version moves what it uses."""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import threading
from types import FrameType
from typing import Any

import msgspec
import pytest
import uvicorn

import streamwire._compat._versions as compat_versions
import streamwire._compat.msgspec as compat_msgspec
import streamwire._compat.uvicorn as compat_uvicorn
from helpers.server import wait_for
from streamwire._compat.h11 import h11_chunk, h11_version
from streamwire._compat.msgspec import ValidationProblem, parse_validation_error
from streamwire._compat.uvicorn import ExitHookServer, direct_body, resettable_transport
from streamwire.server._openapi import explain_invalid


class Item(msgspec.Struct, forbid_unknown_fields=True):
    step: int


def problem_of(doc: bytes) -> ValidationProblem | None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.decode(doc, type=list[Item])
    return parse_validation_error(str(caught.value))


def test_msgspec_errors_are_read_as_data() -> None:
    assert problem_of(b'[{"step": "x"}]') == ValidationProblem(
        "Expected `int`, got `str`", "$[0].step")
    assert problem_of(b"[{}]") == ValidationProblem(
        "Object missing required field `step`", "$[0].step", "step", True)
    assert problem_of(b'[{"step": 1, "extra": 2}]') == ValidationProblem(
        "Object contains unknown field `extra`", "$[0].extra", "extra", False)
    assert problem_of(b"3") == ValidationProblem("Expected `array`, got `int`", "$")


def test_a_msgspec_that_words_its_errors_otherwise_gets_its_own_message_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    message = "Expected `int`, got `str` - at `$[0].step`"
    assert explain_invalid("Chunks", message).startswith("`$[0].step` must be an integer >= 0")
    monkeypatch.setattr(compat_msgspec, "_SHAPE_HOLDS", False)
    assert parse_validation_error(message) is None
    assert explain_invalid("Chunks", message) == message


def test_the_exit_hook_refuses_to_start_on_a_uvicorn_without_handle_exit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = uvicorn.Config(lambda *a: None, log_level="warning")
    calls: list[str] = []
    server = ExitHookServer(config, lambda: calls.append("drain"))
    assert list(inspect.signature(uvicorn.Server.handle_exit).parameters) == ["self", "sig",
                                                                               "frame"]

    def moved(self: uvicorn.Server, signum: int, frame: FrameType | None, extra: int) -> None:
        return None

    monkeypatch.setattr(uvicorn.Server, "handle_exit", moved)
    with pytest.raises(RuntimeError, match=r"uvicorn\.Server\.handle_exit is not "
                                           r"handle_exit\(sig, frame\) any more"):
        ExitHookServer(config, lambda: None)
    assert isinstance(server, uvicorn.Server)


@pytest.mark.anyio
async def test_the_exit_hook_runs_on_the_servers_loop_before_uvicorn_exits() -> None:
    calls: list[str] = []
    loop = asyncio.get_running_loop()
    server = ExitHookServer(uvicorn.Config(lambda *a: None), lambda: calls.append("drain"))
    server._loop = loop  # as serve() sets it
    server.handle_exit(15, None)
    assert server.should_exit
    await asyncio.sleep(0)
    assert calls == ["drain"]


class _FakeTransport:
    def abort(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (0, 0)


class _Cycle:
    transport = _FakeTransport()

    async def send(self, message: Any) -> None: ...


_Cycle.__module__ = "uvicorn.protocols.http.fake_impl"


def test_the_reset_adapter_falls_back_outside_the_tested_uvicorn_versions(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    send = _Cycle().send
    monkeypatch.setattr(compat_uvicorn._GATE, "ok", None)
    assert resettable_transport(send) is _Cycle.transport  # the tested range: the transport
    monkeypatch.setattr(compat_uvicorn._GATE, "ok", None)
    monkeypatch.setattr(compat_versions, "installed_version", lambda distribution: (1, 2))
    with caplog.at_level(logging.WARNING, "streamwire.server"):
        assert resettable_transport(send) is None  # the ordinary close
        assert resettable_transport(send) is None
    warned = [r for r in caplog.records if "outside the versions" in r.getMessage()]
    assert len(warned) == 1
    assert "uvicorn 1.2" in warned[0].getMessage()


def test_a_send_that_is_not_uvicorns_has_no_transport() -> None:
    async def wrapped(message: Any) -> None: ...

    assert resettable_transport(wrapped) is None


# ---- a body message written past uvicorn's send (``DirectBody``) -------------------------------


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, http="h11", log_level="warning", lifespan="off"))
    thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),),
                              daemon=True)
    thread.start()
    return server, thread, sock


def _exchange(port: int, request: bytes, done: bytes | None) -> bytes:
    """Send ``request`` on a new connection; what comes back until it ends with ``done`` (None:
    until the server closes the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while done is None or not data.endswith(done):
            more = conn.recv(65536)
            if not more:
                break
            data += more
    return data


@pytest.mark.anyio
async def test_a_body_written_past_send_is_what_h11_would_have_written() -> None:
    """On the installed uvicorn and h11 (else: widen ``_UVICORN_TESTED`` / ``_H11_TESTED`` after
    checking ``_compat.uvicorn.DirectBody`` against them), a chunked HTTP/1.1 response under way
    takes body messages framed once and written past ``send``, interleaved with ``send``'s own;
    before the response starts, after it ends, to ``HEAD``, to HTTP/1.0 (a close-delimited
    body) and through a wrapped ``send`` there is none."""
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append(f"before start: {direct_body(send)}")
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})

        async def wrapped(message: Any) -> None:
            await send(message)

        seen.append(f"wrapped: {direct_body(wrapped)}")
        await send({"type": "http.response.body", "body": b"one,", "more_body": True})
        body = direct_body(send)
        if body is None:
            seen.append(f"{scope['method']} {scope['http_version']}: none")
        else:
            seen.append(f"{scope['method']} {scope['http_version']}: direct")
            assert body.write(h11_chunk(b"two,"))
            assert body.write(h11_chunk(b"three,"))
            await send({"type": "http.response.body", "body": b"four,", "more_body": True})
            assert body.write(h11_chunk(b"five,"))
        await send({"type": "http.response.body", "body": b"end", "more_body": False})
        seen.append(f"after the end: {direct_body(send)}")
        if body is not None:
            assert not body.write(h11_chunk(b"late"))  # nothing past the end

    server, thread, sock = _serve(app)
    port = sock.getsockname()[1]
    try:
        await wait_for(lambda: server.started, 10)
        plain = await asyncio.to_thread(_exchange, port, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
                                        b"0\r\n\r\n")
        head = await asyncio.to_thread(_exchange, port, b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n",
                                       b"\r\n\r\n")
        old = await asyncio.to_thread(_exchange, port, b"GET / HTTP/1.0\r\n\r\n", None)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert seen[:4] == ["before start: None", "wrapped: None", "GET 1.1: direct",
                        "after the end: None"], (
        f"uvicorn {compat_uvicorn.uvicorn_version()}, h11 {h11_version()}: {seen[:4]}")
    assert seen[4:] == ["before start: None", "wrapped: None", "HEAD 1.1: none",
                        "after the end: None", "before start: None", "wrapped: None",
                        "GET 1.0: none", "after the end: None"]
    head_part, _, body = plain.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head_part.lower()
    assert body == (b"4\r\none,\r\n4\r\ntwo,\r\n6\r\nthree,\r\n5\r\nfour,\r\n5\r\nfive,\r\n"
                    b"3\r\nend\r\n0\r\n\r\n")
    assert head.endswith(b"\r\n\r\n")
    assert b"one," not in head
    assert old.partition(b"\r\n\r\n")[2] == b"one,end"
