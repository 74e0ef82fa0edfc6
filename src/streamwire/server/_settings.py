"""``ServerSettings``: every option of the stream server, once, with its default, its check and its
help (uvicorn's ``Config`` idea). ``create_app``'s keywords, ``StreamApp`` and ``streamwire
serve``'s flags (``add_arguments`` / ``settings_from_args``) are all derived from it, so a flag
cannot be missing or disagree with the library's default (the machinery: ``streamwire._settings``).

Importing this module loads no web stack (``streamwire --version`` builds its parser with it).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from .._settings import add_arguments as add_settings_arguments
from .._settings import check, option, values_from_args
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

_option = option


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
        "MS", none_ok=True)
    drain_on_signal: bool = _option(
        True, "flag", "--drain-on-signal",
        "on SIGINT / SIGTERM, end the open streams (recoverable fail) before the server's own "
        "graceful shutdown, which would otherwise wait for them")
    otel: bool = _option(
        False, "flag", "--otel",
        "trace runs, writes and SSE connections with OpenTelemetry (the OTEL_* variables "
        "configure it; pip install 'streamwire[otel]')")
    ui: bool = _option(
        False, "flag", "--ui",
        "serve the operator's page at /ui: streams and runs live, a reply, stop (needs the "
        "write token)")

    def __post_init__(self) -> None:
        check(self)
        origins = cast(object, self.cors_origins)  # a list is fine; kept as a tuple (frozen)
        if isinstance(origins, str) or not isinstance(origins, Iterable):
            raise ValueError(f"cors_origins must be a sequence of origins, not {origins!r}")
        object.__setattr__(self, "cors_origins", tuple(cast(Iterable[str], origins)))


# ---- the command line -----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per ``ServerSettings`` field to ``parser`` (``--max-connections N`` ...), each
    with the field's help and default; ``settings_from_args`` reads them back."""
    add_settings_arguments(parser, ServerSettings)


def settings_from_args(namespace: argparse.Namespace, **overrides: Any) -> ServerSettings:
    """The ``ServerSettings`` of parsed ``add_arguments`` flags (``overrides`` win)."""
    return ServerSettings(**{**values_from_args(namespace, ServerSettings), **overrides})
