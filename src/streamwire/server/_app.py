"""``StreamApp``: the routes, caps, authorization and drain of the stream server (the module
docstring of ``streamwire.server`` describes the HTTP API; ``create_app`` builds one)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import Any, cast, final

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.routing import Route

from ..errors import UsageError
from ..log import StreamLog
from ..log._reader import ReadPosition
from ..runs import Agent, Runs
from ._auth import Access, Authorize, write_protection
from ._chat import chat_openapi_paths, chat_routes
from ._defaults import DEFAULT_MAX_BACKLOG_BYTES
from ._fanout import Fanout, log_shares_readers
from ._http import (
    Refusal,
    WriteAPI,
    check_stream_id,
    encode_json,
    parse_cursor,
    refusal_for,
    send_error,
)
from ._metrics import ServerMetrics, exposition
from ._openapi import include_openapi, openapi_document, routing_error
from ._routes import JSONRoutes
from ._runs import runs_openapi_paths, runs_routes
from ._signals import chain_exit_signals
from ._sse import (
    SSE_RESPONSE_HEADERS,
    Connection,
    Receive,
    Scope,
    Send,
    serve_frames,
)

__all__ = ["ServerStatistics", "StreamApp"]

logger = logging.getLogger("streamwire.server")



@final
class ServerStatistics(msgspec.Struct, frozen=True):
    """Counters of a ``StreamApp`` (anyio ``statistics()`` style)."""

    open_connections: int
    opened_total: int
    evicted_total: int
    refused_total: int
    draining: bool


class _SSERoute:
    """The router's entry to the SSE route (``HEAD`` and anything the fast path in
    ``StreamApp.__call__`` does not take); a plain ASGI app, so Starlette passes it the scope."""

    def __init__(self, app: StreamApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app.serve_sse(scope, receive, send, scope["path_params"]["stream_id"])


class StreamApp(Starlette):
    """The Starlette app ``create_app`` returns; adds ``drain()`` and ``statistics()``."""

    def __init__(
        self,
        log: StreamLog,
        *,
        authorize: Authorize | None,
        token: str | None = None,
        allow_anonymous_writes: bool = False,
        heartbeat_interval: float | None,
        max_connections: int,
        max_connections_per_stream: int,
        send_timeout: float,
        cors_origins: Sequence[str],
        fanout: bool = True,
        max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
        expose_errors: bool,
        max_body_size: int,
        max_batch_chunks: int,
        max_stream_id_length: int,
        shutdown_grace_period: float,
        retry_after: int,
        retry: int | None,
        drain_on_signal: bool,
        agents: Runs | Mapping[str, Agent] | Iterable[Agent] | None = None,
        chat_agent: str | None = None,
    ) -> None:
        if heartbeat_interval is not None and not heartbeat_interval > 0:
            raise ValueError("heartbeat_interval must be > 0 seconds, or None to turn it off")
        if not send_timeout > 0 or math.isinf(send_timeout):
            raise ValueError("send_timeout must be a finite number of seconds > 0")
        if type(max_backlog_bytes) is not int or max_backlog_bytes < 1:
            raise ValueError("max_backlog_bytes must be a positive int")
        self.log = log
        #: the hubs of the streams whose readers share one log reader (None: fan-out is off)
        self.fanout = (Fanout(heartbeat_interval=heartbeat_interval, send_timeout=send_timeout,
                              max_backlog_bytes=max_backlog_bytes, expose_errors=expose_errors)
                       if fanout and log_shares_readers(log) else None)
        self._drain_on_signal = drain_on_signal
        self._signals_loop: object = None  # the event loop whose exit signals drain this app
        self._authorize = write_protection(authorize, token, allow_anonymous_writes)
        self._heartbeat = heartbeat_interval
        self._max_connections = max_connections
        self._max_per_stream = max_connections_per_stream
        self._send_timeout = send_timeout
        self._expose_errors = expose_errors
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
        #: The runs API's service (``create_app(agents=...)``), else None.
        self.runs = (agents if isinstance(agents, Runs) or agents is None
                     else Runs(log, agents, expose_errors=expose_errors))
        document = openapi_document()
        if self.runs is not None:
            document = runs_openapi_paths(document)
        if chat_agent is not None:
            document = chat_openapi_paths(document)
        self._openapi = encode_json(document)
        self.metrics = ServerMetrics()
        json_routes = JSONRoutes(self, check_id=self._check_id, check_access=self._check_access,
                                 expose_errors=expose_errors, retry_after=self._retry_after)
        w = json_routes.stream_route
        self._api = api = WriteAPI(log, max_body=max_body_size, max_batch=max_batch_chunks)
        routes = [
            Route("/streams", json_routes.list_streams, methods=["GET"]),
            Route("/streams/{stream_id}", w(api.create, "write"), methods=["PUT"]),
            Route("/streams/{stream_id}/info", w(api.info, "read"), methods=["GET"]),
            Route("/streams/{stream_id}/sse", _SSERoute(self), methods=["GET"]),
            Route("/streams/{stream_id}/chunks", w(api.chunks, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/end", w(api.end, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/fail", w(api.fail, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/cleanup", w(api.cleanup, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/reset", w(api.reset, "write"), methods=["POST"]),
            Route("/streams/{stream_id}/reactivate", w(api.reactivate, "write"),
                  methods=["POST"]),
            Route("/streams/{stream_id}/keepalive", w(api.keepalive, "write"), methods=["POST"]),
            Route("/openapi.json", json_routes.openapi, methods=["GET"]),
            Route("/docs", json_routes.docs, methods=["GET"]),
            Route("/metrics", json_routes.metrics, methods=["GET"]),
        ]
        if self.runs is not None:
            routes += runs_routes(self.runs, check_access=self._check_access,
                                  serve_sse=self.serve_sse, max_body=max_body_size,
                                  max_id=max_stream_id_length, expose_errors=expose_errors)
        if chat_agent is not None:
            if self.runs is None:
                raise UsageError("chat_agent= needs agents= (the chat agent is one of them)")
            routes += chat_routes(self.runs, chat_agent, check_access=self._check_access,
                                  max_body=max_body_size, heartbeat_interval=heartbeat_interval,
                                  expose_errors=expose_errors, track=self._track,
                                  release=self._release)
        middleware: list[Middleware] = []
        if cors_origins:
            middleware.append(Middleware(
                CORSMiddleware, allow_origins=list(cors_origins),
                allow_methods=["GET", "PUT", "POST"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID", "Producer-Id",
                               "Producer-Epoch", "Producer-Seq"],
                max_age=600))
        super().__init__(routes=routes, middleware=middleware, lifespan=self._lifespan,
                         exception_handlers={HTTPException: routing_error})

    # ---- lifecycle -----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncGenerator[None]:
        undo = self._chain_signals() if self._drain_on_signal else None
        try:
            async with self.runs or contextlib.nullcontext():  # agents end with their terminal
                yield
        finally:
            if undo is not None:
                undo()
                self._signals_loop = None
            await self.drain()

    def _chain_signals(self) -> Callable[[], None] | None:
        """Chain ``begin_shutdown`` in front of the server's SIGINT / SIGTERM handlers, once per
        event loop. Runs on lifespan startup and, for a mounted app (which gets no lifespan), when
        its first SSE connection opens: a server only waits on open streams, so chaining when the
        first one opens is in time. Returns the undo, or None when this loop is already chained."""
        try:
            loop: object = asyncio.get_running_loop()
        except RuntimeError:  # trio: nothing to chain onto
            return None
        if loop is self._signals_loop:
            return None
        self._signals_loop = loop
        return chain_exit_signals(self.begin_shutdown)

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
        conn: Connection | None = None
        try:
            self._check_id(scope, stream_id)
            header = request.headers.get("last-event-id")
            if header:
                cursor = parse_cursor(header.strip(), "Last-Event-ID")
            else:
                query = request.query_params.get("cursor")
                cursor = parse_cursor(query, "cursor") if query is not None else 0
            await self._check_access(request, stream_id, "read")
            # Check and take the slot with no await in between, so a burst of connects cannot
            # all pass the check while the first ones wait on the log.
            self._check_capacity(stream_id)
            client = scope.get("client")
            conn = Connection(stream_id, cursor, f"{client[0]}:{client[1]}" if client else "-")
            self._reserve(conn)
            started = time.perf_counter()
            info = await self.log.info(stream_id)
            self.metrics.log_info.observe(time.perf_counter() - started)
            if cursor > info.head:
                raise Refusal(409, f"cursor {cursor} is above the stream's head {info.head}: "
                                    "it names a chunk this stream never had")
            if scope["method"] == "HEAD":
                conn.outcome = "refused"  # nothing was streamed: no open / close log lines
                await send({"type": "http.response.start", "status": 200,
                            "headers": SSE_RESPONSE_HEADERS + cors})
                await send({"type": "http.response.body", "body": b""})
                self._release(conn)
                return
            position = (ReadPosition() if self.fanout is not None and self.fanout.can_share(send)
                        else None)
            frames = (self.log.read(stream_id, cursor) if position is None
                      else cast(Any, self.log).read(stream_id, cursor, position=position))
        except Exception as exc:
            if conn is not None:
                conn.outcome = "refused"
                self._release(conn)
            refusal = refusal_for(exc, expose_errors=self._expose_errors,
                                  retry_after=self._retry_after)
            if refusal.status in (429, 503):
                self._refused += 1
            await send_error(send, refusal, cors)
            return
        conn.waiting = info.head == 0 and info.status == "active"
        self.metrics.replay.observe(info.head - cursor)
        if cursor:
            self.metrics.reattaches += 1
        if self._drain_on_signal:
            self._chain_signals()
        self._open(conn)
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": SSE_RESPONSE_HEADERS + cors})
            first = self._preamble + (b": waiting\n\n" if conn.waiting else b"")
            if first:
                await send({"type": "http.response.body", "body": first, "more_body": True})
            await serve_frames(conn, frames, send, receive, heartbeat_interval=self._heartbeat,
                               send_timeout=self._send_timeout, expose_errors=self._expose_errors,
                               fanout=self.fanout if position is not None else None,
                               position=position)
        except OSError:
            conn.outcome = "disconnect"
        finally:
            self._release(conn)

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
            raise Refusal(503, "the server is shutting down; re-attach elsewhere", retry)
        if len(self._conns) >= self._max_connections:
            raise Refusal(503, f"the server has {self._max_connections} open streams "
                                "(create_app(max_connections=...))", retry)
        if self._per_stream.get(stream_id, 0) >= self._max_per_stream:
            raise Refusal(429, f"stream {stream_id!r} has {self._max_per_stream} readers "
                                "(create_app(max_connections_per_stream=...))", retry)

    def _reserve(self, conn: Connection) -> None:
        """Count ``conn`` against the caps from now until ``_release``."""
        self._conns.add(conn)
        self._per_stream[conn.stream_id] = self._per_stream.get(conn.stream_id, 0) + 1
        if self._draining:
            conn.stop("shutdown")

    def _track(self, conn: Connection) -> None:
        """A chat reply's connection (``_chat.py``): counted, and drained at shutdown, like a
        stream's."""
        if self._drain_on_signal:
            self._chain_signals()
        self._reserve(conn)
        self._open(conn)

    def _open(self, conn: Connection) -> None:
        self._opened += 1
        logger.info("sse open stream=%s cursor=%d peer=%s", conn.stream_id, conn.cursor, conn.peer)

    def _release(self, conn: Connection) -> None:
        """Uncount ``conn``: its response is over and its socket closed or reset (``serve_frames``
        returns only then)."""
        self._conns.discard(conn)
        left = self._per_stream[conn.stream_id] - 1
        if left:
            self._per_stream[conn.stream_id] = left
        else:
            del self._per_stream[conn.stream_id]
        self.metrics.frames_closed += conn.frames
        if conn.outcome == "evicted":
            self._evicted += 1
        if self._drained is not None and not self._conns:
            self._drained.set()
        if conn.outcome != "refused":
            logger.info("sse close stream=%s peer=%s frames=%d outcome=%s seconds=%.1f",
                        conn.stream_id, conn.peer, conn.frames, conn.outcome,
                        time.monotonic() - conn.started)

    # ---- OpenAPI and metrics ------------------------------------------------------------------

    def include_openapi(self, host: object, *, prefix: str | None = None) -> None:
        """Add the stream routes to a FastAPI ``host``'s ``/openapi.json`` (and so its ``/docs``).
        ``prefix`` is the mount path; by default it is looked up among the host's routes."""
        include_openapi(host, self, self.openapi_document, prefix)

    @property
    def openapi_json(self) -> bytes:
        """The OpenAPI document served at ``/openapi.json``, encoded."""
        return self._openapi

    def metrics_text(self) -> bytes:
        """The ``GET /metrics`` body (Prometheus text format)."""
        self.metrics.appended = self._api.appended
        return exposition(self.metrics, connections=self._conns, per_stream=self._per_stream,
                          opened=self._opened, evicted=self._evicted, refused=self._refused,
                          draining=self._draining)

    def openapi_document(self) -> dict[str, Any]:
        """A copy of the OpenAPI document served at ``/openapi.json``."""
        document: dict[str, Any] = msgspec.json.decode(self._openapi)
        return document

    # ---- shared checks and error mapping -------------------------------------------------------

    def _check_id(self, scope: Scope, stream_id: str) -> None:
        check_stream_id(stream_id, self._max_id, scope.get("raw_path"))

    async def _check_access(self, request: Request, stream_id: str, access: Access) -> None:
        if self._authorize is not None:
            result = self._authorize(request, stream_id, access)
            if inspect.isawaitable(result):
                await result
