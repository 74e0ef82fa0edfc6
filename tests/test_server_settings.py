"""``ServerSettings``: every server option once, with its default, its check and its help; the
command-line flags (``add_arguments`` / ``settings_from_args``) and ``create_app``'s keywords are
derived from it and cannot be missing or disagree."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
from typing import Any

import pytest

from streamwire.server import (
    DEFAULT_HEARTBEAT_INTERVAL,
    DEFAULT_MAX_BACKLOG_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_STREAM,
    DEFAULT_RETRY_AFTER,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE_PERIOD,
    create_app,
)
from streamwire.server._settings import ServerSettings, add_arguments, settings_from_args

FIELDS = [spec.name for spec in dataclasses.fields(ServerSettings)]
#: The flags ``streamwire serve`` has always had: their names stay.
SERVE_FLAGS = {
    "heartbeat_interval": "--heartbeat",
    "send_timeout": "--send-timeout",
    "max_connections": "--max-connections",
    "max_connections_per_stream": "--max-connections-per-stream",
    "max_backlog_bytes": "--max-backlog-bytes",
    "cors_origins": "--cors-origin",
    "shutdown_grace_period": "--grace",
}


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog="serve")
    add_arguments(made)
    return made


def flag_of(made: argparse.ArgumentParser, field: str) -> argparse.Action:
    (action,) = [a for a in made._actions if a.dest == field]
    return action


def test_every_field_has_a_flag_and_the_parser_has_no_other() -> None:
    made = parser()
    dests = {a.dest for a in made._actions} - {"help"}
    assert dests == set(FIELDS)
    for name, flag in SERVE_FLAGS.items():
        assert flag in flag_of(made, name).option_strings, name
    for name in FIELDS:
        assert flag_of(made, name).help, f"{name} has no help"


def test_the_flags_defaults_are_the_settings_defaults() -> None:
    assert settings_from_args(parser().parse_args([])) == ServerSettings()
    made = parser()
    for name in FIELDS:
        default = flag_of(made, name).default
        expected = getattr(ServerSettings(), name)
        assert (tuple(default) if name == "cors_origins" else default) == expected, name


def test_the_settings_defaults_are_the_named_constants() -> None:
    settings = ServerSettings()
    assert settings.heartbeat_interval == DEFAULT_HEARTBEAT_INTERVAL
    assert settings.send_timeout == DEFAULT_SEND_TIMEOUT
    assert settings.max_connections == DEFAULT_MAX_CONNECTIONS
    assert settings.max_connections_per_stream == DEFAULT_MAX_CONNECTIONS_PER_STREAM
    assert settings.max_backlog_bytes == DEFAULT_MAX_BACKLOG_BYTES
    assert settings.shutdown_grace_period == DEFAULT_SHUTDOWN_GRACE_PERIOD
    assert settings.retry_after == DEFAULT_RETRY_AFTER


def test_create_app_has_every_setting_as_a_keyword_with_the_same_default() -> None:
    params = inspect.signature(create_app).parameters
    for name in FIELDS:
        assert name in params, f"create_app has no {name}="
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        default = params[name].default
        assert (tuple(default) if name == "cors_origins" else default) == getattr(
            ServerSettings(), name), name


def test_create_app_builds_the_settings_it_was_given() -> None:
    from streamwire.log.memory import MemoryLog

    app = create_app(MemoryLog(), allow_anonymous_writes=True, max_connections=7,
                     cors_origins=["https://a.example"], retry=2500, heartbeat_interval=None)
    assert app.settings == ServerSettings(max_connections=7, cors_origins=("https://a.example",),
                                          retry=2500, heartbeat_interval=None)


def test_flags_are_read_back_into_settings() -> None:
    args = parser().parse_args([
        "--heartbeat", "0", "--send-timeout", "2.5", "--max-connections", "20000",
        "--max-connections-per-stream", "2000", "--no-fanout", "--max-backlog-bytes", "1024",
        "--cors-origin", "https://a.example", "--cors-origin", "*", "--expose-errors",
        "--max-body-size", "100", "--max-batch-chunks", "5", "--max-stream-id-length", "64",
        "--grace", "0", "--retry-after", "7", "--retry", "2500", "--no-drain-on-signal"])
    assert settings_from_args(args) == ServerSettings(
        heartbeat_interval=None, send_timeout=2.5, max_connections=20000,
        max_connections_per_stream=2000, fanout=False, max_backlog_bytes=1024,
        cors_origins=("https://a.example", "*"), expose_errors=True, max_body_size=100,
        max_batch_chunks=5, max_stream_id_length=64, shutdown_grace_period=0.0, retry_after=7,
        retry=2500, drain_on_signal=False)
    assert settings_from_args(args, max_connections=3).max_connections == 3


@pytest.mark.parametrize(("flag", "value", "error"), [
    ("--max-connections", "0", "must be at least 1, not 0"),
    ("--max-connections-per-stream", "-3", "must be at least 1, not -3"),
    ("--max-backlog-bytes", "many", "must be a whole number, not 'many'"),
    ("--send-timeout", "0", "must be a finite number of seconds > 0"),
    ("--send-timeout", "inf", "must be a finite number of seconds > 0"),
    ("--heartbeat", "-1", "must be a finite number of seconds > 0 (0: off)"),
    ("--grace", "soon", "must be a number, not 'soon'"),
    ("--retry-after", "-1", "must be at least 0, not -1"),
])
def test_bad_flags_exit_2_naming_the_flag(flag: str, value: str, error: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args([flag, value])
    assert exited.value.code == 2
    assert f"argument {flag}: {error}" in capsys.readouterr().err


def test_the_help_states_each_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    # as `streamwire serve --help` has said (tests/test_cli.py checks these on the real command)
    assert f"past it a reader gets 503 (default {DEFAULT_MAX_CONNECTIONS:,})" in text
    assert f"past it a reader gets 429 (default {DEFAULT_MAX_CONNECTIONS_PER_STREAM:,})" in text
    assert "is evicted and re-attaches (default 4 MiB)" in text
    assert "(default 15; 0: off)" in text
    assert "--fanout, --no-fanout" in text


@pytest.mark.parametrize(("field", "value"), [
    ("heartbeat_interval", 0), ("heartbeat_interval", math.inf), ("send_timeout", math.inf),
    ("send_timeout", 0), ("send_timeout", "30"), ("max_connections", 0),
    ("max_connections", 1.5), ("max_connections", True), ("max_backlog_bytes", 0),
    ("shutdown_grace_period", -1), ("retry_after", -1), ("retry_after", None), ("retry", -1),
    ("fanout", 1), ("cors_origins", "https://a.example"), ("max_body_size", 0),
])
def test_bad_values_are_refused_naming_the_option(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"^{field} must be"):
        ServerSettings(**{field: value})


def test_settings_are_frozen_and_origins_a_tuple() -> None:
    settings = ServerSettings(cors_origins=["https://a.example"])  # type: ignore[arg-type]
    assert settings.cors_origins == ("https://a.example",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_connections = 3  # type: ignore[misc]
    assert dataclasses.replace(settings, retry=100).retry == 100


def test_the_flags_are_built_without_the_web_stack() -> None:
    """``streamwire serve``'s parser is built with ``add_arguments`` for every command (``--help``,
    ``--version``): that loads none of starlette, anyio, uvicorn or httpx."""
    import subprocess
    import sys

    code = ("import argparse, sys\n"
            "from streamwire.server._settings import add_arguments, settings_from_args\n"
            "p = argparse.ArgumentParser(); add_arguments(p)\n"
            "settings_from_args(p.parse_args(['--max-connections', '5']))\n"
            "print(' '.join(m for m in ('starlette', 'anyio', 'uvicorn', 'httpx') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == ""
