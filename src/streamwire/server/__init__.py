"""The stream server: any ``StreamLog`` over HTTP as wire v2, as a Starlette app.

``create_app(log)`` returns a ``StreamApp`` (a ``Starlette`` subclass) with exactly these routes::

    PUT  /streams/{id}              create (idempotent)            -> info
    GET  /streams/{id}/info         head, status, floor, marker    -> info
    GET  /streams/{id}/sse          replay, caught-up, live, one terminal (Last-Event-ID or ?cursor=N)
    POST /streams/{id}/chunks       [{"step": S, "chunk": C}, ...] -> {"sequences": [...]} (all or none)
    POST /streams/{id}/end          {status, output?, state?, usage?}
    POST /streams/{id}/fail         {error, errorDetail?, recoverable}
    POST /streams/{id}/cleanup      {"step": S}                    -> the rewound marker
    POST /streams/{id}/reset        start a new run
    POST /streams/{id}/reactivate   make a finished stream active again
    POST /streams/{id}/keepalive    renew the writer's lease without writing (a quiet writer)
    GET  /streams?limit=&after=     a page of streams in id order  -> {"streams": [info], "next"}
    GET  /metrics                   Prometheus text format (connections, readers, replays, latency, runs)
    GET  /healthz                   200 while the process is up (no token, calls nothing)
    GET  /readyz                    200 when the log answers and agents run, else 503 (no token)
    GET  /openapi.json              the OpenAPI document of the above
    GET  /docs                      the document as a page (its script and style served here: no CDN)
    GET  /ui                        ui=True only: the operator's page (streams, runs, a reply, stop)

The pages (``/docs``, ``/ui``) load nothing from another origin (a Content-Security-Policy says
so); ``/ui``'s data (``GET /ui/state``) needs write access, and the page asks for the token.
``otel=True`` traces runs, stream writes and SSE connections with OpenTelemetry (``_otel``).

Every option is a field of ``ServerSettings`` (``create_app``'s keywords build one; ``streamwire
serve``'s flags are derived from it).

Mount it in FastAPI with ``app.mount("/", create_app(log, token=...))`` (after the host's own
routes) and hand the host its lifespan, ``FastAPI(lifespan=stream_app.lifespan)`` (it runs the
agents of ``agents=``; without it their routes answer 503 saying so);
``stream_app.include_openapi(app)`` adds the stream routes to the host's ``/openapi.json`` and
``/docs``. A wrong method on a route is 405 with ``Allow``, an unknown path 404, both as JSON
errors.

Connections: every streaming response -- a stream's, a run's, a chat reply, an ``SSEResponse``
given ``engine=stream_app.engine`` -- is admitted and run by one engine (``_engine``): it counts
against ``max_connections`` (503 past it) and ``max_connections_per_stream`` (429), gets heartbeat
comments when quiet, is evicted (reset, no terminal: a reader re-attaches from its cursor) when one
write stays blocked for ``send_timeout``, and is drained at shutdown.

Errors are JSON ``{"error": "<what is wrong>", "status": N}``: 400 for bad JSON, a bad cursor or
stream id; 422 for a body of the wrong shape (naming the field, what it must be, the valid values); 404 for an unknown stream; 409 when the stream's status
forbids the write (naming the HTTP route that changes it); 413 past a size limit; 429 (per-stream cap); 503 (global cap, draining, the log
failing) -- every 429 and 503 with ``Retry-After: <retry_after>``. The text of an unexpected exception never reaches the client unless
``expose_errors=True``; streamwire's own 4xx errors say what is wrong.

Writes are never open by omission: ``create_app`` needs ``authorize=<hook>``, ``token=<bearer
token>`` (writes need ``Authorization: Bearer <token>``, reads stay open) or
``allow_anonymous_writes=True``, else it raises ``UsageError``.

Authorization: ``authorize(request, stream_id, access)`` with ``access`` ``"read"`` (info, sse;
``GET /streams`` and ``GET /metrics`` with ``stream_id`` ``""``) or ``"write"`` (everything else)
runs before any other work. It allows by returning who the caller is (or an awaitable of it):
None (anonymous), a user id or a ``User``, and refuses by raising
``starlette.exceptions.HTTPException`` (FastAPI's is a subclass) with 401, 403 or 404; its
``detail`` and ``headers`` (``WWW-Authenticate``, say) are sent. ``bearer_token(token)`` builds
the one ``streamwire serve`` uses, ``jwt_bearer(secret)`` the one of ``serve --jwt-secret``
(users from HS256 JWTs). What a user starts (a run, a chat) is theirs: to other callers it
answers as if it did not exist, and ``GET /streams`` lists runs' and chats' streams only to their
owner (``_owners``).

Shutdown: ``StreamApp.drain()`` (run at the lifespan's end) stops taking SSE connections and ends every
open one with ``fail{recoverable: true, errorDetail.code: SERVER_SHUTDOWN}``, so readers re-attach
elsewhere. uvicorn and granian only send lifespan shutdown after every connection closed, so the
app chains itself in front of their SIGINT / SIGTERM handlers (``drain_on_signal``): on lifespan
startup, and, mounted (no lifespan of its own), when its first SSE connection opens. Off the main
thread or off asyncio nothing can be chained: run it with ``uvicorn_server(app, ...)``, whose
``handle_exit`` drains first, or call ``drain()`` yourself. A connection the server cancels
(uvicorn's ``timeout_graceful_shutdown``) still writes the frame.

Fan-out: the caught-up readers of one stream share one log reader (``create_app(fanout=True)``,
the default, under uvicorn): each frame is read and encoded once and written to all of them in
one pass, and a reader waiting on a quiet stream costs no task of its own. A reader that does not
keep up leaves up to ``max_backlog_bytes`` untaken before it is evicted, as one whose write stalls
``send_timeout`` is; it re-attaches from its cursor. ``streamwire.server._fanout`` says how.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any, Final

from .._public import publish
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

if TYPE_CHECKING:
    from ._app import StreamApp
    from ._auth import Access, Authorize, User, bearer_token, jwt_bearer
    from ._create import create_app
    from ._direct import ASGIWritable, Producer, SSEResponse, create_sse_writable
    from ._engine import Engine, ServerStatistics
    from ._running import DrainingServer, uvicorn_server

#: Names imported on first use, and the module each comes from: they load starlette, anyio and
#: uvicorn, which ``ServerSettings`` and the defaults do not (``streamwire serve``'s parser is built
#: from them without the web stack).
_LAZY: Final = {
    "ASGIWritable": "_direct", "Access": "_auth", "Authorize": "_auth",
    "DrainingServer": "_running", "Engine": "_engine", "Producer": "_direct",
    "SSEResponse": "_direct", "ServerStatistics": "_engine", "StreamApp": "_app",
    "User": "_auth", "bearer_token": "_auth", "create_app": "_create",
    "create_sse_writable": "_direct", "jwt_bearer": "_auth", "uvicorn_server": "_running",
}

__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL",
    "DEFAULT_MAX_BACKLOG_BYTES",
    "DEFAULT_MAX_BATCH_CHUNKS",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_STREAM",
    "DEFAULT_MAX_STREAM_ID_LENGTH",
    "DEFAULT_RETRY_AFTER",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE_PERIOD",
    "ASGIWritable",
    "Access",
    "Authorize",
    "DrainingServer",
    "Engine",
    "Producer",
    "SSEResponse",
    "ServerSettings",
    "ServerStatistics",
    "StreamApp",
    "User",
    "bearer_token",
    "create_app",
    "create_sse_writable",
    "jwt_bearer",
    "uvicorn_server",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    publish({"__name__": __name__, name: value}, [name])
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


publish(globals(), [name for name in __all__ if name not in _LAZY])
