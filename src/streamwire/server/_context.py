"""``RouteContext``: what the route modules (``_routes``, ``_runs``, ``_chat`` and the SSE route)
get from their app -- its log, settings, connection engine, authorization (which names the
caller: ``check_access`` returns the ``User``) and ownership (``owners``) -- and the one error
wrapper every route answers through: one JSON error shape, ``Retry-After`` on every 503 (and every
429), the refused-connection counter, and the start-up error of agents that were never started."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeAlias

from starlette.requests import Request
from starlette.responses import Response

from ..log import StreamLog
from ._asgi import Receive, Scope, Send, header_of
from ._auth import Access, Authorize, User, principal_of
from ._engine import Connection, Engine
from ._http import Refusal, check_stream_id, refusal_for, send_error
from ._owners import Owners
from ._settings import ServerSettings

__all__ = ["CORS_ALLOW_HEADERS", "CORS_EXPOSE_HEADERS", "Endpoint", "RawRoute", "RouteContext",
           "StreamHandler"]

logger = logging.getLogger("streamwire.server")

Endpoint: TypeAlias = Callable[[Request], Awaitable[Response]]
#: A streaming route as raw ASGI, with the id its path names ("" for none): the app calls it
#: straight from ``StreamApp.__call__`` (no middleware wraps ``send``), the router through
#: ``RawRoute``.
StreamHandler: TypeAlias = Callable[[Scope, Receive, Send, str], Awaitable[None]]

#: Every request header the API reads, which a browser must be allowed to send cross-origin:
#: the bearer token, JSON bodies, a start's key, the SSE cursor and the producer headers.
CORS_ALLOW_HEADERS: Final = ("Authorization", "Content-Type", "Idempotency-Key",
                             "Last-Event-ID", "Producer-Id", "Producer-Epoch", "Producer-Seq")
#: Every response header a client reads, which a browser's script may see cross-origin: when to
#: retry, where a started run lives, a producer's fencing and gap answers, and the UI message
#: stream's version.
CORS_EXPOSE_HEADERS: Final = ("Retry-After", "Content-Location", "Producer-Epoch",
                              "Producer-Expected-Seq", "Producer-Received-Seq",
                              "x-vercel-ai-ui-message-stream")
_EXPOSE: Final = (b"access-control-expose-headers", ", ".join(CORS_EXPOSE_HEADERS).encode())

#: What a runs or chat request of an app whose agents were never started is told (and the log).
NOT_STARTED: Final = (
    "this server's agents are not running: the streamwire app's lifespan never started (a mounted "
    "app gets none from its host). Start it with the host: FastAPI(lifespan=stream_app.lifespan), "
    "or `async with stream_app.lifespan(app):` inside the host's own lifespan")


class RouteContext:
    """The narrow view of a ``StreamApp`` its routes work with."""

    __slots__ = ("_authorize", "_cors", "_cors_any", "_told", "engine", "lifespan_active", "log",
                 "owners", "settings")

    def __init__(self, log: StreamLog, settings: ServerSettings, engine: Engine,
                 authorize: Authorize | None, owners: Owners) -> None:
        self.log = log
        #: who owns which stream (``_owners``)
        self.owners = owners
        self.settings = settings
        self.engine = engine
        self._authorize = authorize
        #: the app's lifespan runs (its agents with it)
        self.lifespan_active = False
        self._told = False
        self._cors_any = "*" in settings.cors_origins
        self._cors = frozenset(settings.cors_origins)

    # ---- checks ----------------------------------------------------------------------------------

    def check_id(self, scope: Scope, stream_id: str) -> None:
        """Refuse (400) a stream id that is too long or not printable UTF-8 text."""
        check_stream_id(stream_id, self.settings.max_stream_id_length, scope.get("raw_path"))

    def cors_headers(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        """The CORS headers of a streaming answer (its route skips the CORS middleware)."""
        origin = header_of(scope, b"origin")
        if origin is None or not (self._cors_any or origin in self._cors):
            return []
        if self._cors_any:
            return [(b"access-control-allow-origin", b"*"), _EXPOSE]
        return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin"),
                _EXPOSE]

    async def check_access(self, request: Request, stream_id: str, access: Access) -> User | None:
        """Run the authorization hook (it refuses by raising ``HTTPException``); returns the caller
        it names (None: anonymous)."""
        if self._authorize is None:
            return None
        result = self._authorize(request, stream_id, access)
        if inspect.isawaitable(result):
            result = await result
        return principal_of(result)

    def not_running(self) -> Refusal:
        """The answer of a runs or chat request that needs the agents when they do not run
        (``Runs`` refuses with ``UsageError``): the app is shutting down, or its lifespan never
        started (an error in the server's log once: the operator's to fix, not the client's)."""
        if self.lifespan_active:
            return Refusal(503, "the server is shutting down; start the run elsewhere")
        self.tell_not_started()
        return Refusal(503, NOT_STARTED, code="AGENTS_NOT_STARTED")

    def tell_not_started(self) -> None:
        """Say once, in the server's log, that the agents were never started (a mounted app
        hears of its host's start-up only through its first request: the earliest it can tell)."""
        if not self._told:
            self._told = True
            logger.error("%s", NOT_STARTED)

    # ---- the one error wrapper ---------------------------------------------------------------------

    def refusal(self, exc: Exception, *, write: bool = False) -> Refusal:
        """The answer ``exc`` gets (``_http.refusal_for``), ``Retry-After`` on every 503."""
        return refusal_for(exc, expose_errors=self.settings.expose_errors, write=write,
                           retry_after=self.engine.retry_after)

    def response(self, exc: Exception, *, write: bool = False) -> Response:
        """``refusal(exc)`` as a Starlette response."""
        return self.refusal(exc, write=write).response()

    async def refuse(self, send: Send, exc: Exception, *, conn: Connection | None = None,
                     headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Answer a streaming request with ``refusal(exc)`` over raw ASGI, giving back the slot
        ``conn`` took (a 429 or 503 counts as a refused connection)."""
        self.engine.refuse(conn)
        refusal = self.refusal(exc)
        if refusal.status in (429, 503):
            self.engine.refused += 1
        await send_error(send, refusal, list(headers))

    def route(self, handler: Endpoint) -> Endpoint:
        """Wrap a JSON endpoint: whatever it raises is answered by ``refusal``."""

        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                return self.response(exc)

        endpoint.__name__ = handler.__name__
        return endpoint


class RawRoute:
    """A ``StreamHandler`` as the router's endpoint (Starlette passes a plain ASGI class the scope);
    ``param`` names the path parameter it gets."""

    def __init__(self, handler: StreamHandler, param: str = "") -> None:
        self.handler = handler
        self.param = param

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handler(scope, receive, send,
                           scope["path_params"][self.param] if self.param else "")
