"""The operator's page (``create_app(ui=True)``, ``streamwire serve --ui``; off by default).

==========================  ====================================================================
``GET /ui``                 the page (with ``/ui/ui.js`` and ``/ui/ui.css``: served here, no CDN,
                            no build step): the streams and runs, polled every second, with their
                            status, head and readers; a run's or stream's reply live (its
                            ``/runs/{id}/sse`` or ``/streams/{id}/sse``); stop a running run
                            (``POST /runs/{id}/stop``)
``GET /ui/state``           what the page shows, as JSON: ``{"streams": [{"streamId", "status",
                            "head", "readers", "run": {"runId", "agent", "status"} | null, ...}],
                            "more", "connections", "agents"}`` (the first ``limit`` streams in id
                            order, default 100, at most ``MAX_LIST_LIMIT``)
==========================  ====================================================================

The page itself holds no data; ``/ui/state`` is authorized as a **write** (``stream_id`` ""): it
is the page of whoever may stop runs. With a token (``create_app(token=...)``, ``serve``'s), the
page asks for it, keeps it in ``sessionStorage`` and sends it as ``Authorization: Bearer``; with
users (``jwt_bearer``) a user sees their own runs and anonymous ones (``_owners.visible``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..log import MAX_LIST_LIMIT, capabilities_of
from ..runs._record import RunRecord
from ._context import RouteContext
from ._http import Refusal, info_json, json_response
from ._owners import visible
from ._static import page_route, static_route

if TYPE_CHECKING:
    from ._app import StreamApp

__all__ = ["DEFAULT_UI_LIMIT", "OperatorPage", "ui_openapi_paths"]

#: Streams ``GET /ui/state`` lists by default (``?limit=`` up to ``MAX_LIST_LIMIT``).
DEFAULT_UI_LIMIT: Final = 100
#: The fields of a stream's info the page shows.
_SHOWN: Final = ("streamId", "status", "head", "floor", "epoch")


class OperatorPage:
    """The ``/ui`` routes of ``app``."""

    def __init__(self, app: StreamApp, ctx: RouteContext) -> None:
        self.app = app
        self.ctx = ctx

    def routes(self) -> list[Route]:
        return [page_route("/ui", "ui.html"), static_route("/ui/ui.js", "ui.js"),
                static_route("/ui/ui.css", "ui.css"),
                Route("/ui/state", self.ctx.route(self.state), methods=["GET"])]

    async def state(self, request: Request) -> Response:
        """``GET /ui/state?limit=``."""
        user = await self.ctx.check_access(request, "", "write")
        text = request.query_params.get("limit", str(DEFAULT_UI_LIMIT))
        if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_LIST_LIMIT:
            raise Refusal(400, f"limit must be an integer from 1 to {MAX_LIST_LIMIT}, "
                               f"got {text[:20]!r}")
        limit = int(text)
        log, runs, engine = self.app.log, self.app.runs, self.app.engine
        if not capabilities_of(log).listing:
            raise Refusal(501, f"this stream log ({type(log).__name__}) cannot list streams: "
                               "it has no list_streams() method")
        found = await log.list_streams(limit=limit + 1)
        shown = found[:limit]
        records: list[RunRecord | None] = [None] * len(shown)
        owners: list[str | None] = [None] * len(shown)

        async def look(i: int, stream_id: str) -> None:
            if runs is not None:
                records[i] = await runs.store.get(stream_id)
            _owned, owners[i] = await self.ctx.owners.of_stream(stream_id)

        async with anyio.create_task_group() as tg:
            for i, info in enumerate(shown):
                tg.start_soon(look, i, info.stream_id)
        streams: list[dict[str, Any]] = []
        for info, record, owner in zip(shown, records, owners, strict=True):
            if not visible(owner, user):
                continue
            full = info_json(info)  # without output and state: the page polls it every second
            body: dict[str, Any] = {key: full[key] for key in _SHOWN if key in full}
            code = (info.error_detail or {}).get("code") if info.status == "failed" else None
            if isinstance(code, str):
                body["code"] = code
            body["readers"] = engine.per_stream.get(info.stream_id, 0)
            body["run"] = (None if record is None else
                           {"runId": record.run_id, "agent": record.agent,
                            "status": record.status, "attempt": record.attempt})
            streams.append(body)
        return json_response({"streams": streams, "more": len(found) > limit,
                              "connections": len(engine.conns),
                              "agents": sorted(runs.agents) if runs is not None else []})


def ui_openapi_paths(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the operator's page and its data (``ui=True``)."""
    errors = {"400": {"$ref": "#/components/responses/BadRequest"},
              "401": {"$ref": "#/components/responses/Refused"},
              "403": {"$ref": "#/components/responses/Refused"}}
    stream: dict[str, Any] = {"type": "object", "required": ["streamId", "status", "head", "readers", "run"],
              "properties": {"streamId": {"type": "string"}, "status": {"type": "string"},
                             "head": {"type": "integer"}, "floor": {"type": "integer"},
                             "epoch": {"type": "string"}, "code": {"type": "string"},
                             "readers": {"type": "integer"},
                             "run": {"type": ["object", "null"], "properties": {
                                 "runId": {"type": "string"}, "agent": {"type": "string"},
                                 "status": {"type": "string"}, "attempt": {"type": "integer"}}}}}
    paths: dict[str, Any] = {
        "/ui": {"get": {
            "summary": "The operator's page: streams and runs live, a reply, stop.",
            "responses": {"200": {"description": "An HTML page.", "content": {
                "text/html": {"schema": {"type": "string"}}}}}}},
        "/ui/state": {"get": {
            "summary": "What the operator's page shows (authorized as a write).",
            "security": [{"bearer": []}],
            "parameters": [{"name": "limit", "in": "query", "required": False, "schema": {
                "type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT,
                "default": DEFAULT_UI_LIMIT}}],
            "responses": {**errors, "200": {"description": "The streams and runs.", "content": {
                "application/json": {"schema": {
                    "type": "object", "required": ["streams", "more", "connections", "agents"],
                    "properties": {"streams": {"type": "array", "items": stream},
                                   "more": {"type": "boolean"},
                                   "connections": {"type": "integer"},
                                   "agents": {"type": "array",
                                              "items": {"type": "string"}}}}}}}}}},
    }
    return {**document, "paths": {**document["paths"], **paths}}
