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
    GET  /openapi.json              the OpenAPI document of the above

Mount it in FastAPI with ``app.mount("/", create_app(log))``; a mounted app gets no lifespan
events, so call ``await stream_app.drain()`` from the host app's own lifespan shutdown.

Errors are JSON ``{"error": "<what is wrong>", "status": N}``: 400 for bad JSON, a bad cursor or
stream id; 422 for a body of the wrong shape; 404 for an unknown stream; 409 when the stream's status
forbids the write; 413 past a size limit; 429 (per-stream cap) or 503 (global cap, draining) with
``Retry-After``. The text of an unexpected exception never reaches the client unless
``expose_errors=True``; streamwire's own 4xx errors say what is wrong.

Authorization: ``authorize(request, stream_id, access)`` with ``access`` ``"read"`` (info, sse) or
``"write"`` (everything else) runs before any other work. It returns None (or an awaitable of None)
to allow, and refuses by raising ``starlette.exceptions.HTTPException`` (FastAPI's is a subclass)
with 401, 403 or 404; its ``detail`` and ``headers`` (``WWW-Authenticate``, say) are sent.
``bearer_token(token)`` builds the one ``streamwire serve`` uses.

Shutdown: ``StreamApp.drain()`` (run on lifespan shutdown) stops taking SSE connections and ends every
open one with ``fail{recoverable: true, errorDetail.code: SERVER_SHUTDOWN}``, so readers re-attach
elsewhere. uvicorn and granian only send lifespan shutdown after every connection closed, so on
lifespan startup the app chains itself in front of their SIGINT / SIGTERM handlers
(``drain_on_signal``). Without lifespan (mounted, or ``--lifespan off``) run it with
``uvicorn_server(app, ...)``, whose ``handle_exit`` drains first, or call ``drain()`` yourself. A
connection the server cancels (uvicorn's ``timeout_graceful_shutdown``) still writes the frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import logging
import math
import socket
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from types import FrameType
from typing import Annotated, Any, Final, Literal, TypeAlias, final

import anyio
import msgspec
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._server_openapi import openapi_document
from ._server_signals import chain_exit_signals
from ._server_sse import (
    SSE_RESPONSE_HEADERS,
    Connection,
    Receive,
    Scope,
    Send,
    serve_frames,
)
from .errors import StreamwireError
from .frames import EndStatus
from .log import StreamInfo, StreamLog

__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL",
    "DEFAULT_MAX_BATCH_CHUNKS",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_STREAM",
    "DEFAULT_MAX_STREAM_ID_LENGTH",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE_PERIOD",
    "Access",
    "Authorize",
    "DrainingServer",
    "ServerStatistics",
    "StreamApp",
    "bearer_token",
    "create_app",
    "uvicorn_server",
]

logger = logging.getLogger("streamwire.server")

#: Seconds between heartbeat comments on a quiet stream. Proxies cut silent streams after 30-60 s
#: (API Gateway 29 s, nginx and Cloud Run 60 s); 15 s leaves each of them at least one beat.
DEFAULT_HEARTBEAT_INTERVAL: Final = 15.0
#: Seconds one write may stay blocked (the client's window and the server's write buffer full)
#: before the consumer is evicted with a bare close; it re-attaches from its cursor.
DEFAULT_SEND_TIMEOUT: Final = 30.0
#: Open SSE connections per server; each costs a socket and a few tens of KiB.
DEFAULT_MAX_CONNECTIONS: Final = 10_000
#: Open SSE connections per stream: a fan-out bigger than this belongs behind a CDN or on Redis.
DEFAULT_MAX_CONNECTIONS_PER_STREAM: Final = 1_000
#: Bytes of one write request's body. The TRD's attachments travel as 1-10 MB data URLs in one
#: chunk, so 16 MiB admits them.
DEFAULT_MAX_BODY_SIZE: Final = 16 * 1024 * 1024
#: Chunks in one ``POST /chunks`` batch (one atomic ``append_many``).
DEFAULT_MAX_BATCH_CHUNKS: Final = 10_000
#: Characters of a stream id (it becomes a key in every backend).
DEFAULT_MAX_STREAM_ID_LENGTH: Final = 256
#: Seconds ``drain()`` waits for open connections to write their ``fail`` frame and close.
DEFAULT_SHUTDOWN_GRACE_PERIOD: Final = 5.0

#: What a request does to a stream: ``read`` (info, sse) or ``write`` (every other route).
Access: TypeAlias = Literal["read", "write"]
#: The authorization hook: allow by returning, refuse by raising ``HTTPException(401|403|404)``.
Authorize: TypeAlias = Callable[[Request, str, Access], "Awaitable[None] | None"]

_MAX_CURSOR_DIGITS: Final = 18


@final
class ServerStatistics(msgspec.Struct, frozen=True):
    """Counters of a ``StreamApp`` (anyio ``statistics()`` style)."""

    open_connections: int
    opened_total: int
    evicted_total: int
    refused_total: int
    draining: bool


# ---- request bodies --------------------------------------------------------------------------

_Step = Annotated[int, msgspec.Meta(ge=0)]


class _ChunkIn(msgspec.Struct, forbid_unknown_fields=True):
    step: _Step
    chunk: msgspec.Raw


class _EndIn(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    status: EndStatus
    output: Any = None
    state: Any = None
    usage: dict[str, Any] | None = None


class _FailIn(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    error: str
    recoverable: bool
    error_detail: dict[str, Any] | None = None


class _CleanupIn(msgspec.Struct, forbid_unknown_fields=True):
    step: _Step


_chunks_decoder = msgspec.json.Decoder(list[_ChunkIn])
_end_decoder = msgspec.json.Decoder(_EndIn)
_fail_decoder = msgspec.json.Decoder(_FailIn)
_cleanup_decoder = msgspec.json.Decoder(_CleanupIn)
_encode = msgspec.json.Encoder().encode


class _Refusal(Exception):
    """An HTTP error answer: the status, the message sent and extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class _SSERoute:
    """The router's entry to the SSE route (``HEAD`` and anything the fast path in
    ``StreamApp.__call__`` does not take); a plain ASGI app, so Starlette passes it the scope."""

    def __init__(self, app: StreamApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app.serve_sse(scope, receive, send, scope["path_params"]["stream_id"])


def _error_body(status: int, message: str) -> bytes:
    return _encode({"error": message, "status": status})


def _json(status: int, content: object, headers: dict[str, str] | None = None) -> Response:
    return Response(_encode(content), status, headers, media_type="application/json")


def info_json(info: StreamInfo) -> dict[str, Any]:
    """``GET /info``'s body: ``StreamInfo`` in camelCase, with the floor and marker always present."""
    body: dict[str, Any] = msgspec.to_builtins(info)
    body.setdefault("oldestRetainedSequence", None)
    body.setdefault("truncatedAtStep", None)
    return body


def _parse_cursor(text: str, source: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_CURSOR_DIGITS:
        raise _Refusal(400, f"{source} must be a non-negative integer sequence, got {text[:40]!r}")
    return int(text)


def bearer_token(token: str, *, protect_reads: bool = False) -> Authorize:
    """An ``authorize`` hook that requires ``Authorization: Bearer <token>`` for writes (and for
    reads when ``protect_reads``); a missing token is 401, a wrong one 403."""
    expected = token.encode()

    def authorize(request: Request, stream_id: str, access: Access) -> None:
        if access == "read" and not protect_reads:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise HTTPException(401, "a bearer token is required",
                                {"WWW-Authenticate": 'Bearer realm="streamwire"'})
        if not hmac.compare_digest(given.strip().encode(), expected):
            raise HTTPException(403, "the bearer token is not valid")

    return authorize


class StreamApp(Starlette):
    """The Starlette app ``create_app`` returns; adds ``drain()`` and ``statistics()``."""

    def __init__(
        self,
        log: StreamLog,
        *,
        authorize: Authorize | None,
        heartbeat_interval: float | None,
        max_connections: int,
        max_connections_per_stream: int,
        send_timeout: float,
        cors_origins: Sequence[str],
        expose_errors: bool,
        max_body_size: int,
        max_batch_chunks: int,
        max_stream_id_length: int,
        shutdown_grace_period: float,
        retry_after: int,
        retry: int | None,
        drain_on_signal: bool,
    ) -> None:
        if heartbeat_interval is not None and not heartbeat_interval > 0:
            raise ValueError("heartbeat_interval must be > 0 seconds, or None to turn it off")
        if not send_timeout > 0 or math.isinf(send_timeout):
            raise ValueError("send_timeout must be a finite number of seconds > 0")
        self.log = log
        self._drain_on_signal = drain_on_signal
        self._authorize = authorize
        self._heartbeat = heartbeat_interval
        self._max_connections = max_connections
        self._max_per_stream = max_connections_per_stream
        self._send_timeout = send_timeout
        self._expose_errors = expose_errors
        self._max_body = max_body_size
        self._max_batch = max_batch_chunks
        self._max_id = max_stream_id_length
        self._grace = shutdown_grace_period
        self._retry_after = str(retry_after)
        self._preamble = b"retry: %d\n\n" % retry if retry is not None else b""
        self._cors_any = "*" in cors_origins
        self._cors = frozenset(cors_origins)
        self._conns: set[Connection] = set()
        self._per_stream: dict[str, int] = {}
        self._opened = self._evicted = self._refused = 0
        self._draining = False
        self._drained: anyio.Event | None = None
        self._openapi = _encode(openapi_document())
        w = self._json_route
        routes = [
            Route("/streams/{stream_id}", w(self._create, "write"), methods=["PUT"]),
            Route("/streams/{stream_id}/info", w(self._info, "read"), methods=["GET"]),
            Route("/streams/{stream_id}/sse", _SSERoute(self), methods=["GET"]),
            Route("/streams/{stream_id}/chunks", w(self._chunks, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/end", w(self._end, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/fail", w(self._fail, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/cleanup", w(self._cleanup, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/reset", w(self._reset, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/reactivate", w(self._reactivate, "write"),
                  methods=["POST"]),
            Route("/openapi.json", self._openapi_route, methods=["GET"]),
        ]
        middleware: list[Middleware] = []
        if cors_origins:
            middleware.append(Middleware(
                CORSMiddleware, allow_origins=list(cors_origins),
                allow_methods=["GET", "PUT", "POST"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
                max_age=600))
        super().__init__(routes=routes, middleware=middleware, lifespan=self._lifespan)

    # ---- lifecycle -----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncGenerator[None]:
        undo = chain_exit_signals(self.begin_shutdown) if self._drain_on_signal else None
        try:
            yield
        finally:
            if undo is not None:
                undo()
            await self.drain()

    def begin_shutdown(self) -> None:
        """Refuse new SSE connections and stop every open one (each writes its recoverable
        ``fail`` frame and closes). Synchronous: call it on the event loop's thread."""
        self._draining = True
        for conn in list(self._conns):
            conn.stop("shutdown")

    async def drain(self, grace_period: float | None = None) -> bool:
        """``begin_shutdown()``, then wait up to ``grace_period`` seconds (default: the app's) for
        the connections to close. Returns whether all of them did."""
        self.begin_shutdown()
        if self._conns:
            self._drained = anyio.Event()
            with anyio.move_on_after(self._grace if grace_period is None else grace_period):
                await self._drained.wait()
        return not self._conns

    @property
    def grace_period(self) -> float:
        """Seconds ``drain()`` waits by default."""
        return self._grace

    def statistics(self) -> ServerStatistics:
        """Connection counters."""
        return ServerStatistics(len(self._conns), self._opened, self._evicted, self._refused,
                                self._draining)

    # ---- the SSE route (raw ASGI) ----------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The SSE route skips Starlette's middleware stack: each layer of it wraps ``send``, a
        # cost paid on every event. The route is also registered, for ``url_path_for``.
        if scope["type"] == "http" and scope["method"] == "GET":
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root) and path[len(root):len(root) + 1] == "/":
                path = path[len(root):]
            if path.startswith("/streams/") and path.endswith("/sse"):
                stream_id = path[9:-4]
                if stream_id and "/" not in stream_id:
                    await self.serve_sse(scope, receive, send, stream_id)
                    return
        await super().__call__(scope, receive, send)

    async def serve_sse(self, scope: Scope, receive: Receive, send: Send, stream_id: str) -> None:
        """The ``GET /streams/{id}/sse`` handler as raw ASGI (``HEAD``: the headers only)."""
        request = Request(scope, receive)
        cors = self._cors_headers(request)
        try:
            self._check_id(stream_id)
            header = request.headers.get("last-event-id")
            if header:
                cursor = _parse_cursor(header.strip(), "Last-Event-ID")
            else:
                query = request.query_params.get("cursor")
                cursor = _parse_cursor(query, "cursor") if query is not None else 0
            await self._check_access(request, stream_id, "read")
            self._check_capacity(stream_id)
            info = await self.log.info(stream_id)
            if cursor > info.head:
                raise _Refusal(409, f"cursor {cursor} is above the stream's head {info.head}: "
                                    "it names a chunk this stream never had")
            if scope["method"] == "HEAD":
                await send({"type": "http.response.start", "status": 200,
                            "headers": SSE_RESPONSE_HEADERS + cors})
                await send({"type": "http.response.body", "body": b""})
                return
            frames = self.log.read(stream_id, cursor)
        except Exception as exc:
            refusal = self._refusal(exc)
            if refusal.status in (429, 503):
                self._refused += 1
            await _send_error(send, refusal, cors)
            return
        client = scope.get("client")
        conn = Connection(stream_id, cursor, f"{client[0]}:{client[1]}" if client else "-")
        conn.waiting = info.head == 0 and info.status == "active"
        self._open(conn)
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": SSE_RESPONSE_HEADERS + cors})
            first = self._preamble + (b": waiting\n\n" if conn.waiting else b"")
            if first:
                await send({"type": "http.response.body", "body": first, "more_body": True})
            await serve_frames(conn, frames, send, receive, heartbeat_interval=self._heartbeat,
                               send_timeout=self._send_timeout, expose_errors=self._expose_errors)
        except OSError:
            conn.outcome = "disconnect"
        finally:
            self._close(conn)

    def _cors_headers(self, request: Request) -> list[tuple[bytes, bytes]]:
        origin = request.headers.get("origin")
        if origin is None or not (self._cors_any or origin in self._cors):
            return []
        if self._cors_any:
            return [(b"access-control-allow-origin", b"*")]
        return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]

    def _check_capacity(self, stream_id: str) -> None:
        retry = {"Retry-After": self._retry_after}
        if self._draining:
            raise _Refusal(503, "the server is shutting down; re-attach elsewhere", retry)
        if len(self._conns) >= self._max_connections:
            raise _Refusal(503, f"the server has {self._max_connections} open streams "
                                "(create_app(max_connections=...))", retry)
        if self._per_stream.get(stream_id, 0) >= self._max_per_stream:
            raise _Refusal(429, f"stream {stream_id!r} has {self._max_per_stream} readers "
                                "(create_app(max_connections_per_stream=...))", retry)

    def _open(self, conn: Connection) -> None:
        self._conns.add(conn)
        self._per_stream[conn.stream_id] = self._per_stream.get(conn.stream_id, 0) + 1
        self._opened += 1
        if self._draining:
            conn.stop("shutdown")
        logger.info("sse open stream=%s cursor=%d peer=%s", conn.stream_id, conn.cursor, conn.peer)

    def _close(self, conn: Connection) -> None:
        self._conns.discard(conn)
        left = self._per_stream[conn.stream_id] - 1
        if left:
            self._per_stream[conn.stream_id] = left
        else:
            del self._per_stream[conn.stream_id]
        if conn.outcome == "evicted":
            self._evicted += 1
        if self._drained is not None and not self._conns:
            self._drained.set()
        logger.info("sse close stream=%s peer=%s frames=%d outcome=%s seconds=%.1f",
                    conn.stream_id, conn.peer, conn.frames, conn.outcome,
                    time.monotonic() - conn.started)

    # ---- JSON routes -------------------------------------------------------------------------

    def _json_route(
        self, handler: Callable[[Request, str], Awaitable[Response]], access: Access
    ) -> Callable[[Request], Awaitable[Response]]:

        async def endpoint(request: Request) -> Response:
            stream_id: str = request.path_params["stream_id"]
            try:
                self._check_id(stream_id)
                await self._check_access(request, stream_id, access)
                return await handler(request, stream_id)
            except Exception as exc:
                refusal = self._refusal(exc)
                return Response(_error_body(refusal.status, refusal.message), refusal.status,
                                refusal.headers, media_type="application/json")

        return endpoint

    async def _body(self, request: Request) -> bytes:
        limit = self._max_body
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise _Refusal(413, f"the body has {length} bytes, over the limit of {limit} "
                                "(create_app(max_body_size=...))")
        body = bytearray()
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise _Refusal(413, f"the body is over the limit of {limit} bytes "
                                    "(create_app(max_body_size=...))")
        return bytes(body)

    async def _create(self, request: Request, stream_id: str) -> Response:
        return _json(200, info_json(await self.log.create_stream(stream_id)))

    async def _info(self, request: Request, stream_id: str) -> Response:
        return _json(200, info_json(await self.log.info(stream_id)))

    async def _chunks(self, request: Request, stream_id: str) -> Response:
        items = _chunks_decoder.decode(await self._body(request))
        if len(items) > self._max_batch:
            raise _Refusal(413, f"the batch has {len(items)} chunks, over the limit of "
                                f"{self._max_batch} (create_app(max_batch_chunks=...))")
        batch = [(item.step, bytes(item.chunk)) for item in items]
        sequences = await self.log.append_many(stream_id, batch) if batch else []
        if not batch:
            await self.log.info(stream_id)  # an unknown stream is 404 even for an empty batch
        return _json(200, {"sequences": sequences})

    async def _end(self, request: Request, stream_id: str) -> Response:
        body = _end_decoder.decode(await self._body(request))
        await self.log.end_stream(stream_id, body.status, output=body.output, state=body.state,
                                  usage=body.usage)
        return _json(200, info_json(await self.log.info(stream_id)))

    async def _fail(self, request: Request, stream_id: str) -> Response:
        body = _fail_decoder.decode(await self._body(request))
        await self.log.fail_stream(stream_id, body.error, error_detail=body.error_detail,
                                   recoverable=body.recoverable)
        return _json(200, info_json(await self.log.info(stream_id)))

    async def _cleanup(self, request: Request, stream_id: str) -> Response:
        body = _cleanup_decoder.decode(await self._body(request))
        rewound = await self.log.cleanup_to_step(stream_id, body.step)
        return _json(200, msgspec.to_builtins(rewound))

    async def _reset(self, request: Request, stream_id: str) -> Response:
        await self.log.reset_stream(stream_id)
        return _json(200, info_json(await self.log.info(stream_id)))

    async def _reactivate(self, request: Request, stream_id: str) -> Response:
        await self.log.reactivate_stream(stream_id)
        return _json(200, info_json(await self.log.info(stream_id)))

    async def _openapi_route(self, request: Request) -> Response:
        return Response(self._openapi, media_type="application/json")

    # ---- shared checks and error mapping -------------------------------------------------------

    def _check_id(self, stream_id: str) -> None:
        if len(stream_id) > self._max_id:
            raise _Refusal(400, f"the stream id has {len(stream_id)} characters, over the limit "
                                f"of {self._max_id} (create_app(max_stream_id_length=...))")

    async def _check_access(self, request: Request, stream_id: str, access: Access) -> None:
        if self._authorize is not None:
            result = self._authorize(request, stream_id, access)
            if inspect.isawaitable(result):
                await result

    def _refusal(self, exc: Exception) -> _Refusal:
        """Map an exception to the answer sent; unexpected text stays off the wire."""
        if isinstance(exc, _Refusal):
            return exc
        if isinstance(exc, HTTPException):
            return _Refusal(exc.status_code, exc.detail, dict(exc.headers or {}))
        if isinstance(exc, msgspec.ValidationError):
            return _Refusal(422, f"the body does not have the expected shape: {exc}")
        if isinstance(exc, msgspec.DecodeError):
            return _Refusal(400, f"the body is not valid JSON: {exc}")
        if isinstance(exc, StreamwireError):
            status = exc.status_hint
            if status < 500 or self._expose_errors:
                return _Refusal(status, str(exc))
            logger.warning("stream log error: %r", exc)
            return _Refusal(status, "the stream log failed")
        logger.exception("unexpected error", exc_info=exc)
        return _Refusal(500, repr(exc) if self._expose_errors else "internal server error")


async def _send_error(send: Send, refusal: _Refusal, extra: list[tuple[bytes, bytes]]) -> None:
    body = _error_body(refusal.status, refusal.message)
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), *extra]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_app(
    log: StreamLog,
    *,
    authorize: Authorize | None = None,
    heartbeat_interval: float | None = DEFAULT_HEARTBEAT_INTERVAL,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    max_connections_per_stream: int = DEFAULT_MAX_CONNECTIONS_PER_STREAM,
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
    cors_origins: Sequence[str] = (),
    expose_errors: bool = False,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    max_batch_chunks: int = DEFAULT_MAX_BATCH_CHUNKS,
    max_stream_id_length: int = DEFAULT_MAX_STREAM_ID_LENGTH,
    shutdown_grace_period: float = DEFAULT_SHUTDOWN_GRACE_PERIOD,
    retry_after: int = 1,
    retry: int | None = None,
    drain_on_signal: bool = True,
) -> StreamApp:
    """Serve ``log`` over HTTP as wire v2 (routes and rules: this module's docstring).

    Args:
        authorize: the authorization hook; None allows everything.
        heartbeat_interval: seconds between heartbeat comments on a quiet SSE stream (None: off).
        max_connections, max_connections_per_stream: SSE connection caps (503 / 429 past them).
        send_timeout: seconds one write may stay blocked before the consumer is evicted.
        cors_origins: origins allowed to read and write from a browser (``"*"`` for any).
        expose_errors: put the text of unexpected exceptions in error answers (development only).
        max_body_size, max_batch_chunks, max_stream_id_length: request limits (413 / 400).
        shutdown_grace_period: seconds ``drain()`` waits for connections to close.
        retry_after: the ``Retry-After`` seconds sent with 429 and 503.
        retry: an SSE ``retry:`` (milliseconds) sent first on every stream, for browser readers.
        drain_on_signal: on lifespan startup, make SIGINT / SIGTERM drain the open streams before
            the server's own graceful shutdown, which would otherwise wait for them (uvicorn,
            granian). Off: call ``drain()`` yourself.
    """
    return StreamApp(
        log, authorize=authorize, heartbeat_interval=heartbeat_interval,
        max_connections=max_connections, max_connections_per_stream=max_connections_per_stream,
        send_timeout=send_timeout, cors_origins=cors_origins, expose_errors=expose_errors,
        max_body_size=max_body_size, max_batch_chunks=max_batch_chunks,
        max_stream_id_length=max_stream_id_length, shutdown_grace_period=shutdown_grace_period,
        retry_after=retry_after, retry=retry, drain_on_signal=drain_on_signal)


class DrainingServer(uvicorn.Server):
    """A ``uvicorn.Server`` that drains its ``StreamApp`` as soon as it is told to exit.

    uvicorn waits for every connection to close before it sends lifespan shutdown, so an open SSE
    stream would hold it forever; here SIGINT / SIGTERM (or ``handle_exit`` called from any thread)
    first ends every stream with its recoverable ``fail`` frame.
    """

    def __init__(self, config: uvicorn.Config, app: StreamApp) -> None:
        super().__init__(config)
        self.stream_app = app
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.stream_app.begin_shutdown)


def uvicorn_server(app: StreamApp, *, host: str = "127.0.0.1", port: int = 8000,
                   **config: Any) -> DrainingServer:
    """A ``DrainingServer`` for ``app``; ``config`` goes to ``uvicorn.Config``. By default uvicorn
    also cancels whatever is left ``shutdown_grace_period`` seconds after the signal."""
    config.setdefault("timeout_graceful_shutdown", max(1, math.ceil(app.grace_period)))
    return DrainingServer(uvicorn.Config(app, host=host, port=port, **config), app)
