"""The JSON side of ``StreamApp``'s routing: the per-stream JSON routes' wrapper (id, access and
ownership checks, timing, errors that name fields and HTTP routes), ``GET /streams``,
``GET /metrics`` and ``/openapi.json``. A write route refuses the streams of runs and
chats (``_ids.WriteGuard``): they have one writer, the server itself. A run's or chat's stream
that is another user's answers as a missing one (``_owners``), and ``GET /streams`` lists only
the caller's own."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ..errors import StreamStateError
from ..log import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, capabilities_of
from ._auth import Access, User
from ._context import Endpoint, RouteContext
from ._http import Refusal, info_json, json_response
from ._ids import WriteGuard
from ._metrics import CONTENT_TYPE
from ._openapi import explain_invalid

if TYPE_CHECKING:
    from ._app import StreamApp

__all__ = ["DEFAULT_LIST_LIMIT", "MAX_LIST_LIMIT", "JSONRoutes"]

#: The OpenAPI schema of each JSON route's body (validation errors are explained from it).
_BODY_SCHEMAS: Final = {"chunks": "Chunks", "end": "End", "fail": "Fail", "cleanup": "Cleanup"}


class JSONRoutes:
    """The endpoints a ``StreamApp`` routes to besides its SSE route."""

    def __init__(self, app: StreamApp, ctx: RouteContext) -> None:
        self.app = app
        self.ctx = ctx
        self.guard = WriteGuard(app.log, app.runs)

    def stream_route(self, handler: Callable[[Request, str], Awaitable[Response]],
                     access: Access) -> Endpoint:
        """Wrap one ``WriteAPI`` handler: id, access and (writes) ownership checks, a latency
        histogram, errors."""
        name = handler.__name__
        timer = self.app.metrics.route(name)
        schema = _BODY_SCHEMAS.get(name)
        write = access == "write"

        async def endpoint(request: Request) -> Response:
            stream_id: str = request.path_params["stream_id"]
            started = time.perf_counter()
            try:
                self.ctx.check_id(request.scope, stream_id)
                user = await self.ctx.check_access(request, stream_id, access)
                if write:
                    await self._guard(user, stream_id)
                else:
                    await self.ctx.owners.check_stream(user, stream_id)
                return await handler(request, stream_id)
            except msgspec.ValidationError as exc:
                message = explain_invalid(schema, str(exc)) if schema else str(exc)
                return Refusal(422, message).response()
            except Exception as exc:
                refusal = self.ctx.refusal(exc, write=write)
                if isinstance(exc, StreamStateError) and refusal.status == 409:
                    refusal.message = await self._state_message(stream_id, exc)
                return refusal.response()
            finally:
                timer.observe(time.perf_counter() - started)

        return endpoint

    async def _guard(self, user: User | None, stream_id: str) -> None:
        """The write guard, whose refusal of another user's run (409) is a 404 as for a
        stream that does not exist."""
        try:
            await self.guard.check(stream_id)
        except Refusal as exc:
            if exc.status == 409:
                await self.ctx.owners.check_stream(user, stream_id)
            raise

    async def _state_message(self, stream_id: str, exc: StreamStateError) -> str:
        """A 409's text naming the HTTP routes that fix it (the log's own names Python methods)."""
        try:
            info = await self.app.log.info(stream_id)
        except Exception:
            return str(exc)
        if info.status == "active":
            return str(exc)
        base = f"/streams/{stream_id}"
        return (f"stream {stream_id!r} is {info.status}, not active: POST {base}/reactivate "
                f"makes it active again with its chunks, POST {base}/reset starts a new run")

    async def list_streams(self, request: Request) -> Response:
        """``GET /streams?limit=&after=``: a page of streams in id order (the log's
        ``list_streams``), authorized as a read (``stream_id`` ""); ``next`` is the ``after=`` of
        the next page, null on the last. 501 for a log written before ``list_streams``."""
        log = self.app.log
        try:
            user = await self.ctx.check_access(request, "", "read")
            limit = _limit(request.query_params.get("limit"))
            after = request.query_params.get("after", "")
            if not capabilities_of(log).listing:  # a third-party log from before the method
                raise Refusal(501, f"this stream log ({type(log).__name__}) cannot list "
                                   "streams: it has no list_streams() method")
            # one more than the page tells whether a next page exists (a probe at the maximum)
            found = await log.list_streams(after=after, limit=min(limit + 1, MAX_LIST_LIMIT))
            more = len(found) > limit or (len(found) == limit == MAX_LIST_LIMIT and bool(
                await log.list_streams(after=found[-1].stream_id, limit=1)))
            # a page may hold fewer than ``limit`` (hidden streams): ``next`` goes on from the
            # last one looked at
            last = found[:limit][-1].stream_id if found else None
            shown = await self.ctx.owners.listed(user, found[:limit])
        except Exception as exc:
            return self.ctx.response(exc)
        page = [info_json(info) for info in shown]
        return json_response({"streams": page, "next": last if more else None})

    async def metrics(self, request: Request) -> Response:
        """``GET /metrics``: Prometheus text, authorized as a read (``stream_id`` "")."""
        try:
            await self.ctx.check_access(request, "", "read")
        except Exception as exc:
            return self.ctx.response(exc)
        return Response(self.app.metrics_text(), media_type=CONTENT_TYPE)

    async def openapi(self, request: Request) -> Response:
        return Response(self.app.openapi_json, media_type="application/json")


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIST_LIMIT
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_LIST_LIMIT:
        raise Refusal(400, f"limit must be an integer from 1 to {MAX_LIST_LIMIT}, "
                           f"got {text[:20]!r}")
    return int(text)

