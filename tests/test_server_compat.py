"""The server's reach-ins into uvicorn and msgspec (``streamwire._compat``): each fits the installed
version, and each says so -- or takes its fallback -- when a version moves what it uses."""

from __future__ import annotations

import asyncio
import inspect
import logging
from types import FrameType
from typing import Any

import msgspec
import pytest
import uvicorn

import streamwire._compat.msgspec as compat_msgspec
import streamwire._compat.uvicorn as compat_uvicorn
from streamwire._compat.msgspec import ValidationProblem, parse_validation_error
from streamwire._compat.uvicorn import ExitHookServer, resettable_transport
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
    monkeypatch.setattr(compat_uvicorn, "_version_ok", None)
    assert resettable_transport(send) is _Cycle.transport  # the tested range: the transport
    monkeypatch.setattr(compat_uvicorn, "_version_ok", None)
    monkeypatch.setattr(compat_uvicorn, "uvicorn_version", lambda: (1, 2))
    with caplog.at_level(logging.WARNING, "streamwire.server"):
        assert resettable_transport(send) is None  # the ordinary close
        assert resettable_transport(send) is None
    warned = [r for r in caplog.records if "outside the versions" in r.getMessage()]
    assert len(warned) == 1
    assert "uvicorn 1.2" in warned[0].getMessage()


def test_a_send_that_is_not_uvicorns_has_no_transport() -> None:
    async def wrapped(message: Any) -> None: ...

    assert resettable_transport(wrapped) is None
