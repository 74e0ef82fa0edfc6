"""Threads: every chat id is a thread kept on the log's backend (``streamwire.aisdk._threads``:
one record of kind ``"thread"``), and the routes that read and delete them:

================================  ================================================================
``GET /api/chat/{id}/messages``   the thread's UIMessages, a JSON array (useChat's initial
                                  ``messages``); ``404`` for no such thread
``GET /api/chats``                ``{"threads": [{id, title, createdAt, updatedAt, messageCount,
                                  owner}], "next"}``, newest first; ``?limit=`` (1-200, default
                                  50) and ``?after=<next>`` for the next page
``DELETE /api/chat/{id}``         stops a running reply, deletes the chat's streams (its index and
                                  runs) and the thread; ``{"deleted": true}`` or ``404``
================================  ================================================================

When a reply is stored (``Threads.settle``): its run's record says it ended (completed,
interrupted, failed or paused; a paused one is stored again once a resume moved it on) -- then its stream is read from the start through the UI message
encoder and ``UIMessageAssembler``, and the assistant message is placed in the thread in one
compare-and-set that also takes the run off ``pending``. The chat routes settle a thread after a
reply was streamed and before any use of it (a submit, these routes), so a reply is stored by
whoever looks next even when the process that ran it is gone; doing it twice stores it once.

``visible(thread, principal)`` says who sees a thread: a thread belongs to the user whose message
started it (``_owners``); other users get 404, and ``GET /api/chats`` lists the caller's only.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..aisdk import UIMessageStreamEncoder
from ..aisdk._request import assistant_message_id, chat_stream_id, check_chat_id
from ..aisdk._threads import (
    THREAD_KIND,
    Thread,
    ThreadStore,
    UIMessageAssembler,
    mark_answers,
    page_threads,
    place_reply,
)
from ..errors import RunNotFoundError, StreamNotFoundError, StreamwireError
from ..frames import ChunkFrame
from ..log import capabilities_of, record_store_of
from ..runs import Runs
from ._auth import User
from ._context import RouteContext
from ._http import Refusal, encode_json
from ._owners import chat_pointer
from ._owners import visible as owner_visible

__all__ = ["Threads", "ThreadsAPI", "threads_openapi_paths", "visible"]

#: Seconds a settle waits for an ended run's terminal frame (written just after its record).
_READ_TIMEOUT: Final = 10.0
_DEFAULT_LIMIT: Final = 50
_MAX_LIMIT: Final = 200


def visible(thread: Thread, principal: User | None) -> bool:
    """Whether ``principal`` (the caller; None: anonymous) may see ``thread``: its messages, its
    place in ``GET /api/chats``, its deletion (``_owners``' one rule: a thread with an owner is
    its owner's alone)."""
    return owner_visible(thread.owner, principal)


class Threads:
    """The threads of one app's chats, on ``runs.log``'s record store (or this process's memory
    for a log that declares none)."""

    def __init__(self, runs: Runs) -> None:
        self.runs = runs
        log = runs.log
        if capabilities_of(log).records:
            records = record_store_of(log, THREAD_KIND)
        else:
            from ..log.memory._records import MemoryRecordStore
            records = MemoryRecordStore()
        self.store = ThreadStore(records)

    async def settle(self, chat_id: str) -> Thread | None:
        """Store the replies of the thread's ended runs (module docstring); the thread after."""
        thread = await self.store.get(chat_id)
        if thread is None or not thread.pending:
            return thread
        replies: dict[str, tuple[str, dict[str, Any]] | None] = {}
        paused: dict[str, float] = {}
        for run_id, user_id in thread.pending.items():
            try:
                record = await self.runs.get(run_id)
            except RunNotFoundError:
                replies[run_id] = None  # never started (or expired): nothing to store
                continue
            if record.status == "running":
                continue
            if record.status == "paused":
                if thread.paused.get(run_id) == record.updated_at:
                    continue  # stored as it stands
                paused[run_id] = record.updated_at
            message = await self.assemble(record.stream_id, run_id)
            replies[run_id] = None if message is None else (
                user_id, mark_answers(message, record.resume_input))
        if not replies:
            return thread

        def change(t: Thread) -> bool:
            changed = False
            for run_id, reply in replies.items():
                if run_id not in t.pending:
                    continue  # stored by someone else meanwhile
                changed = True
                if reply is not None:
                    place_reply(t, reply[0], reply[1])
                if run_id in paused:
                    t.paused[run_id] = paused[run_id]
                else:
                    del t.pending[run_id]
                    t.paused.pop(run_id, None)
            return changed

        return await self.store.update(chat_id, change, create=False)

    async def assemble(self, stream_id: str, run_id: str) -> dict[str, Any] | None:
        """The complete assistant message of an ended run's stream (None: no stream)."""
        encoder = UIMessageStreamEncoder(assistant_message_id(run_id))
        assembler = UIMessageAssembler(assistant_message_id(run_id))
        assembler.feed_all(list(encoder.start()))
        frames = self.runs.log.read(stream_id, 0)
        try:
            with anyio.fail_after(_READ_TIMEOUT):
                async for frame in frames:
                    assembler.feed_all(list(encoder.chunks(frame)))
                    if encoder.finished:
                        break
        except (StreamNotFoundError, TimeoutError):
            return None
        finally:
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:
                await aclose()
        return assembler.message

    async def run_ids(self, chat_id: str) -> list[str]:
        """Every run the chat's index lists, oldest first."""
        stream = chat_stream_id(chat_id)
        try:
            head = (await self.runs.log.info(stream)).head
        except StreamNotFoundError:
            return []
        out: list[str] = []
        if not head:
            return out
        frames = self.runs.log.read(stream, 0)
        try:
            async for frame in frames:
                if isinstance(frame, ChunkFrame):
                    run_id = msgspec.json.decode(frame.chunk, type=dict[str, str]).get("runId")
                    if run_id is not None and run_id not in out:
                        out.append(run_id)
                    if frame.sequence >= head:
                        break
                else:
                    break
        finally:
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:
                await aclose()
        return out


class ThreadsAPI:
    """The thread routes (module docstring) under the app's authorization hook: ``read`` to
    read a thread, ``write`` to delete it (the hook gets the chat id; the list asks for nothing
    but ``visible``)."""

    def __init__(self, threads: Threads, ctx: RouteContext) -> None:
        self.threads = threads
        self.ctx = ctx

    def routes(self) -> list[Route]:
        return [
            Route("/api/chat/{chat_id}/messages", self.messages, methods=["GET"]),
            Route("/api/chats", self.list, methods=["GET"]),
            Route("/api/chat/{chat_id}", self.delete, methods=["DELETE"]),
        ]

    async def messages(self, request: Request) -> Response:
        try:
            chat_id = _chat_id(request.path_params["chat_id"])
            user = await self.ctx.check_access(request, chat_id, "read")
            thread = await self.threads.settle(chat_id)
            if thread is None or not visible(thread, user):
                raise Refusal(404, f"chat {chat_id!r} has no thread")
            return _json(thread.messages)
        except Exception as exc:
            return self.ctx.response(exc)

    async def list(self, request: Request) -> Response:
        try:
            user = await self.ctx.check_access(request, "", "read")
            query = request.query_params
            limit = _limit(query.get("limit"))
            threads: list[Thread] = []
            for thread in await self.threads.store.all():
                if thread.pending:  # a reply may have ended: its message counts
                    thread = await self.threads.settle(thread.id) or thread
                if visible(thread, user):
                    threads.append(thread)
            try:
                page, cursor = page_threads(threads, after=query.get("after") or None,
                                            limit=limit)
            except ValueError as exc:
                raise Refusal(400, str(exc)) from None
            return _json({"threads": [t.summary() for t in page], "next": cursor})
        except Exception as exc:
            return self.ctx.response(exc)

    async def delete(self, request: Request) -> Response:
        try:
            chat_id = _chat_id(request.path_params["chat_id"])
            user = await self.ctx.check_access(request, chat_id, "write")
            thread = await self.threads.store.get(chat_id)
            pointer = await chat_pointer(self.threads.runs.log, chat_id)
            if (thread is not None and not visible(thread, user)) or (
                    pointer is not None and not owner_visible(pointer.get("user"), user)):
                raise Refusal(404, f"chat {chat_id!r} has no thread")  # another user's: missing
            runs = self.threads.runs
            run_ids = await self.threads.run_ids(chat_id)
            if thread is None and not run_ids:
                raise Refusal(404, f"chat {chat_id!r} has no thread")
            for run_id in reversed(run_ids):  # the running reply is the last one
                try:
                    if (await runs.get(run_id)).status in ("running", "paused"):
                        await runs.stop(run_id)
                except RunNotFoundError:
                    pass
            await self.threads.store.delete(chat_id)
            for stream in [*run_ids, chat_stream_id(chat_id)]:
                with contextlib.suppress(StreamwireError):  # gone already (or a retry)
                    await runs.log.delete_stream(stream)
            return _json({"deleted": True})
        except Exception as exc:
            return self.ctx.response(exc)


def _chat_id(chat_id: str) -> str:
    try:
        return check_chat_id(chat_id)
    except ValueError as exc:
        raise Refusal(400, str(exc)) from None


def _limit(text: str | None) -> int:
    if text is None or text == "":
        return _DEFAULT_LIMIT
    if not text.isdigit() or not 1 <= int(text) <= _MAX_LIMIT:
        raise Refusal(400, f"limit is 1 to {_MAX_LIMIT}, not {text[:20]!r}")
    return int(text)


def _json(value: Any) -> Response:
    return Response(encode_json(value), 200, media_type="application/json")


def threads_openapi_paths(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the thread routes added."""
    errors = {"400": {"$ref": "#/components/responses/BadRequest"},
              "401": {"$ref": "#/components/responses/Refused"},
              "403": {"$ref": "#/components/responses/Refused"}}
    chat_id = [{"name": "chat_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    message = {"type": "object", "required": ["id", "role", "parts"], "properties": {
        "id": {"type": "string"}, "role": {"enum": ["user", "assistant", "system"]},
        "metadata": {}, "parts": {"type": "array", "items": {"type": "object"}}}}
    summary = {"type": "object", "properties": {
        "id": {"type": "string"}, "title": {"type": "string"},
        "createdAt": {"type": "number"}, "updatedAt": {"type": "number"},
        "messageCount": {"type": "integer"}, "owner": {"type": ["string", "null"]}}}
    not_found = {"404": {"$ref": "#/components/responses/NotFound"}}
    paths: dict[str, Any] = {
        "/api/chat/{chat_id}/messages": {"get": {
            "summary": "The chat's thread: its UIMessages in order (useChat's initial "
                       "`messages`), the replies of ended runs included.",
            "parameters": chat_id,
            "responses": {"200": {"description": "The UIMessages.", "content": {
                "application/json": {"schema": {"type": "array", "items": message}}}},
                **errors, **not_found}}},
        "/api/chats": {"get": {
            "summary": "The threads, newest first, a page at a time.",
            "parameters": [
                {"name": "limit", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": _MAX_LIMIT,
                            "default": _DEFAULT_LIMIT}},
                {"name": "after", "in": "query", "required": False,
                 "description": "The `next` of the previous page.",
                 "schema": {"type": "string"}}],
            "responses": {"200": {"description": "A page of threads.", "content": {
                "application/json": {"schema": {"type": "object", "properties": {
                    "threads": {"type": "array", "items": summary},
                    "next": {"type": ["string", "null"]}}}}}}, **errors}}},
        "/api/chat/{chat_id}": {"delete": {
            "summary": "Delete the chat: stops its running reply, deletes its streams and its "
                       "thread.",
            "parameters": chat_id,
            "responses": {"200": {"description": "Deleted.", "content": {"application/json": {
                "schema": {"type": "object", "properties": {"deleted": {"const": True}}}}}},
                **errors, **not_found}}},
    }
    return {**document, "paths": {**document["paths"], **paths}}
