"""``create_app``: the one documented way to build a ``StreamApp``, with every option keyword-only:
the options of ``ServerSettings`` (their defaults named in ``_defaults``; a test checks they agree),
who may write, and the agents."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..log import StreamLog
from ..runs import Agent, Runs
from ._app import StreamApp
from ._auth import Authorize
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
from ._settings import ServerSettings

__all__ = ["create_app"]


def create_app(
    log: StreamLog,
    *,
    authorize: Authorize | None = None,
    token: str | None = None,
    allow_anonymous_writes: bool = False,
    heartbeat_interval: float | None = DEFAULT_HEARTBEAT_INTERVAL,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    max_connections_per_stream: int = DEFAULT_MAX_CONNECTIONS_PER_STREAM,
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
    fanout: bool = True,
    max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
    cors_origins: Sequence[str] = (),
    expose_errors: bool = False,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    max_batch_chunks: int = DEFAULT_MAX_BATCH_CHUNKS,
    max_stream_id_length: int = DEFAULT_MAX_STREAM_ID_LENGTH,
    shutdown_grace_period: float = DEFAULT_SHUTDOWN_GRACE_PERIOD,
    retry_after: int = DEFAULT_RETRY_AFTER,
    retry: int | None = None,
    drain_on_signal: bool = True,
    otel: bool = False,
    ui: bool = False,
    agents: Runs | Mapping[str, Agent] | Iterable[Agent] | None = None,
    chat_agent: str | None = None,
    chat_multitask: str = "reject",
    chat_agents: Iterable[str] = (),
) -> StreamApp:
    """Serve ``log`` over HTTP as wire v2 (routes and rules: this module's docstring).

    Writes are never open by omission: pass exactly one of ``authorize``, ``token`` or
    ``allow_anonymous_writes=True``, else ``UsageError``.

    Args:
        authorize: the authorization hook (``access`` "read" or "write"); it decides every
            request, and may name the caller by returning a user id or ``User`` (None:
            anonymous): what a user starts is theirs alone, and their agents see ``run.user``.
            ``jwt_bearer(secret)`` identifies callers by HS256 JWTs.
        token: writes need ``Authorization: Bearer <token>`` (``bearer_token(token)``); reads
            stay open (``authorize=bearer_token(token, protect_reads=True)`` protects them too).
        allow_anonymous_writes: anyone who reaches the server may write (development, or a
            server behind its own gateway).
        heartbeat_interval: seconds between heartbeat comments on a quiet SSE stream (None: off).
        max_connections: the streaming connection cap (503 past it): every reader counts, of
            a stream, a run, a chat reply or an ``SSEResponse`` given ``engine=app.engine``.
        max_connections_per_stream: the cap per stream (429 past it).
        send_timeout: seconds one write may stay blocked before the consumer is evicted.
        fanout: let the caught-up readers of a stream share one log reader, whose frames are
            encoded once and written to all of them in one pass (``streamwire.server._fanout``;
            under uvicorn, with a log whose ``read`` takes ``position=``). Off: each connection
            reads the log on its own.
        max_backlog_bytes: bytes a reader sharing its stream's reader may leave untaken before
            it is evicted (it re-attaches from its cursor).
        cors_origins: origins allowed to read and write from a browser (``"*"`` for any).
        expose_errors: put the text of unexpected exceptions in error answers (development only).
        max_body_size: a request body's bytes (413 past it).
        max_batch_chunks: chunks in one ``POST /chunks`` (413 past it).
        max_stream_id_length: a stream id's characters (400 past it).
        shutdown_grace_period: seconds ``drain()`` waits for connections to close.
        retry_after: the ``Retry-After`` seconds sent with every 429 and 503.
        retry: an SSE ``retry:`` (milliseconds) sent first on every stream, for browser readers.
        drain_on_signal: make SIGINT / SIGTERM drain the open streams before the server's own
            graceful shutdown, which would otherwise wait for them (uvicorn, granian); chained
            on lifespan startup, or when the first SSE connection opens (mounted, no lifespan).
            Off: call ``drain()`` yourself.
        otel: trace with OpenTelemetry (``streamwire.server._otel``): a span per run, per write
            request and per SSE connection; needs ``pip install 'streamwire[otel]'``
            (``UsageError`` without it). Off, OpenTelemetry is never imported.
        ui: serve the operator's page at ``/ui`` (``streamwire.server._ui``): the streams and
            runs live, a run's reply, stop; its data needs write access.
        agents: serve the runs API (``streamwire.server._runs``) for these agents (by name, or
            callables under their ``__name__``), or a configured ``streamwire.runs.Runs`` over
            the same log; their records go to the log's backend.
        chat_agent: serve ``useChat``'s ``/api/chat`` routes (``streamwire.server._chat``) with
            this agent of ``agents``: each reply is a run of it, read as a UI message stream;
            each chat is a thread kept on the log's backend (``streamwire.server._threads``).
        chat_multitask: what a new message does while its chat's reply runs: ``"reject"``
            (409 naming the running reply), ``"interrupt"`` (stop it, then answer) or
            ``"enqueue"`` (answer when it ends).
        chat_agents: the agents of ``agents`` a chat request may choose instead with the body
            field ``{"agent": NAME}`` (the AI SDK merges useChat's ``body`` into the request);
            another name is 400 naming these. ``chat_agent`` (default: the first) answers a
            request that names none.

    Raises:
        ValueError: an option out of its range (``ServerSettings`` names it).
        UsageError: no choice (or two) about who may write; ``chat_agent`` or one of
            ``chat_agents`` not among ``agents``; ``otel=True`` without OpenTelemetry.
    """
    settings = ServerSettings(
        heartbeat_interval=heartbeat_interval, send_timeout=send_timeout,
        max_connections=max_connections, max_connections_per_stream=max_connections_per_stream,
        fanout=fanout, max_backlog_bytes=max_backlog_bytes, cors_origins=tuple(cors_origins),
        expose_errors=expose_errors, max_body_size=max_body_size,
        max_batch_chunks=max_batch_chunks, max_stream_id_length=max_stream_id_length,
        shutdown_grace_period=shutdown_grace_period, retry_after=retry_after, retry=retry,
        drain_on_signal=drain_on_signal, otel=otel, ui=ui)
    return StreamApp(log, settings, authorize=authorize, token=token,
                     allow_anonymous_writes=allow_anonymous_writes, agents=agents,
                     chat_agent=chat_agent, chat_multitask=chat_multitask,
                     chat_agents=chat_agents)
