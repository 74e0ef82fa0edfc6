"""``StreamApp``: the routes of the stream server over its settings, its connection engine (caps,
heartbeats, ``send_timeout``, drain: ``_engine``) and its authorization (the module docstring of
``streamwire.server`` describes the HTTP API; ``create_app`` builds one)."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

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
from ._asgi import Receive, Scope, Send
from ._auth import Access, Authorize, write_protection
from ._chat import ChatAPI
from ._chat_openapi import chat_openapi_paths
from ._context import (
    CORS_ALLOW_HEADERS,
    CORS_EXPOSE_HEADERS,
    RawRoute,
    RouteContext,
    StreamHandler,
)
from ._engine import WAITING, Connection, Engine, ServerStatistics
from ._fanout import Fanout, log_shares_readers
from ._http import Refusal, WriteAPI, encode_json, reader_cursor
from ._metrics import RunCounts, exposition
from ._openapi import docs_routes, include_openapi, openapi_document, routing_error
from ._ops import Probes
from ._owners import Owners
from ._routes import JSONRoutes
from ._runs import RunsAPI, runs_openapi_paths
from ._settings import ServerSettings
from ._sse import SSE_RESPONSE_HEADERS, StreamSource
from ._threads import ThreadsAPI, threads_openapi_paths
from ._ui import OperatorPage, ui_openapi_paths

if TYPE_CHECKING:
    from ._otel import Tracing

__all__ = ["StreamApp"]


class StreamApp(Starlette):
    """The Starlette app ``create_app`` returns; adds ``lifespan``, ``drain()`` and
    ``statistics()``. ``settings`` holds every option (``ServerSettings``); who may write is
    ``authorize``, ``token`` or ``allow_anonymous_writes`` (exactly one); ``agents`` and
    ``chat_agent`` serve the runs and chat APIs (``create_app`` documents each)."""

    def __init__(
        self,
        log: StreamLog,
        settings: ServerSettings | None = None,
        *,
        authorize: Authorize | None = None,
        token: str | None = None,
        allow_anonymous_writes: bool = False,
        agents: Runs | Mapping[str, Agent] | Iterable[Agent] | None = None,
        chat_agent: str | None = None,
        chat_multitask: str = "reject",
        chat_agents: Iterable[str] = (),
    ) -> None:
        settings = settings if settings is not None else ServerSettings()
        self.log = log
        self.settings = settings
        #: the streaming connections: admission, running, drain, counters
        self.engine = Engine(settings)
        self.metrics = self.engine.metrics
        #: the hubs of the streams whose readers share one log reader (None: fan-out is off)
        self.fanout = Fanout(settings) if settings.fanout and log_shares_readers(log) else None
        #: The runs API's service (``create_app(agents=...)``), else None.
        self.runs = (agents if isinstance(agents, Runs) or agents is None
                     else Runs(log, agents, expose_errors=settings.expose_errors))
        self._ctx = ctx = RouteContext(
            log, settings, self.engine,
            write_protection(authorize, token, allow_anonymous_writes),
            Owners(log, self.runs.store if self.runs is not None else None))
        self._preamble = b"retry: %d\n\n" % settings.retry if settings.retry is not None else b""
        chat_agents = tuple(chat_agents)
        if chat_agent is None and chat_agents:
            chat_agent = chat_agents[0]
        if self.runs is not None and self.runs.drain_timeout > 0:
            self.engine.hold = self.drain_runs  # SIGTERM drains the runs before streams stop
        if chat_agent is not None and self.runs is None:
            raise UsageError("chat_agent= needs agents= (the chat agent is one of them)")
        #: agents to run and no request seen yet (``__call__`` checks the lifespan ran, once)
        self._unstarted = self.runs is not None
        document = openapi_document()
        if self.runs is not None:
            document = runs_openapi_paths(document)
        if chat_agent is not None:
            document = threads_openapi_paths(chat_openapi_paths(document))
        if settings.ui:
            document = ui_openapi_paths(document)
        self._openapi = encode_json(document)
        json_routes = JSONRoutes(self, ctx)
        #: the app's OpenTelemetry spans (``otel=True``, ``_otel``), else None
        self.tracing = _tracing(settings, self.runs)
        self._api = api = WriteAPI(log, max_body=settings.max_body_size,
                                   max_batch=settings.max_batch_chunks)
        # traced, each SSE connection is served inside its span; else straight (no frame more
        # per reader: a reader waits in this coroutine for as long as it reads)
        sse: StreamHandler = (self.serve_sse if self.tracing is None
                              else functools.partial(self.tracing.sse, self.serve_sse))
        routes = [Route("/streams", json_routes.list_streams, methods=["GET"]),
                  Route("/streams/{stream_id}/sse", RawRoute(sse, "stream_id"), methods=["GET"])]
        for method, suffix, handler, access in (
                ("PUT", "", api.create, "write"), ("GET", "/info", api.info, "read"),
                ("POST", "/chunks", api.chunks, "write"), ("POST", "/end", api.end, "write"),
                ("POST", "/fail", api.fail, "write"), ("POST", "/cleanup", api.cleanup, "write"),
                ("POST", "/reset", api.reset, "write"),
                ("POST", "/reactivate", api.reactivate, "write"),
                ("POST", "/keepalive", api.keepalive, "write")):
            template = "/streams/{stream_id}" + suffix
            endpoint = json_routes.stream_route(handler, cast(Access, access))
            if self.tracing is not None:
                endpoint = self.tracing.route(endpoint, method, template)
            routes.append(Route(template, endpoint, methods=[method]))
        routes += [
            Route("/openapi.json", json_routes.openapi, methods=["GET"]),
            *docs_routes(),
            Route("/metrics", json_routes.metrics, methods=["GET"]),
            # the probes of a load balancer or Kubernetes: no authorization (``_ops``)
            Route("/healthz", (probes := Probes(self, ctx)).healthz, methods=["GET"]),
            Route("/readyz", probes.readyz, methods=["GET"]),
        ]
        #: the streaming routes ``__call__`` serves itself: (method, prefix, suffix, handler);
        #: a prefix ending in "/" takes an id up to the suffix, another is the whole path
        self._streaming: list[tuple[str, str, str, StreamHandler]] = [
            ("GET", "/streams/", "/sse", sse)]
        if self.runs is not None:
            runs_api = RunsAPI(self.runs, ctx, sse)
            routes += runs_api.routes()
            self._streaming.append(("GET", "/runs/", "/sse", runs_api.sse))
            if chat_agent is not None:
                chat_api = ChatAPI(self.runs, chat_agent, ctx, chat_multitask, chat_agents)
                routes += chat_api.routes() + ThreadsAPI(chat_api.threads, ctx).routes()
                self._streaming += [("POST", "/api/chat", "", chat_api.post),
                                    ("GET", "/api/chat/", "/stream", chat_api.resume)]
        if settings.ui:
            routes += OperatorPage(self, ctx).routes()
        middleware: list[Middleware] = []
        if settings.cors_origins:
            middleware.append(Middleware(
                CORSMiddleware, allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "PUT", "POST", "DELETE"], allow_headers=list(CORS_ALLOW_HEADERS),
                expose_headers=list(CORS_EXPOSE_HEADERS), max_age=600))
        super().__init__(routes=routes, middleware=middleware, lifespan=self.lifespan,
                         exception_handlers={HTTPException: routing_error})

    # ---- lifecycle -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncGenerator[None]:
        """The app's lifespan: runs its agents (``agents=``), chains the drain in front of the
        server's SIGINT / SIGTERM handlers (``drain_on_signal``) and drains the open streams at
        its end. Served directly, the server runs it; mounted in a host (which gives a mounted
        app no lifespan), hand it to the host: ``FastAPI(lifespan=stream_app.lifespan)``, or
        ``async with stream_app.lifespan(app):`` inside the host's own lifespan. An app with
        agents whose lifespan never ran answers its runs and chat routes with a 503 naming this
        fix (and says so once in the server's log)."""
        undo = self.engine.chain_signals() if self.settings.drain_on_signal else None
        try:
            async with self.runs or contextlib.nullcontext():  # agents end with their terminal
                self._ctx.lifespan_active = True
                try:
                    yield
                finally:
                    self._ctx.lifespan_active = False
        finally:
            if undo is not None:
                undo()
            await self.drain()
            if self.tracing is not None:
                self.tracing.close()

    async def drain_runs(self) -> None:
        """The first exit signal's drain (before ``begin_shutdown``): starts and resumes answer
        503 with ``Retry-After`` while the running runs get up to ``Runs.drain_timeout`` seconds
        to end; the rest end ``WORKER_SHUTDOWN`` (recoverable) or, with a retry left, are let go
        for another process to run again (``run_retries``). Their readers keep reading to
        their terminal (for up to ``shutdown_grace_period`` seconds after it: a polling log
        delivers it a moment later); every other stream goes on until ``begin_shutdown``. With
        ``drain_timeout=0`` there is no drain: a signal stops every stream at once, and the runs
        are shut down as the lifespan ends."""
        if self.runs is None:
            return
        running = self.runs.running_here
        let_go = await self.runs.drain()  # these go on elsewhere: their readers re-attach there
        streams = [run_id for run_id in running if run_id not in let_go]
        with anyio.move_on_after(self.settings.shutdown_grace_period):
            while True:
                if not any(s in self.engine.per_stream for s in streams):
                    break
                await anyio.sleep(0.05)

    def begin_shutdown(self) -> None:
        """Refuse new streaming connections and stop every open one (each writes its recoverable
        ``fail`` frame and closes). Synchronous: call it on the event loop's thread."""
        self.engine.begin_shutdown()

    async def drain(self, grace_period: float | None = None) -> bool:
        """``begin_shutdown()``, then wait up to ``grace_period`` seconds (default: the app's) for
        the connections to close. Returns whether all of them did."""
        return await self.engine.drain(grace_period)

    @property
    def grace_period(self) -> float:
        """Seconds ``drain()`` waits by default."""
        return self.settings.shutdown_grace_period

    def statistics(self) -> ServerStatistics:
        """Connection counters."""
        return self.engine.statistics()

    # ---- the streaming routes (raw ASGI) -------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The streaming routes skip Starlette's middleware stack: each layer of it wraps
        # ``send``, a cost paid on every event, and the server's own ``send`` is what the engine
        # resets an evicted reader through (and fan-out writes through). They are also
        # registered, for ``url_path_for``, ``HEAD`` and anything this does not take.
        if scope["type"] == "http":
            if self._unstarted:  # the first request: did the host run this app's lifespan?
                self._unstarted = False
                if not self._ctx.lifespan_active:
                    self._ctx.tell_not_started()
            method: str = scope["method"]
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root) and path[len(root):len(root) + 1] == "/":
                path = path[len(root):]
            for wanted, prefix, suffix, handler in self._streaming:
                if method != wanted or not path.startswith(prefix):
                    continue
                if not suffix:
                    if path == prefix:
                        await handler(scope, receive, send, "")
                        return
                elif path.endswith(suffix) and len(path) > len(prefix) + len(suffix):
                    ident = path[len(prefix):-len(suffix)]
                    if "/" not in ident:
                        await handler(scope, receive, send, ident)
                        return
        await super().__call__(scope, receive, send)

    async def serve_sse(self, scope: Scope, receive: Receive, send: Send, stream_id: str,
                        admitted: list[Connection] | None = None) -> None:
        """The ``GET /streams/{id}/sse`` handler as raw ASGI (``HEAD``: the headers only);
        ``admitted`` (the tracing's) gets the connection once admitted."""
        request = Request(scope, receive)
        ctx, engine = self._ctx, self.engine
        cors = ctx.cors_headers(scope)
        conn = None
        try:
            ctx.check_id(scope, stream_id)
            cursor = reader_cursor(scope)
            await ctx.owners.check_stream(await ctx.check_access(request, stream_id, "read"),
                                          stream_id)
            conn = engine.admit(stream_id, scope, cursor)
            if admitted is not None:
                admitted.append(conn)
            position = (ReadPosition() if self.fanout is not None and self.fanout.can_share(send)
                        else None)
            # a re-attach that joins its stream's hub needs no look at the stream of its own
            joining = (await self.fanout.prepare(stream_id, cursor)
                       if position is not None and self.fanout is not None
                       and scope["method"] != "HEAD" else None)
            if joining is not None:
                head, waiting = joining.head, joining.head == 0
            else:
                started = time.perf_counter()
                info = await self.log.info(stream_id)
                self.metrics.log_info.observe(time.perf_counter() - started)
                if cursor > info.head:
                    raise Refusal(409, f"cursor {cursor} is above the stream's head {info.head}:"
                                       " it names a chunk this stream never had")
                head, waiting = info.head, info.head == 0 and info.status == "active"
            if scope["method"] == "HEAD":
                engine.refuse(conn)  # nothing was streamed: no open / close log lines
                await send({"type": "http.response.start", "status": 200,
                            "headers": SSE_RESPONSE_HEADERS + cors})
                await send({"type": "http.response.body", "body": b""})
                return
            frames = (self.log.read(stream_id, cursor) if position is None
                      else cast(Any, self.log).read(stream_id, cursor, position=position))
        except Exception as exc:
            await ctx.refuse(send, exc, conn=conn, headers=cors)
            return
        if waiting:
            conn.beat = WAITING
        self.metrics.replay.observe(head - cursor)
        if cursor:
            self.metrics.reattaches += 1
        source = StreamSource(frames, expose_errors=self.settings.expose_errors,
                              fanout=self.fanout, position=position, joining=joining)
        first = self._preamble + (WAITING if waiting else b"")
        if joining is not None:  # one write: the preamble and the frames that catch it up
            joining.first, first = first, b""
        await engine.serve(conn, source, send, receive, headers=SSE_RESPONSE_HEADERS + cors,
                           first=first, heartbeat=self.settings.heartbeat_interval)

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
        engine, runs = self.engine, self.runs
        counts = (None if runs is None else RunCounts(runs.events.started, runs.events.finished,
                                                      runs.events.running()))
        return exposition(self.metrics, connections=engine.conns, per_stream=engine.per_stream,
                          opened=engine.opened, evicted=engine.evicted, refused=engine.refused,
                          draining=engine.draining, runs=counts)

    def openapi_document(self) -> dict[str, Any]:
        """A copy of the OpenAPI document served at ``/openapi.json``."""
        document: dict[str, Any] = msgspec.json.decode(self._openapi)
        return document


def _tracing(settings: ServerSettings, runs: Runs | None) -> Tracing | None:
    """The app's tracing when ``settings.otel`` (imported only then: off, OpenTelemetry is never
    loaded), watching ``runs``."""
    if not settings.otel:
        return None
    from ._otel import Tracing

    tracing = Tracing()
    if runs is not None:
        runs.events.observer = tracing
    return tracing
