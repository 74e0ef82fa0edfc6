"""The ``useChat`` routes (``create_app(agents=..., chat_agent=NAME)``), under the same
authorization hook as the stream routes (the hook gets the chat id: ``write`` to start and stop,
``read`` to resume):

================================  ================================================================
``POST /api/chat``                ``DefaultChatTransport``'s body -> starts a run of the chat agent
                                  (once per chat, user message and text: a double submit finds the
                                  first run) and answers its reply as a UI message stream
``GET /api/chat/{id}/stream``     ``useChat({resume: true})`` after a reload: ``204`` when the chat
                                  has no running reply, else its UI message stream from the start,
                                  then live; with ``Last-Event-ID`` from that event on instead
``POST /api/chat/{id}/stop``      stops the chat's run (its reply ends ``abort``, ``finish{stop}``);
                                  answers the run's status. ``{"runId"}`` in the body stops only
                                  that run (``409`` if the chat moved on)
================================  ================================================================

A chat's runs are listed in a stream of the log itself (``chat:<id>``, one ``{"runId"}`` chunk per
reply), so every server process on a shared backend answers for every chat. Replies are sent as
the run's stream is read (``streamwire.aisdk.UIMessageStreamEncoder``) with a heartbeat comment
when quiet; a server shutting down ends them with no ``[DONE]``, as a drop.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Literal

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..aisdk import UI_MESSAGE_STREAM_HEADERS, UIMessageStreamEncoder, parse_event_id
from ..aisdk._request import ChatRequest, assistant_message_id, check_chat_id
from ..errors import StreamNotFoundError, StreamStateError
from ..frames import ChunkFrame, StreamFrame
from ..log import StreamLog
from ..runs import Runs
from ._http import Refusal, encode_json, read_body, refusal_for
from ._sse import CLOSE_TIMEOUT, HEARTBEAT, Connection, Receive, Scope, Send

__all__ = ["chat_openapi_paths", "chat_routes"]

_Access = Literal["read", "write"]
CheckAccess = Callable[[Request, str, _Access], Awaitable[None]]
Track = Callable[[Connection], None]

_HEADERS: Final = [(k.encode(), v.encode()) for k, v in UI_MESSAGE_STREAM_HEADERS.items()]
_decode_pointer: Final = msgspec.json.Decoder(dict[str, str]).decode


class ChatIndex:
    """Which run answers a chat now: the last chunk of the chat's stream ``chat:<id>``."""

    def __init__(self, log: StreamLog) -> None:
        self.log = log

    async def latest(self, chat_id: str) -> str | None:
        """The run id of the chat's last reply, or None if it has none."""
        stream = f"chat:{chat_id}"
        try:
            head = (await self.log.info(stream)).head
        except StreamNotFoundError:
            return None
        if not head:
            return None
        frames = self.log.read(stream, head - 1)
        try:
            async for frame in frames:
                if isinstance(frame, ChunkFrame):
                    return _decode_pointer(frame.chunk).get("runId")
        finally:
            await _aclose(frames)
        return None

    async def point(self, chat_id: str, run_id: str) -> None:
        """Make ``run_id`` the chat's current reply."""
        stream, chunk = f"chat:{chat_id}", encode_json({"runId": run_id})
        try:
            await self.log.append(stream, 0, chunk)
        except StreamNotFoundError:
            await self.log.create_stream(stream)
            await self.log.append(stream, 0, chunk)
        except StreamStateError:  # the log ended it (e.g. its writer process died): take it up
            await self.log.reactivate_stream(stream)
            await self.log.append(stream, 0, chunk)


class _ChatAPI:
    def __init__(self, runs: Runs, agent: str, check_access: CheckAccess, *, max_body: int,
                 heartbeat_interval: float | None, expose_errors: bool, track: Track,
                 release: Track) -> None:
        self.runs = runs
        self.agent = agent
        self.index = ChatIndex(runs.log)
        self.check_access = check_access
        self.max_body = max_body
        self.heartbeat = heartbeat_interval
        self.expose_errors = expose_errors
        self.track = track
        self.release = release

    async def post(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            chat = ChatRequest.parse(await read_body(request, self.max_body))
            await self.check_access(request, chat.chat_id, "write")
            record, created = await self.runs.start(self.agent, chat.input, chat.run_id)
            if created or await self.index.latest(chat.chat_id) != record.run_id:
                await self.index.point(chat.chat_id, record.run_id)
        except Exception as exc:
            await self._refuse(scope, receive, send, exc)
            return
        await self._reply(scope, receive, send, record.stream_id, chat.message_id, None)

    async def resume(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            chat_id = self._chat_id(request)
            await self.check_access(request, chat_id, "read")
            header = request.headers.get("last-event-id")
            after = None
            if header:
                parse_event_id(header)  # a bad id is a 400 before anything is read
                after = header
            run_id = await self.index.latest(chat_id)
            record = await self.runs.get(run_id) if run_id is not None else None
            if record is None or (after is None and record.status != "running"):
                await Response(status_code=204)(scope, receive, send)
                return
        except Exception as exc:
            await self._refuse(scope, receive, send, exc)
            return
        await self._reply(scope, receive, send, record.stream_id,
                          assistant_message_id(record.run_id), after)

    async def stop(self, request: Request) -> Response:
        try:
            chat_id = self._chat_id(request)
            await self.check_access(request, chat_id, "write")
            body = await read_body(request, self.max_body)
            wanted = msgspec.json.decode(body, type=dict[str, str]).get("runId") if body else None
            run_id = await self.index.latest(chat_id)
            if run_id is None:
                raise Refusal(404, f"chat {chat_id!r} has no reply to stop")
            if wanted is not None and wanted != run_id:
                raise Refusal(409, f"run {wanted!r} is not chat {chat_id!r}'s current reply "
                                   f"({run_id!r})")
            await self.runs.stop(run_id)
            return Response(encode_json(await self.runs.status(run_id)), 200,
                            media_type="application/json")
        except Exception as exc:
            return self._refusal(exc).response()

    # -- helpers -----------------------------------------------------------------------------

    def _chat_id(self, request: Request) -> str:
        try:
            return check_chat_id(request.path_params["chat_id"])
        except ValueError as exc:
            raise Refusal(400, str(exc)) from None

    def _refusal(self, exc: Exception) -> Refusal:
        if isinstance(exc, ValueError) and not isinstance(exc, msgspec.DecodeError):
            return Refusal(400, str(exc))
        return refusal_for(exc, expose_errors=self.expose_errors)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, exc: Exception) -> None:
        await self._refusal(exc).response()(scope, receive, send)

    async def _reply(self, scope: Scope, receive: Receive, send: Send, stream_id: str,
                     message_id: str, after: str | None) -> None:
        encoder = UIMessageStreamEncoder(message_id, after=after)
        client = scope.get("client")
        conn = Connection(stream_id, 0, f"{client[0]}:{client[1]}" if client else "-")
        self.track(conn)  # the app drains it at shutdown (it ends with no [DONE]: a drop)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
            frames = self.runs.log.read(stream_id, 0)  # from 0: the encoder rebuilds its state
            await _stream_reply(conn, frames, encoder, send, receive, self.heartbeat)
        finally:
            self.release(conn)


async def _stream_reply(conn: Connection, frames: AsyncIterator[StreamFrame],
                        encoder: UIMessageStreamEncoder, send: Send, receive: Receive,
                        heartbeat: float | None) -> None:
    """Write the reply's events until ``[DONE]``; the client leaving stops the read; a shutdown
    (``conn.stop``) or a cancellation from outside ends the body without ``[DONE]``."""
    lock = anyio.Lock()
    last_write = time.monotonic()

    async def write(data: bytes) -> None:
        nonlocal last_write
        async with lock:
            await send({"type": "http.response.body", "body": data, "more_body": True})
            last_write = time.monotonic()
            conn.frames += 1

    async def beat() -> None:
        assert heartbeat is not None
        while True:
            await anyio.sleep(max(0.0, last_write + heartbeat - time.monotonic()))
            if time.monotonic() - last_write >= heartbeat:
                await write(HEARTBEAT)

    async def listen() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        conn.stop("disconnect")

    try:
        async with anyio.create_task_group() as tg:
            conn.scope = tg.cancel_scope
            if conn.outcome != "open":  # stopped (a drain) before the group existed
                tg.cancel_scope.cancel()
            tg.start_soon(listen)
            if heartbeat is not None:
                tg.start_soon(beat)
            data = encoder.encode_start()
            if data:
                await write(data)
            async for frame in frames:
                data = encoder.feed(frame)
                if data:
                    await write(data)
                if encoder.finished:
                    break
            if conn.outcome == "open":
                conn.outcome = "done"
            tg.cancel_scope.cancel()
    except OSError:
        conn.outcome = "disconnect"  # the client left while a write was pending
    finally:
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await _aclose(frames)
            if conn.outcome != "disconnect":
                await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _aclose(frames: AsyncIterator[StreamFrame]) -> None:
    aclose = getattr(frames, "aclose", None)  # a log reader is an async generator
    if aclose is not None:
        await aclose()


def chat_routes(runs: Runs, agent: str, *, check_access: CheckAccess, max_body: int,
                heartbeat_interval: float | None, expose_errors: bool, track: Track,
                release: Track) -> list[Route]:
    """The ``/api/chat`` routes answering with ``agent``'s runs; ``track`` / ``release`` count each
    reply's connection with the app's (which stops them at shutdown)."""
    if agent not in runs.agents:
        from ..errors import UsageError

        raise UsageError(f"chat_agent={agent!r} is not one of the served agents "
                         f"({', '.join(sorted(runs.agents)) or 'none'})")
    api = _ChatAPI(runs, agent, check_access, max_body=max_body,
                   heartbeat_interval=heartbeat_interval, expose_errors=expose_errors,
                   track=track, release=release)
    return [
        Route("/api/chat", _Raw(api.post), methods=["POST"]),
        Route("/api/chat/{chat_id}/stream", _Raw(api.resume), methods=["GET"]),
        Route("/api/chat/{chat_id}/stop", api.stop, methods=["POST"]),
    ]


class _Raw:
    """A raw ASGI endpoint for the router (Starlette passes a plain ASGI class the scope)."""

    def __init__(self, handler: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handler(scope, receive, send)


def chat_openapi_paths(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the ``/api/chat`` routes added."""
    errors = {"400": {"$ref": "#/components/responses/BadRequest"},
              "401": {"$ref": "#/components/responses/Refused"},
              "403": {"$ref": "#/components/responses/Refused"}}
    chat_id = [{"name": "chat_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    stream = {"description": "The reply as the AI SDK's UI message stream (`data: {json}` "
                             "events with ids, then `data: [DONE]`).",
              "headers": {"x-vercel-ai-ui-message-stream": {"schema": {"const": "v1"}}},
              "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    message = {"type": "object", "required": ["role"], "properties": {
        "id": {"type": "string"}, "role": {"type": "string"},
        "parts": {"type": "array", "items": {"type": "object"}}}}
    paths: dict[str, Any] = {
        "/api/chat": {"post": {
            "summary": "Start the chat agent's reply to the last user message (once per chat, "
                       "user message and text) and stream it (useChat's DefaultChatTransport).",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["id", "messages"],
                "properties": {"id": {"type": "string"},
                               "messages": {"type": "array", "items": message},
                               "trigger": {"enum": ["submit-message", "regenerate-message"]},
                               "messageId": {"type": ["string", "null"]}},
                "additionalProperties": True}}}},
            "responses": {"200": stream, **errors,
                          "413": {"$ref": "#/components/responses/TooLarge"},
                          "422": {"$ref": "#/components/responses/Invalid"}}}},
        "/api/chat/{chat_id}/stream": {"get": {
            "summary": "Resume the chat's running reply (useChat's reconnectToStream): from its "
                       "start, or after Last-Event-ID.",
            "parameters": [*chat_id, {"name": "Last-Event-ID", "in": "header", "required": False,
                                      "schema": {"type": "string"}}],
            "responses": {"200": stream, "204": {"description": "No reply is running."},
                          **errors}}},
        "/api/chat/{chat_id}/stop": {"post": {
            "summary": "Stop the chat's reply (its run ends interrupted); answers the run's "
                       "status.",
            "parameters": chat_id,
            "requestBody": {"required": False, "content": {"application/json": {"schema": {
                "type": "object", "properties": {"runId": {"type": "string"}}}}}},
            "responses": {"200": {"description": "The run's status.", "content": {
                "application/json": {"schema": {"type": "object"}}}},
                **errors, "404": {"$ref": "#/components/responses/NotFound"},
                "409": {"$ref": "#/components/responses/Conflict"}}}},
    }
    return {**document, "paths": {**document["paths"], **paths}}
