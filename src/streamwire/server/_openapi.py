"""The OpenAPI 3.1 document of ``streamwire.server``'s HTTP API (hand-written; the server's tests
check every route it lists against the app's routes and answers)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from .._compat.msgspec import parse_validation_error
from ..log import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT
from ._http import Refusal
from ._static import page_route, static_route

__all__ = ["NOT_JSON", "docs_routes", "explain_invalid", "include_openapi", "merge_openapi", "openapi_document",
           "routing_error"]

#: The prefix of streamwire's component names in a host's document (``streamwire.StreamInfo``).
COMPONENT_PREFIX = "streamwire."
#: Paths a host serves itself (FastAPI has its own ``/docs``).
_HOST_OWNED = frozenset({"/docs"})


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS: dict[str, Any] = {
    "400": {"$ref": "#/components/responses/BadRequest"},
    "401": {"$ref": "#/components/responses/Refused"},
    "403": {"$ref": "#/components/responses/Refused"},
    "404": {"$ref": "#/components/responses/NotFound"},
}
#: The answer of a JSON route to a body of another content type.
NOT_JSON: dict[str, Any] = {"$ref": "#/components/responses/NotJSON"}
_WRITE_ERRORS: dict[str, Any] = {
    **_ERRORS,
    "409": {"$ref": "#/components/responses/Conflict"},
    "413": {"$ref": "#/components/responses/TooLarge"},
    "422": {"$ref": "#/components/responses/Invalid"},
}


#: One example of each request body (shown on the /docs page and in the HTTP API reference).
_EXAMPLES: dict[str, Any] = {
    "Chunks": [{"step": 1, "chunk": {"event": "chunk", "data": {"chunk": "Hel"}}},
               {"step": 1, "chunk": {"event": "chunk", "data": {"chunk": "lo"}}}],
    "End": {"status": "completed", "usage": {"inputTokens": 12, "outputTokens": 2}},
    "Fail": {"error": "the model provider timed out", "recoverable": True,
             "errorDetail": {"code": "UPSTREAM_TIMEOUT"}},
    "Cleanup": {"step": 1},
}
_INFO_EXAMPLE: dict[str, Any] = {
    "streamId": "reply-42", "status": "active", "head": 2, "floor": 0, "epoch": "9f2c1e-1",
    "oldestRetainedSequence": 1, "truncatedAtStep": None}


def _write(summary: str, body: str | None, ok: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "security": [{"bearer": []}],
                          "parameters": [{"$ref": "#/components/parameters/StreamId"}],
                          "responses": {"200": ok, **_WRITE_ERRORS}}
    if body is not None:
        op["responses"]["415"] = NOT_JSON
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": _ref(body), "example": _EXAMPLES[body]}}}
    return {"post": op}


def openapi_document() -> dict[str, Any]:
    """The document served at ``GET /openapi.json``."""
    info_ok = _json(_ref("StreamInfo"), "The stream's info.")
    info_ok["content"]["application/json"]["example"] = _INFO_EXAMPLE
    sse_body = (
        "Wire v2 frames (text/event-stream): every retained chunk after the cursor (`event: chunk`, "
        "`id:` = sequence, data `{sequence, chunk}`), then `caught-up {head}`, then live chunks and "
        "`rewound {atStep, atSequence?, minSequence?}` markers, then exactly one terminal "
        "(`end {status, output?, state?, usage?}`, `fail {error, errorDetail?, recoverable}` or "
        "`truncated {floor, errorDetail}`), then the body closes. Comments (`: heartbeat`, "
        "`: waiting`) are not frames. A body that ends with no terminal frame is an eviction: "
        "re-attach from your cursor.")
    return {
        "openapi": "3.1.0",
        "info": {"title": "streamwire stream server", "version": "2",
                 "description": "Durable, resumable SSE streams (wire v2)."},
        "paths": {
            "/streams/{stream_id}": {"put": {
                "summary": "Create a stream (idempotent).", "security": [{"bearer": []}],
                "parameters": [{"$ref": "#/components/parameters/StreamId"}],
                "responses": {"200": info_ok, **_ERRORS}}},
            "/streams/{stream_id}/info": {"get": {
                "summary": "Head, status, retention floor and cleanup marker.",
                "parameters": [{"$ref": "#/components/parameters/StreamId"}],
                "responses": {"200": info_ok, **_ERRORS}}},
            "/streams/{stream_id}/sse": {"get": {
                "summary": "Read the stream from a cursor as Server-Sent Events.",
                "parameters": [
                    {"$ref": "#/components/parameters/StreamId"},
                    {"name": "cursor", "in": "query", "required": False,
                     "schema": {"type": "integer", "minimum": 0},
                     "description": "The last sequence the reader has (0: from the start)."},
                    {"name": "Last-Event-ID", "in": "header", "required": False,
                     "schema": {"type": "string", "pattern": "^[0-9]+$"},
                     "description": "Overrides `cursor` (a browser's EventSource sends it)."},
                ],
                "responses": {
                    "200": {"description": sse_body,
                            "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                    **_ERRORS,
                    "429": {"$ref": "#/components/responses/Busy"},
                    "503": {"$ref": "#/components/responses/Busy"},
                }}},
            "/streams/{stream_id}/chunks": _write(
                "Append chunks atomically (all or none).", "Chunks",
                _json({"type": "object", "required": ["sequences"],
                       "properties": {"sequences": {"type": "array",
                                                    "items": {"type": "integer"}}}},
                      "The sequence of each chunk, in order.")),
            "/streams/{stream_id}/end": _write("End the stream with a status.", "End", info_ok),
            "/streams/{stream_id}/fail": _write("Fail the stream.", "Fail", info_ok),
            "/streams/{stream_id}/cleanup": _write(
                "Remove the chunks of steps after `step`; attached readers get `rewound`.",
                "Cleanup", _json(_ref("Rewound"), "The rewound marker broadcast to readers.")),
            "/streams/{stream_id}/reset": _write(
                "Start a new run: drop the chunks and the marker, status active.", None, info_ok),
            "/streams/{stream_id}/reactivate": _write(
                "Make a finished stream active again.", None, info_ok),
            "/streams/{stream_id}/keepalive": _write(
                "Renew the writer's lease without writing (a quiet writer calls it more often "
                "than the server's writer timeout).", None, info_ok),
            "/streams": {"get": {
                "summary": "List streams in id order, a page at a time (authorized as a read).",
                "parameters": [
                    {"name": "limit", "in": "query", "required": False,
                     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT,
                                "default": DEFAULT_LIST_LIMIT}},
                    {"name": "after", "in": "query", "required": False,
                     "schema": {"type": "string"},
                     "description": "The `next` of the previous page."}],
                "responses": {
                    "200": {"description": "One page; `next` is null on the last.",
                            "content": {"application/json": {
                                "schema": _ref("StreamList"),
                                "example": {"streams": [_INFO_EXAMPLE], "next": "reply-42"}}}},
                    **_ERRORS,
                    "501": _json(_ref("Error"), "The log cannot list streams.")}}},
            "/metrics": {"get": {
                "summary": "Counters in the Prometheus text format (authorized as a read).",
                "description": "Connections (`streamwire_sse_*`, `streamwire_connections{kind}`), "
                               "appends, log latency and, with agents, "
                               "`streamwire_runs_started_total{agent}`, "
                               "`streamwire_runs_finished_total{agent,status}` and "
                               "`streamwire_runs_running{agent}`.",
                "responses": {"200": {"description": "Prometheus text format 0.0.4.",
                                      "content": {"text/plain": {"schema": {"type": "string"}}}},
                              "401": {"$ref": "#/components/responses/Refused"},
                              "403": {"$ref": "#/components/responses/Refused"}}}},
            "/healthz": {"get": {
                "summary": "Liveness: 200 while the process serves HTTP (no authorization; "
                           "calls nothing).",
                "security": [],
                "responses": {"200": _json(_ref("Probe"), "The process is up.")}}},
            "/readyz": {"get": {
                "summary": "Readiness: 200 when the log answers within 1 s, the agents run and "
                           "the server is not draining (no authorization).",
                "security": [],
                "responses": {
                    "200": _json(_ref("Probe"), "Ready."),
                    "503": {"description": "Not ready; `reason` says which part, in a fixed "
                                           "sentence.",
                            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
                            "content": {"application/json": {"schema": _ref("Probe"), "example": {
                                "status": "unavailable",
                                "reason": "the stream log did not answer in time"}}}}}}},
            "/docs": {"get": {
                "summary": "This document as a page (its script and style are served here too: no CDN).",
                "responses": {"200": {"description": "An HTML page.",
                                      "content": {"text/html": {"schema": {"type": "string"}}}}}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "parameters": {"StreamId": {"name": "stream_id", "in": "path", "required": True,
                                        "schema": {"type": "string", "maxLength": 256}}},
            "responses": {
                "BadRequest": _json(_ref("Error"), "Malformed JSON, cursor or stream id."),
                "Refused": _json(_ref("Error"), "Refused by the authorization hook."),
                "NotFound": _json(_ref("Error"), "No stream with this id."),
                "Conflict": _json(_ref("Error"), "The stream's status forbids this write, or the "
                                  "stream is a run's (code RUN_STREAM: use the run routes)."),
                "NotJSON": _json(_ref("Error"), "The body was not sent as application/json."),
                "TooLarge": _json(_ref("Error"), "Over a size limit (the message names it)."),
                "Invalid": _json(_ref("Error"), "The body has the wrong shape."),
                "Busy": {"description": "Connection cap reached or shutting down.",
                         "headers": {"Retry-After": {"schema": {"type": "integer"}}},
                         "content": {"application/json": {"schema": _ref("Error")}}},
            },
            "schemas": {
                "Error": {"type": "object", "required": ["error", "status"],
                          "properties": {"error": {"type": "string"},
                                         "status": {"type": "integer"}},
                          "example": {"error": "`status` must be one of `completed`, `paused`, "
                                               "`interrupted` (Invalid enum value 'complete')",
                                      "status": 422}},
                "StreamInfo": {
                    "type": "object",
                    "required": ["streamId", "status", "head", "floor",
                                 "oldestRetainedSequence", "truncatedAtStep"],
                    "properties": {
                        "streamId": {"type": "string"},
                        "status": {"enum": ["active", "completed", "paused", "interrupted",
                                            "failed"]},
                        "head": {"type": "integer"},
                        "floor": {"type": "integer"},
                        "oldestRetainedSequence": {"type": ["integer", "null"]},
                        "truncatedAtStep": {"type": ["integer", "null"]},
                        "epoch": {"type": "string"},
                        "output": {}, "state": {}, "usage": {"type": "object"},
                        "error": {"type": "string"}, "errorDetail": {"type": "object"},
                        "recoverable": {"type": "boolean"},
                    }},
                "Chunks": {"type": "array", "items": {
                    "type": "object", "required": ["step", "chunk"], "additionalProperties": False,
                    "properties": {"step": {"type": "integer", "minimum": 0}, "chunk": {}}}},
                "End": {"type": "object", "required": ["status"], "additionalProperties": False,
                        "properties": {"status": {"enum": ["completed", "paused", "interrupted"]},
                                       "output": {}, "state": {}, "usage": {"type": "object"}}},
                "Fail": {"type": "object", "required": ["error", "recoverable"],
                         "additionalProperties": False,
                         "properties": {"error": {"type": "string"},
                                        "errorDetail": {"type": "object"},
                                        "recoverable": {"type": "boolean"}}},
                "StreamList": {"type": "object", "required": ["streams", "next"],
                               "properties": {"streams": {"type": "array",
                                                          "items": _ref("StreamInfo")},
                                              "next": {"type": ["string", "null"]}}},
                "Cleanup": {"type": "object", "required": ["step"], "additionalProperties": False,
                            "properties": {"step": {"type": "integer", "minimum": 0}}},
                "Probe": {"type": "object", "required": ["status"],
                          "properties": {"status": {"enum": ["ok", "unavailable"]},
                                         "reason": {"type": "string"}}},
                "Rewound": {"type": "object", "required": ["atStep"],
                            "properties": {"atStep": {"type": "integer"},
                                           "atSequence": {"type": "integer"},
                                           "minSequence": {"type": "integer"}}},
            },
        },
    }


def docs_routes() -> list[Route]:
    """``GET /docs``: a page that renders ``/openapi.json`` (paths, methods, summaries,
    parameters, request and response schemas), and its script and style, all served here: the
    page loads nothing from another origin (``_static``)."""
    return [page_route("/docs", "docs.html"), static_route("/docs/docs.js", "docs.js"),
            static_route("/docs/docs.css", "docs.css")]


def merge_openapi(host: dict[str, Any], ours: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Add the paths of ``ours`` (under ``prefix``, the mount path) and its components to ``host``,
    an OpenAPI document such as FastAPI's ``app.openapi()``; returns ``host``. Component and
    security scheme names get the ``streamwire.`` prefix so they cannot clash with the host's."""
    renamed = {name: COMPONENT_PREFIX + name
               for kind in ours["components"].values() for name in kind}
    paths = host.setdefault("paths", {})
    for path, operations in ours["paths"].items():
        if path not in _HOST_OWNED:
            paths[prefix.rstrip("/") + path] = _renamed(operations, renamed)
    components = host.setdefault("components", {})
    for kind, entries in ours["components"].items():
        target = components.setdefault(kind, {})
        for name, value in entries.items():
            target[renamed[name]] = _renamed(value, renamed)
    return host


def _renamed(node: Any, names: dict[str, str]) -> Any:
    """``node`` with its ``$ref`` targets and security requirement names renamed."""
    if isinstance(node, list):
        return [_renamed(item, names) for item in node]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]
        if key == "$ref" and isinstance(value, str):
            base, _, name = value.rpartition("/")
            out[key] = f"{base}/{names.get(name, name)}"
        elif key == "security" and isinstance(value, list):
            requirements = cast(list[dict[str, Any]], value)
            out[key] = [{names.get(k, k): v for k, v in req.items()} for req in requirements]
        else:
            out[key] = _renamed(value, names)
    return out


def include_openapi(host: object, app: object, ours: Callable[[], dict[str, Any]],
                    prefix: str | None) -> None:
    """``StreamApp.include_openapi``: wrap FastAPI's ``host.openapi()`` (its documented way to
    extend the document) so each document it builds gets the routes of ``ours()``."""
    build = cast(Callable[[], dict[str, Any]], getattr(host, "openapi"))  # noqa: B009
    merged: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        document = build()
        if not merged or merged[0] is not document:  # FastAPI rebuilds when its routes change
            mount = prefix if prefix is not None else _mount_path(host, app)
            merged[:] = [merge_openapi(document, ours(), mount)]
        return document

    setattr(host, "openapi", openapi)  # noqa: B010


def _mount_path(host: object, app: object) -> str:
    routes = cast(list[object], getattr(host, "routes", []))
    for route in routes:
        if isinstance(route, Mount) and route.app is app:
            return route.path
    return ""


async def routing_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 / 405 as streamwire's JSON errors (a 405 keeps its ``Allow``)."""
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 405:
        allow = (exc.headers or {}).get("Allow", "")
        message = f"{where}: this route allows {allow} (the API: GET /openapi.json)"
    elif exc.status_code == 404:
        message = f"{where}: no such route (the API: GET /openapi.json)"
    else:
        message = str(exc.detail)
    return Refusal(exc.status_code, message, dict(exc.headers or {})).response()


_AT = re.compile(r"\$|\.([^.\[]+)|\[(\d+)\]")


def explain_invalid(schema_name: str, message: str) -> str:
    """msgspec's validation ``message`` for a body of ``schema_name`` (a schema of the OpenAPI
    document), said as: which field, what it must be (the valid values of an enum), what was
    wrong. The document is the one place the bodies are described, so the errors follow it. A
    message msgspec worded in a way ``_compat.msgspec`` cannot read is returned as it is."""
    problem = parse_validation_error(message)
    if problem is None:
        return message
    schemas: dict[str, Any] = openapi_document()["components"]["schemas"]
    path = problem.path
    schema: Any = schemas[schema_name]
    for key, index in (m.groups() for m in _AT.finditer(path)):
        if index is not None:
            schema = schema.get("items", {})
        elif key is not None:
            schema = schema.get("properties", {}).get(key)
            if schema is None:
                break
    field = "the body" if path == "$" else f"`{path.removeprefix('$.')}`"
    if problem.field is not None and not problem.missing:
        parent = schemas[schema_name]
        parent = parent.get("items", parent)
        fields = ", ".join(f"`{name}`" for name in parent.get("properties", {}))
        return f"{field} is not a field of this body; its fields are {fields} ({message})"
    expected = _expected(schema)
    if problem.field is not None:
        return f"{field} is missing: it is required and must be {expected} ({message})"
    return f"{field} must be {expected} ({message})"


def _expected(schema: Any) -> str:
    if not isinstance(schema, dict) or not schema:
        return "any JSON value"
    spec = cast(dict[str, Any], schema)
    if "enum" in spec:
        return "one of " + ", ".join(f"`{v}`" for v in spec["enum"])
    kind = spec.get("type")
    if kind == "integer":
        low = spec.get("minimum")
        return "an integer" + (f" >= {low}" if low is not None else "")
    if kind == "array":
        return "a JSON array of " + _expected(spec.get("items")).replace("a JSON object", "objects")
    if kind == "object":
        fields = ", ".join(spec.get("properties", {}))
        return f"a JSON object {{{fields}}}" if fields else "a JSON object"
    return {"string": "a string", "boolean": "true or false"}.get(str(kind), f"a {kind}")
