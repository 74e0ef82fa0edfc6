"""``ServerSettings``: every option of the stream server, once, with its default, its check and its
help (uvicorn's ``Config`` idea). ``create_app``'s keywords, ``StreamApp`` and ``streamwire
serve``'s flags (``add_arguments`` / ``settings_from_args``) are all derived from it, so a flag
cannot be missing or disagree with the library's default.

Importing this module loads no web stack (``streamwire --version`` builds its parser with it).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, cast

from ._defaults import (
    DEFAULT_HEARTBEAT_INTERVAL,
    DEFAULT_MAX_BACKLOG_BYTES,
    DEFAULT_MAX_BATCH_CHUNKS,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_STREAM,
    DEFAULT_MAX_STREAM_ID_LENGTH,
    DEFAULT_RETRY_AFTER,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE_PERIOD,
)

__all__ = ["ServerSettings", "add_arguments", "settings_from_args"]

#: How an option is read and checked: ``count`` an int >= 1, ``bytes`` the same (shown in MiB),
#: ``seconds`` a finite number > 0 (``seconds0``: >= 0), ``beat`` seconds or None (``0`` on the
#: command line), ``code`` an int >= 0 or None, ``flag`` a bool, ``origins`` strings (repeatable).
Kind: TypeAlias = Literal["count", "bytes", "seconds", "seconds0", "beat", "code", "flag",
                          "origins"]


def _option(default: Any, kind: Kind, flag: str, help_text: str, metavar: str | None = None
            ) -> Any:
    return field(default=default, metadata={"kind": kind, "flag": flag, "help": help_text,
                                            "metavar": metavar})


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """Every option of a ``StreamApp`` (``create_app``'s keywords), checked when built:
    ``ValueError`` names the option and what it must be."""

    heartbeat_interval: float | None = _option(
        DEFAULT_HEARTBEAT_INTERVAL, "beat", "--heartbeat",
        "seconds between heartbeat comments on a quiet stream")
    send_timeout: float = _option(
        DEFAULT_SEND_TIMEOUT, "seconds", "--send-timeout",
        "seconds a reader may leave a write blocked before it is evicted")
    max_connections: int = _option(
        DEFAULT_MAX_CONNECTIONS, "count", "--max-connections",
        "open SSE connections per server; past it a reader gets 503", "N")
    max_connections_per_stream: int = _option(
        DEFAULT_MAX_CONNECTIONS_PER_STREAM, "count", "--max-connections-per-stream",
        "open SSE connections per stream; past it a reader gets 429", "N")
    fanout: bool = _option(
        True, "flag", "--fanout",
        "let the caught-up readers of a stream share one log reader")
    max_backlog_bytes: int = _option(
        DEFAULT_MAX_BACKLOG_BYTES, "bytes", "--max-backlog-bytes",
        "bytes a reader sharing its stream's reader may leave untaken before it is evicted and "
        "re-attaches", "N")
    cors_origins: tuple[str, ...] = _option(
        (), "origins", "--cors-origin",
        "allow browser requests from ORIGIN (repeatable; * for any)", "ORIGIN")
    expose_errors: bool = _option(
        False, "flag", "--expose-errors",
        "put the text of unexpected exceptions in error answers (development only)")
    max_body_size: int = _option(
        DEFAULT_MAX_BODY_SIZE, "bytes", "--max-body-size",
        "bytes of one write request's body; past it the request gets 413", "N")
    max_batch_chunks: int = _option(
        DEFAULT_MAX_BATCH_CHUNKS, "count", "--max-batch-chunks",
        "chunks in one POST /chunks batch; past it the request gets 413", "N")
    max_stream_id_length: int = _option(
        DEFAULT_MAX_STREAM_ID_LENGTH, "count", "--max-stream-id-length",
        "characters of a stream id; past it the request gets 400", "N")
    shutdown_grace_period: float = _option(
        DEFAULT_SHUTDOWN_GRACE_PERIOD, "seconds0", "--grace",
        "seconds to wait for streams to close on shutdown")
    retry_after: int = _option(
        DEFAULT_RETRY_AFTER, "code", "--retry-after",
        "the Retry-After seconds sent with every 429 and 503", "SECONDS")
    retry: int | None = _option(
        None, "code", "--retry",
        "an SSE retry: field (milliseconds) sent first on every stream, for browser readers",
        "MS")
    drain_on_signal: bool = _option(
        True, "flag", "--drain-on-signal",
        "on SIGINT / SIGTERM, end the open streams (recoverable fail) before the server's own "
        "graceful shutdown, which would otherwise wait for them")

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            none_ok = spec.name == "retry"
            problem = _problem(spec.metadata["kind"], value, none_ok=none_ok)
            if problem is not None:
                also = " (or None)" if none_ok else ""
                raise ValueError(f"{spec.name} must be {problem}{also}, not {value!r}")
        origins = cast(object, self.cors_origins)  # a list is fine; kept as a tuple (frozen)
        if isinstance(origins, str) or not isinstance(origins, Iterable):
            raise ValueError(f"cors_origins must be a sequence of origins, not {origins!r}")
        object.__setattr__(self, "cors_origins", tuple(cast(Iterable[str], origins)))


def _problem(kind: Kind, value: object, *, none_ok: bool = False) -> str | None:
    """What ``value`` must be for an option of ``kind``, or None when it is fine."""
    if kind == "flag":
        return None if isinstance(value, bool) else "True or False"
    if kind == "origins":
        return None  # any sequence of strings (checked in __post_init__)
    if value is None:
        return None if kind == "beat" or none_ok else _MUST[kind]
    if kind in ("count", "bytes", "code"):
        low = 0 if kind == "code" else 1
        return None if type(value) is int and value >= low else _MUST[kind]
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or not number < math.inf:
        return _MUST[kind]
    return None if (number >= 0 if kind == "seconds0" else number > 0) else _MUST[kind]


_MUST: Final[dict[str, str]] = {
    "count": "an int >= 1",
    "bytes": "an int >= 1",
    "code": "an int >= 0",
    "seconds": "a finite number of seconds > 0",
    "seconds0": "a finite number of seconds >= 0",
    "beat": "> 0 seconds, or None to turn it off",
}


# ---- the command line -----------------------------------------------------------------------------

_DEFAULTS: Final = ServerSettings()


def _shown(kind: Kind, value: object) -> str:
    """A default as the help shows it: ``10,000``, ``4 MiB``, ``15``, ``off``."""
    if value is None:
        return "off" if kind == "beat" else "none"
    if kind == "bytes" and isinstance(value, int) and value % 2**20 == 0:
        return f"{value // 2**20} MiB"
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _parser_for(kind: Kind, none_ok: bool) -> Callable[[str], Any]:
    """The argparse ``type`` of an option: converts the text and applies the option's check
    (argparse reports the message with the flag's name and exits 2)."""

    def parse(text: str) -> Any:
        value: int | float | None
        try:
            value = int(text) if kind in ("count", "bytes", "code") else float(text)
        except ValueError:
            what = "a whole number" if kind in ("count", "bytes", "code") else "a number"
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if kind == "beat" and value == 0:
            return None  # --heartbeat 0: off
        if _problem(kind, value, none_ok=none_ok) is not None:
            least = 1 if kind in ("count", "bytes") else 0
            if kind in ("count", "bytes", "code"):
                raise argparse.ArgumentTypeError(f"must be at least {least}, not {value:g}")
            raise argparse.ArgumentTypeError(
                f"must be a finite number of seconds {'> 0' if kind != 'seconds0' else '>= 0'}"
                f"{' (0: off)' if kind == 'beat' else ''}, not {text!r}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per ``ServerSettings`` field to ``parser`` (``--max-connections N`` ...), each
    with the field's help and default; ``settings_from_args`` reads them back."""
    for spec in dataclasses.fields(ServerSettings):
        kind: Kind = spec.metadata["kind"]
        flag: str = spec.metadata["flag"]
        default = getattr(_DEFAULTS, spec.name)
        help_text: str = spec.metadata["help"]
        if kind == "flag":
            parser.add_argument(flag, dest=spec.name, action=argparse.BooleanOptionalAction,
                                default=default,
                                help=f"{help_text} (default {'on' if default else 'off'})")
        elif kind == "origins":
            parser.add_argument(flag, dest=spec.name, action="append", default=[],
                                metavar=spec.metadata["metavar"], help=help_text)
        else:
            shown = _shown(kind, default) + ("; 0: off" if kind == "beat" else "")
            parser.add_argument(flag, dest=spec.name, default=default,
                                type=_parser_for(kind, none_ok=spec.name == "retry"),
                                metavar=spec.metadata["metavar"] or "SECONDS",
                                help=f"{help_text} (default {shown})")


def settings_from_args(namespace: argparse.Namespace, **overrides: Any) -> ServerSettings:
    """The ``ServerSettings`` of parsed ``add_arguments`` flags (``overrides`` win)."""
    values: dict[str, Any] = {spec.name: getattr(namespace, spec.name)
                              for spec in dataclasses.fields(ServerSettings)}
    values.update(overrides)
    return ServerSettings(**values)

