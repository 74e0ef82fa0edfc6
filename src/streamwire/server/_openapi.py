"""The OpenAPI 3.1 document of ``streamwire.server``'s HTTP API (hand-written; the server's tests
check every route it lists against the app's routes and answers)."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi_document"]


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
_WRITE_ERRORS: dict[str, Any] = {
    **_ERRORS,
    "409": {"$ref": "#/components/responses/Conflict"},
    "413": {"$ref": "#/components/responses/TooLarge"},
    "422": {"$ref": "#/components/responses/Invalid"},
}


def _write(summary: str, body: str | None, ok: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "security": [{"bearer": []}],
                          "parameters": [{"$ref": "#/components/parameters/StreamId"}],
                          "responses": {"200": ok, **_WRITE_ERRORS}}
    if body is not None:
        op["requestBody"] = {"required": True,
                             "content": {"application/json": {"schema": _ref(body)}}}
    return {"post": op}


def openapi_document() -> dict[str, Any]:
    """The document served at ``GET /openapi.json``."""
    info_ok = _json(_ref("StreamInfo"), "The stream's info.")
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
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "parameters": {"StreamId": {"name": "stream_id", "in": "path", "required": True,
                                        "schema": {"type": "string", "maxLength": 256}}},
            "responses": {
                "BadRequest": _json(_ref("Error"), "Malformed JSON, cursor or stream id."),
                "Refused": _json(_ref("Error"), "Refused by the authorization hook."),
                "NotFound": _json(_ref("Error"), "No stream with this id."),
                "Conflict": _json(_ref("Error"), "The stream's status forbids this write."),
                "TooLarge": _json(_ref("Error"), "Over a size limit (the message names it)."),
                "Invalid": _json(_ref("Error"), "The body has the wrong shape."),
                "Busy": {"description": "Connection cap reached or shutting down.",
                         "headers": {"Retry-After": {"schema": {"type": "integer"}}},
                         "content": {"application/json": {"schema": _ref("Error")}}},
            },
            "schemas": {
                "Error": {"type": "object", "required": ["error", "status"],
                          "properties": {"error": {"type": "string"},
                                         "status": {"type": "integer"}}},
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
                "Cleanup": {"type": "object", "required": ["step"], "additionalProperties": False,
                            "properties": {"step": {"type": "integer", "minimum": 0}}},
                "Rewound": {"type": "object", "required": ["atStep"],
                            "properties": {"atStep": {"type": "integer"},
                                           "atSequence": {"type": "integer"},
                                           "minSequence": {"type": "integer"}}},
            },
        },
    }
