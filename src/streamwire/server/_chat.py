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

A chat is its creator's (the hook's principal, ``_owners``): to anyone else it answers as a chat
with no reply (``204`` on resume, ``404`` on stop and on a new message). ``{"agent": NAME}`` in the
body picks one of ``create_app(chat_agents=...)`` (400 naming them otherwise).

A chat's runs are listed in a stream of the log itself (``chat:<id>``, one ``{"runId"}`` chunk per
reply), so every server process on a shared backend answers for every chat. Ids beginning
``chat:`` are these routes' alone (``_ids``): the index and the chat's runs (``chat:<id>:<key>``);
no client-chosen run id or plain stream write reaches them. Replies are sent as
the run's stream is read (``streamwire.aisdk.UIMessageStreamEncoder``), on the connection engine
(``_engine``) like every stream: each reply counts against ``max_connections`` and
``max_connections_per_stream`` (its run's stream), gets heartbeat comments when quiet, is evicted
after ``send_timeout`` when its client stops reading, and a server shutting down ends it with no
``[DONE]``, as a drop.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final, cast

import anyio
import anyio.abc
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..aisdk import UI_MESSAGE_STREAM_HEADERS, UIMessageStreamEncoder, parse_event_id
from ..aisdk._request import ChatRequest, assistant_message_id, chat_stream_id, check_chat_id
from ..aisdk._stream import after_chunk
from ..aisdk._threads import Thread, place_user_message
from ..errors import (
    RunConflictError,
    RunNotFoundError,
    StreamNotFoundError,
    StreamStateError,
    UsageError,
)
from ..frames import StreamFrame
from ..log import StreamLog
from ..runs import RunRecord, Runs
from ._asgi import Receive, Scope, Send
from ._auth import User
from ._context import RawRoute, RouteContext
from ._engine import Connection
from ._http import Refusal, encode_json, read_json
from ._owners import chat_pointer, owner_id, require_owner, visible
from ._threads import Threads
from ._wire import failure_frame

__all__ = ["MULTITASK", "ChatAPI"]

logger = logging.getLogger("streamwire.server")
#: What a new message does while the chat's reply runs (``create_app(chat_multitask=...)``).
MULTITASK: Final = ("reject", "interrupt", "enqueue")

_encode_sorted: Final = msgspec.json.Encoder(order="sorted").encode
_HEADERS: Final = [(k.encode(), v.encode()) for k, v in UI_MESSAGE_STREAM_HEADERS.items()]


class ChatIndex:
    """Which run answers a chat now: the last chunk of the chat's stream ``chat:<id>``."""

    def __init__(self, log: StreamLog) -> None:
        self.log = log

    async def latest(self, chat_id: str) -> str | None:
        """The run id of the chat's last reply, or None if it has none."""
        pointer = await chat_pointer(self.log, chat_id)
        return None if pointer is None else pointer.get("runId")

    async def latest_for(self, chat_id: str, user: User | None) -> str | None:
        """``latest``, or None when the chat is not ``user``'s to see (``_owners``)."""
        pointer = await chat_pointer(self.log, chat_id)
        if pointer is None or not visible(pointer.get("user"), user):
            return None
        return pointer.get("runId")

    async def owner(self, chat_id: str, user: User | None) -> str | None:
        """The chat's owner (``user``'s id for a new chat); 404 when it is another's."""
        pointer = await chat_pointer(self.log, chat_id)
        owner = owner_id(user) if pointer is None else pointer.get("user")
        require_owner(user, owner, Refusal(404, f"no chat with id {chat_id!r}"))
        return owner

    async def point(self, chat_id: str, run_id: str, owner: str | None = None) -> None:
        """Make ``run_id`` the chat's current reply (the chat being ``owner``'s)."""
        stream = chat_stream_id(chat_id)
        chunk = encode_json({"runId": run_id} if owner is None else {"runId": run_id,
                                                                    "user": owner})
        try:
            await self.log.append(stream, 0, chunk)
        except StreamNotFoundError:
            await self.log.create_stream(stream)
            await self.log.append(stream, 0, chunk)
        except StreamStateError:  # the log ended it (e.g. its writer process died): take it up
            await self.log.reactivate_stream(stream)
            await self.log.append(stream, 0, chunk)


class ChatAPI:
    """The ``/api/chat`` routes answering with ``agent``'s runs."""

    def __init__(self, runs: Runs, agent: str, ctx: RouteContext,
                 multitask: str = "reject", agents: Iterable[str] = ()) -> None:
        if multitask not in MULTITASK:
            raise UsageError(f"chat_multitask must be one of {', '.join(MULTITASK)}, "
                             f"not {multitask!r}")
        self.runs = runs
        self.agent = agent
        #: the agents a request may pick with ``{"agent": NAME}``
        self.agents = frozenset({agent, *agents})
        self.multitask = multitask
        self.threads = Threads(runs)
        self.index = ChatIndex(runs.log)
        self.ctx = ctx
        self.max_body = ctx.settings.max_body_size
        for name in sorted(self.agents):
            if name not in runs.agents:
                raise UsageError(f"chat agent {name!r} is not one of the served agents "
                                 f"({', '.join(sorted(runs.agents)) or 'none'})")

    def routes(self) -> list[Route]:
        return [
            Route("/api/chat", RawRoute(self.post), methods=["POST"]),
            Route("/api/chat/{chat_id}/stream", RawRoute(self.resume, "chat_id"),
                  methods=["GET"]),
            Route("/api/chat/{chat_id}/stop", self.stop, methods=["POST"]),
        ]

    async def post(self, scope: Scope, receive: Receive, send: Send, _: str = "") -> None:
        request = Request(scope, receive)
        cors = self.ctx.cors_headers(scope)
        conn: Connection | None = None
        try:
            chat = ChatRequest.parse(await read_json(request, self.max_body))
            user = await self.ctx.check_access(request, chat.chat_id, "write")
            # whose chat first: another user's is missing (404), and nothing of it changes
            agent, owner = self._agent(chat), await self.index.owner(chat.chat_id, user)
            if chat.continues is not None and chat.tool_answers:
                record, after, resume = await self._answer(chat, user)
                # the slot first: a refused reply resumes no run
                conn = self.ctx.engine.admit(record.stream_id, scope)
                if resume is not None:
                    await self._resume(record.run_id, *resume)
            else:
                run_id, run_input = await self._prepare(chat, receive, owner)
                # the slot first: a refused reply starts no run (its stream has the run's id)
                conn = self.ctx.engine.admit(run_id, scope)
                record = await self._start_run(chat, agent, run_id, run_input, user, owner)
                after = None
        except Exception as exc:
            await self.ctx.refuse(send, self._mapped(exc), conn=conn, headers=cors)
            return
        await self._reply(conn, receive, send, record.stream_id,
                          assistant_message_id(record.run_id),
                          None if after is None else after_chunk(after), cors)
        await self._settle(chat.chat_id)

    async def _start_run(self, chat: ChatRequest, agent: str, run_id: str,
                         run_input: dict[str, Any], user: User | None,
                         owner: str | None) -> RunRecord:
        """Start the run that answers ``chat`` (or join it: a retry) and point the chat at it."""
        try:
            record, created = await self.runs.start(agent, run_input, run_id,
                                                    user=owner_id(user))
        except RunConflictError:  # a retry that found the thread moved on: join the run
            record, created = await self.runs.get(run_id), False
        except UsageError:  # the only one Runs.start raises: it is not running
            raise self.ctx.not_running() from None
        require_owner(user, record.user, Refusal(404, f"no chat with id {chat.chat_id!r}"))
        if created or await self.index.latest(chat.chat_id) != record.run_id:
            await self.index.point(chat.chat_id, record.run_id, owner)
        return record

    async def _resume(self, run_id: str, run_input: dict[str, Any], resume_id: str) -> None:
        try:
            await self.runs.resume(run_id, run_input, resume_id)
        except UsageError:  # the only one Runs.resume raises of its own: it is not running
            raise self.ctx.not_running() from None

    async def _answer(self, chat: ChatRequest, user: User | None
                      ) -> tuple[RunRecord, int, tuple[dict[str, Any], str] | None]:
        """The paused reply ``chat`` continues (the SDK's resend after
        ``addToolApprovalResponse`` / ``addToolOutput``): the run, the chunk its continuation
        follows, and the resume (input, id) its answers make -- None for a repeat of an applied
        one, which joins the resumed reply: each set of answers resumes the run once."""
        assert chat.continues is not None
        missing = Refusal(404, f"chat {chat.chat_id!r} has no reply {chat.continues!r}")
        try:
            record = await self.runs.get(chat.continues)
        except RunNotFoundError:
            raise missing from None
        require_owner(user, record.user, missing)
        waiting = {p.get("toolCallId") for p in record.pending_tools or ()}
        answers = [a for a in chat.tool_answers if a["toolCallId"] in waiting]
        resume_id = "tools-" + hashlib.sha256(_encode_sorted(answers)).hexdigest()[:32]
        if record.status == "paused" and answers:
            return record, record.head, ({"toolAnswers": answers, "pausedAt": record.head},
                                         resume_id)
        last: object = record.resume_input
        for applied in record.resumes:  # a repeat: join the reply its answers resumed
            if applied.startswith("tools-") and isinstance(last, dict):
                paused_at = cast("dict[str, Any]", last).get("pausedAt")
                if isinstance(paused_at, int):
                    return record, paused_at, None
        raise Refusal(409, f"reply {chat.continues!r} waits for no such answer (it is "
                           f"{record.status}); send the answers to the tool calls it waits for",
                      runId=record.run_id)

    async def _prepare(self, chat: ChatRequest, receive: Receive, owner: str | None
                       ) -> tuple[str, dict[str, Any]]:
        """The run that answers ``chat``: its id and input (the thread's history then the new
        message). Stores the user message and the run as the thread's pending reply; applies the
        multitask policy when another reply runs (``reject``: 409, ``interrupt``: stop it,
        ``enqueue``: wait for its end)."""
        thread = await self.threads.settle(chat.chat_id)
        replaced = None
        if chat.regenerate and thread is not None:  # the reply to that user message
            after = [m for i, m in enumerate(thread.messages)
                     if i and thread.messages[i - 1].get("id") == chat.user_message_id]
            replaced = after[0].get("id") if after and after[0].get("role") == "assistant" \
                else None
        run_id = chat.run_id_for(replaced if isinstance(replaced, str) else None)
        try:
            joined = (await self.runs.get(run_id)).status in ("running", "paused")
        except RunNotFoundError:
            joined = False
        if not joined:
            running = await self._running_reply(chat.chat_id)
            if running is not None and running != run_id:
                if self.multitask == "reject":
                    raise Refusal(409, f"chat {chat.chat_id!r} is answering (run {running!r}): "
                                       "stop it or wait for its end", runId=running)
                await self.threads.store.update(
                    chat.chat_id, lambda t: place_user_message(t, chat.user_message))
                if self.multitask == "interrupt":
                    await self.runs.stop(running)
                elif not await self._wait_for_end(running, receive):
                    raise Refusal(499, "the client left before its reply could start")
                await self.threads.settle(chat.chat_id)

        def change(t: Thread) -> bool:
            if t.owner is None and owner is not None:  # a new thread is its first writer's
                t.owner = owner
            placed = place_user_message(t, chat.user_message)
            if t.pending.get(run_id) == chat.user_message_id:
                return placed
            t.pending[run_id] = chat.user_message_id  # (again: a joined run may go on)
            return True

        stored = await self.threads.store.update(chat.chat_id, change)
        messages = stored.messages if stored is not None else []
        at = next((i for i, m in enumerate(messages) if m.get("id") == chat.user_message_id),
                  len(messages))
        return run_id, chat.input_for(messages[:at])

    async def _running_reply(self, chat_id: str) -> str | None:
        run_id = await self.index.latest(chat_id)
        if run_id is None:
            return None
        try:
            return run_id if (await self.runs.get(run_id)).status == "running" else None
        except RunNotFoundError:
            return None

    async def _wait_for_end(self, run_id: str, receive: Receive) -> bool:
        """Wait for the run to leave ``running``; False if the client left first."""
        left = False
        async with anyio.create_task_group() as tg:
            async def watch() -> None:
                nonlocal left
                while (await receive())["type"] != "http.disconnect":
                    pass
                left = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            while True:  # the run may be another process's: its record says when it ends
                if (await self.runs.get(run_id)).status != "running":
                    break
                await anyio.sleep(self.runs.poll_interval / 2)
            tg.cancel_scope.cancel()
        return not left

    async def _settle(self, chat_id: str) -> None:
        """Store the thread's ended replies after one was sent (a failure waits for the next
        reader: every thread route settles first)."""
        try:
            await self.threads.settle(chat_id)
        except Exception:
            logger.warning("chat %s: the reply could not be stored yet", chat_id, exc_info=True)

    async def resume(self, scope: Scope, receive: Receive, send: Send, chat_id: str) -> None:
        request = Request(scope, receive)
        cors = self.ctx.cors_headers(scope)
        try:
            chat_id = self._chat_id(chat_id)
            user = await self.ctx.check_access(request, chat_id, "read")
            header = request.headers.get("last-event-id")
            after = None
            if header:
                parse_event_id(header)  # a bad id is a 400 before anything is read
                after = header
            run_id = await self.index.latest_for(chat_id, user)
            record = await self.runs.get(run_id) if run_id is not None else None
            if record is None or (after is None and record.status != "running"):
                await send({"type": "http.response.start", "status": 204, "headers": cors})
                await send({"type": "http.response.body", "body": b""})
                return
            conn = self.ctx.engine.admit(record.stream_id, scope)
        except Exception as exc:
            await self.ctx.refuse(send, self._mapped(exc), headers=cors)
            return
        await self._reply(conn, receive, send, record.stream_id,
                          assistant_message_id(record.run_id), after, cors)
        await self._settle(chat_id)

    async def stop(self, request: Request) -> Response:
        try:
            chat_id = self._chat_id(request.path_params["chat_id"])
            user = await self.ctx.check_access(request, chat_id, "write")
            body = await read_json(request, self.max_body, optional=True)
            wanted = msgspec.json.decode(body, type=dict[str, str]).get("runId") if body else None
            run_id = await self.index.latest_for(chat_id, user)
            if run_id is None:
                raise Refusal(404, f"chat {chat_id!r} has no reply to stop")
            if wanted is not None and wanted != run_id:
                raise Refusal(409, f"run {wanted!r} is not chat {chat_id!r}'s current reply "
                                   f"({run_id!r})")
            await self.runs.stop(run_id)
            return Response(encode_json(await self.runs.status(run_id)), 200,
                            media_type="application/json")
        except Exception as exc:
            return self.ctx.response(self._mapped(exc))

    # -- helpers -----------------------------------------------------------------------------

    def _agent(self, chat: ChatRequest) -> str:
        """The agent the request picks (``{"agent": NAME}``), one of ``agents``; else 400."""
        name = chat.extra.get("agent", self.agent)
        if not isinstance(name, str) or name not in self.agents:
            raise Refusal(400, f"agent {name!r} is not a chat agent of this server; the body's "
                               f"agent is one of: {', '.join(sorted(self.agents))}",
                          agents=sorted(self.agents))
        return name

    def _chat_id(self, chat_id: str) -> str:
        try:
            return check_chat_id(chat_id)
        except ValueError as exc:
            raise Refusal(400, str(exc)) from None

    @staticmethod
    def _mapped(exc: Exception) -> Exception:
        """A chat request's ``ValueError`` (a bad body or id) is the client's: 400."""
        if isinstance(exc, ValueError) and not isinstance(exc, msgspec.DecodeError):
            return Refusal(400, str(exc))
        return exc

    async def _reply(self, conn: Connection, receive: Receive, send: Send, stream_id: str,
                     message_id: str, after: str | None,
                     cors: list[tuple[bytes, bytes]]) -> None:
        encoder = UIMessageStreamEncoder(message_id, after=after)
        frames = self.runs.log.read(stream_id, 0)  # from 0: the encoder rebuilds its state
        source = _ReplySource(frames, encoder, self.ctx.settings.expose_errors)
        await self.ctx.engine.serve(conn, source, send, receive, headers=_HEADERS + cors,
                                    heartbeat=self.ctx.settings.heartbeat_interval)


class _ReplySource:
    """A reply as an ``_engine.Source``: the run's stream read from the start and encoded as the UI
    message stream until ``[DONE]``. A shutdown ends the body with no ``[DONE]`` (a drop)."""

    eager = False

    def __init__(self, frames: AsyncIterator[StreamFrame], encoder: UIMessageStreamEncoder,
                 expose_errors: bool) -> None:
        self.frames = frames
        self.encoder = encoder
        self.expose_errors = expose_errors

    async def pump(self, conn: Connection, tg: anyio.abc.TaskGroup | None) -> None:
        encoder = self.encoder
        in_send = False
        try:
            data = encoder.encode_start()
            if data:
                in_send = True
                await conn.write(data)
                in_send = False
                conn.frames += 1
            async for frame in self.frames:
                data = encoder.feed(frame)
                if data:
                    in_send = True
                    await conn.write(data)
                    in_send = False
                    conn.frames += 1
                if encoder.finished:
                    return
        except OSError:
            if not in_send:
                raise
            conn.stop("disconnect")  # the client left while a write was pending
        except Exception as exc:
            if in_send:
                raise
            failure_frame(exc, conn.stream_id, self.expose_errors)  # logs it
            conn.outcome = "error"  # the body ends with no [DONE]: a drop, the client resumes

    def last_words(self, conn: Connection) -> bytes:
        return b""

    def holds(self) -> bool:
        return True

    async def aclose(self) -> None:
        await _aclose(self.frames)


async def _aclose(frames: AsyncIterator[StreamFrame]) -> None:
    aclose = getattr(frames, "aclose", None)  # a log reader is an async generator
    if aclose is not None:
        await aclose()
