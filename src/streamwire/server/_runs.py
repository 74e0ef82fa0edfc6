"""The runs API beside the stream routes (``create_app(log, agents=...)``), under the same
authorization hook: ``write`` for start, resume and stop, ``read`` for status and sse; the hook
gets the run id (a run's stream has the run's id).

==========================  ====================================================================
``POST /runs``              ``{"agent", "input", "runId"?}`` (or ``Idempotency-Key``) -> ``201
                            {"runId", "streamId", "status"}``; a repeat with the same body ``200``,
                            another body ``409``, an unknown agent ``404 {..., "agents": [...]}``;
                            an empty id, or one beginning ``chat:`` (the chat routes'), ``400``
``POST /runs/{id}/resume``  ``{"input", "resumeId"}``: a paused run continues on its stream, once
                            per ``resumeId``: ``200 {"runId", "streamId", "status", "resumed"}``
                            (``resumed`` false for a repeat); another body ``409``; a paused
                            run's ``pendingTools`` are answered by ``input.toolAnswers`` (``422
                            ToolAnswerError`` for an answer to no pending call)
``POST /runs/{id}/stop``    cancel the agent (the stream ends ``interrupted``); idempotent; answers
                            the status once settled
``GET /runs/{id}/status``   ``{"runId", "streamId", "agent", "status", "head", "output"?, "state"?,
                            "usage"?, "error"?, "errorDetail"?, "recoverable"?,
                            "pendingTools"?}``
``GET /runs/{id}/sse``      the run's stream, exactly as ``GET /streams/{id}/sse``; once a settled
                            (or paused) run's stream expired, what its record says: at the
                            run's head ``caught-up{head}`` and its terminal, below it
                            ``truncated{floor: head}`` (the chunks are gone: never a silent gap)
==========================  ====================================================================

A run started by a user (the hook's principal) is that user's: to anyone else its routes answer
404 as for a run that does not exist (``_owners``); its agent sees the user as ``run.user``.

A run's stream is written by the runs service only: the stream write routes refuse it (409,
``_ids``). Bodies are read by ``_http.read_json`` (JSON content type, size, depth).
"""

from __future__ import annotations

import uuid
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import (
    RunConflictError,
    RunNotFoundError,
    StreamNotFoundError,
    StreamwireError,
    UsageError,
)
from ..frames import CaughtUpFrame, StreamFrame, TruncatedFrame, encode_stream_frame
from ..runs import Runs
from ..runs._record import RunRecord, terminal_of
from ._asgi import Receive, Scope, Send
from ._auth import Access
from ._context import RawRoute, RouteContext, StreamHandler
from ._http import Refusal, encode_json, read_json, reader_cursor
from ._ids import check_client_id
from ._openapi import NOT_JSON
from ._owners import owner_id, require_owner
from ._sse import SSE_RESPONSE_HEADERS

__all__ = ["RunsAPI", "runs_openapi_paths"]

#: Characters of a run id: it is a URL path segment and a key in every backend.
_ID_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~:")


class StartIn(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """``POST /runs``."""

    agent: str
    input: Any = None
    run_id: str | None = None


class ResumeIn(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """``POST /runs/{id}/resume``."""

    resume_id: str
    input: Any = None


_start_decoder: Final = msgspec.json.Decoder(StartIn)
_resume_decoder: Final = msgspec.json.Decoder(ResumeIn)


def _created(record: RunRecord, status: int, **extra: object) -> Response:
    body = {"runId": record.run_id, "streamId": record.stream_id, "status": record.status,
            **extra}
    return Response(encode_json(body), status, {"Content-Location": f"/runs/{record.run_id}"},
                    media_type="application/json")


class RunsAPI:
    """The runs API's routes over ``runs`` (``serve_sse``: the app's stream route)."""

    def __init__(self, runs: Runs, ctx: RouteContext, serve_sse: StreamHandler) -> None:
        self.runs = runs
        self.ctx = ctx
        self.serve_sse = serve_sse
        self.max_body = ctx.settings.max_body_size
        self.max_id = ctx.settings.max_stream_id_length

    def check_id(self, run_id: str, what: str = "run id") -> str:
        if not run_id or len(run_id) > self.max_id or not _ID_CHARS.issuperset(run_id):
            raise Refusal(400, f"a {what} is 1 to {self.max_id} characters among A-Z a-z 0-9 "
                               f"- _ . ~ : (create_app(max_stream_id_length=...)), not "
                               f"{run_id[:40]!r}")
        return run_id

    def routes(self) -> list[Route]:
        ctx = self.ctx
        return [
            Route("/runs", ctx.route(self.start), methods=["POST"]),
            Route("/runs/{run_id}/resume", ctx.route(self.resume), methods=["POST"]),
            Route("/runs/{run_id}/stop", ctx.route(self.stop), methods=["POST"]),
            Route("/runs/{run_id}/status", ctx.route(self.status), methods=["GET"]),
            Route("/runs/{run_id}/sse", RawRoute(self.sse, "run_id"), methods=["GET"]),
        ]

    async def owned(self, request: Request, access: Access,
                    run_id: str | None = None) -> RunRecord:
        """The run the request names, once the caller may see it (else 404, as a missing run)."""
        run_id = self.check_id(request.path_params["run_id"] if run_id is None else run_id)
        user = await self.ctx.check_access(request, run_id, access)
        record = await self.runs.get(run_id)
        require_owner(user, record.user, RunNotFoundError(run_id))
        return record

    async def sse(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        """``GET /runs/{id}/sse``: the stream route itself, once the run is known."""
        request = Request(scope, receive)
        try:
            record = await self.owned(request, "read", run_id)
        except Exception as exc:
            await self.ctx.refuse(send, exc, headers=self.ctx.cors_headers(request.scope))
            return
        if record.status != "running":
            try:
                await self.runs.log.info(record.stream_id)
            except StreamNotFoundError:  # expired: the record still knows how the run ended
                await self.serve_record(scope, send, record)
                return
            except StreamwireError:
                pass  # the stream route answers the log's failure its own way
        await self.serve_sse(scope, receive, send, record.stream_id)

    async def serve_record(self, scope: Scope, send: Send, record: RunRecord) -> None:
        """``/runs/{id}/sse`` of a run whose stream expired: its end, from its record."""
        cors = self.ctx.cors_headers(scope)
        try:
            cursor = reader_cursor(scope)
            if cursor > record.head:
                raise Refusal(409, f"cursor {cursor} is above the run's head {record.head}: it "
                                   "names a chunk this run's stream never had")
        except Exception as exc:
            await self.ctx.refuse(send, exc, headers=cors)
            return
        frames: list[StreamFrame] = ([TruncatedFrame(floor=record.head)] if cursor < record.head
                                     else [CaughtUpFrame(head=record.head), terminal_of(record)])
        retry = self.ctx.settings.retry
        body = b"".join([b"retry: %d\n\n" % retry if retry is not None else b"",
                         *map(encode_stream_frame, frames)])
        await send({"type": "http.response.start", "status": 200,
                    "headers": SSE_RESPONSE_HEADERS + cors})
        await send({"type": "http.response.body",
                    "body": b"" if scope["method"] == "HEAD" else body})

    async def start(self, request: Request) -> Response:
        body = _start_decoder.decode(await read_json(request, self.max_body))
        key = request.headers.get("idempotency-key")
        if key is not None and body.run_id is not None and key != body.run_id:
            raise Refusal(400, "the Idempotency-Key header and runId differ; send one of them")
        chosen = body.run_id if body.run_id is not None else key
        if chosen is not None:  # a client's id: never empty, never the chat routes'
            check_client_id(chosen, "runId" if body.run_id is not None else "Idempotency-Key")
        run_id = self.check_id(chosen if chosen is not None else _new_id())
        user = await self.ctx.check_access(request, run_id, "write")
        try:
            record, created = await self.runs.start(body.agent, body.input, run_id,
                                                    user=owner_id(user))
        except UsageError:  # the only one Runs.start raises: it is not running
            raise self.ctx.not_running() from None
        if not created and record.user != owner_id(user):
            raise RunConflictError(f"run id {run_id!r} is taken; a new run needs a new runId")
        return _created(record, 201 if created else 200)

    async def resume(self, request: Request) -> Response:
        run_id = self.check_id(request.path_params["run_id"])
        user = await self.ctx.check_access(request, run_id, "write")
        body = _resume_decoder.decode(await read_json(request, self.max_body))
        self.check_id(body.resume_id, "resumeId")
        require_owner(user, (await self.runs.get(run_id)).user, RunNotFoundError(run_id))
        try:
            record, resumed = await self.runs.resume(run_id, body.input, body.resume_id)
        except UsageError:
            raise self.ctx.not_running() from None
        return _created(record, 200, resumed=resumed)

    async def stop(self, request: Request) -> Response:
        run_id = (await self.owned(request, "write")).run_id
        await self.runs.stop(run_id)
        return Response(encode_json(await self.runs.status(run_id)), 200,
                        media_type="application/json")

    async def status(self, request: Request) -> Response:
        run_id = (await self.owned(request, "read")).run_id
        return Response(encode_json(await self.runs.status(run_id)), 200,
                        media_type="application/json")


def _new_id() -> str:
    return uuid.uuid4().hex


def runs_openapi_paths(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (the stream server's OpenAPI) with the runs API's paths and schemas added."""
    errors = {"400": {"$ref": "#/components/responses/BadRequest"},
              "401": {"$ref": "#/components/responses/Refused"},
              "403": {"$ref": "#/components/responses/Refused"},
              "404": {"$ref": "#/components/responses/NotFound"}}
    param = [{"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    created = {"description": "The run.", "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/RunCreated"}}}}
    status = {"description": "The run's status.", "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/RunStatus"}}}}
    conflict = {"409": {"$ref": "#/components/responses/Conflict"},
                "415": NOT_JSON, "422": {"$ref": "#/components/responses/Invalid"}}
    sse = document["paths"]["/streams/{stream_id}/sse"]["get"]
    paths: dict[str, Any] = {
        "/runs": {"post": {
            "summary": "Start a run, exactly once per runId (or Idempotency-Key).",
            "security": [{"bearer": []}],
            "parameters": [{"name": "Idempotency-Key", "in": "header", "required": False,
                            "schema": {"type": "string", "minLength": 1,
                                       "not": {"pattern": "^chat:"}}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["agent"], "additionalProperties": False,
                "properties": {"agent": {"type": "string"}, "input": {},
                               "runId": {"type": "string", "minLength": 1,
                                         "not": {"pattern": "^chat:"}}}}}}},
            "responses": {"201": created, "200": created, **errors, **conflict}}},
        "/runs/{run_id}/resume": {"post": {
            "summary": "Resume a paused run on its stream, once per resumeId. A run paused for "
                       "tool calls (its pendingTools) takes their answers as "
                       "input.toolAnswers: [{toolCallId, approvalId, approved, reason?}] for an "
                       "approval, [{toolCallId, output | errorText}] for a client tool.",
            "security": [{"bearer": []}], "parameters": param,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["resumeId"], "additionalProperties": False,
                "properties": {"resumeId": {"type": "string"}, "input": {}}}}}},
            "responses": {"200": created, **errors, **conflict,
                          "422": {"$ref": "#/components/responses/Invalid"}}}},
        "/runs/{run_id}/stop": {"post": {
            "summary": "Stop the run (its stream ends interrupted); idempotent.",
            "security": [{"bearer": []}], "parameters": param,
            "responses": {"200": status, **errors}}},
        "/runs/{run_id}/status": {"get": {
            "summary": "The run's status and outcome.", "parameters": param,
            "responses": {"200": status, **errors}}},
        "/runs/{run_id}/sse": {"get": {
            **sse, "summary": "Read the run's stream (exactly as /streams/{stream_id}/sse).",
            "parameters": [*param, *sse["parameters"][1:]]}},
    }
    schemas = {
        "RunCreated": {"type": "object", "required": ["runId", "streamId", "status"],
                       "properties": {"runId": {"type": "string"}, "streamId": {"type": "string"},
                                      "status": {"$ref": "#/components/schemas/RunStatusName"}}},
        "RunStatusName": {"enum": ["running", "completed", "paused", "interrupted", "failed"]},
        "RunStatus": {
            "type": "object", "required": ["runId", "streamId", "agent", "status", "head"],
            "properties": {"runId": {"type": "string"}, "streamId": {"type": "string"},
                           "agent": {"type": "string"},
                           "status": {"$ref": "#/components/schemas/RunStatusName"},
                           "head": {"type": "integer"}, "output": {}, "state": {},
                           "usage": {"type": "object"}, "error": {"type": "string"},
                           "errorDetail": {"type": "object"}, "recoverable": {"type": "boolean"},
                           "pendingTools": {"type": "array", "items": {
                               "type": "object", "required": ["kind", "toolCallId", "toolName"],
                               "properties": {"kind": {"enum": ["approval", "output"]},
                                              "toolCallId": {"type": "string"},
                                              "toolName": {"type": "string"}, "input": {},
                                              "approvalId": {"type": "string"}}}}}},
    }
    return {**document, "paths": {**document["paths"], **paths},
            "components": {**document["components"],
                           "schemas": {**document["components"]["schemas"], **schemas}}}
