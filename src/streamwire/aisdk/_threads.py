"""Threads: a chat's UIMessages kept beside its streams, on the log's record store (kind
``"thread"``). The assistant message of a reply is assembled by ``_assemble.UIMessageAssembler``
(re-exported here).

A thread is one record (``Thread``, JSON): its messages in order, ``pending`` (the runs whose
assistant message is not stored yet, each with the user message it answers), its title, times and
``owner`` (the users layer's; None here). A paused reply is stored and stays pending: a resume
continues the same message, stored again when the run ends. A live thread has the store's indexed status
(``RUNNING``: ``running()`` lists the threads, ``expire`` never touches them); a deleted one is a
tombstone (``"deleted"``) until ``expire`` removes it. Every change is a compare-and-set of the
whole record (``ThreadStore.update``), so two server processes never lose each other's messages.

Placing an assistant message (``place_reply``): right after the user message it answers,
replacing the assistant messages that directly follow it there (a regenerated reply replaces the
last one; a re-store of the same reply changes nothing); a reply whose user message is gone (an
edit cut it) is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, cast, final

import msgspec

from ..log import RecordStore, StoredRecord
from ..log._records import RUNNING
from ._assemble import UIMessageAssembler

__all__ = ["THREAD_KIND", "Thread", "ThreadStore", "UIMessageAssembler", "mark_answers",
           "place_reply", "place_user_message"]

#: The record kind of threads.
THREAD_KIND: Final = "thread"
_DELETED: Final = "deleted"
_TITLE_LENGTH: Final = 80


@final
class Thread(msgspec.Struct, rename="camel", omit_defaults=True):
    """One chat's thread (module docstring). ``messages`` are UIMessages as JSON objects."""

    id: str
    created_at: float
    updated_at: float
    title: str = ""
    #: The user the thread belongs to (set and checked by the users layer; None: nobody's).
    owner: str | None = None
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list[dict[str, Any]])
    #: run id -> the id of the user message it answers: replies not stored yet (or stored
    #: while paused: a resume goes on with the same message)
    pending: dict[str, str] = msgspec.field(default_factory=dict[str, str])
    #: run id -> its record's ``updated_at`` when its reply was stored paused (stored again
    #: only once the run moved on)
    paused: dict[str, float] = msgspec.field(default_factory=dict[str, float])
    #: the record's version when it was read (the compare-and-set token; not a field to edit)
    version: int = 0

    def summary(self) -> dict[str, Any]:
        """The thread as ``GET /api/chats`` lists it."""
        return {"id": self.id, "title": self.title, "createdAt": self.created_at,
                "updatedAt": self.updated_at, "messageCount": len(self.messages),
                "owner": self.owner}


_encode: Final = msgspec.json.Encoder().encode
_decode_thread: Final = msgspec.json.Decoder(Thread).decode


def new_thread(chat_id: str, now: float | None = None) -> Thread:
    """An empty thread created now."""
    now = time.time() if now is None else now
    return Thread(id=chat_id, created_at=now, updated_at=now)


def place_user_message(thread: Thread, message: Mapping[str, Any]) -> bool:
    """Store a submitted user message: appended, or, when the thread has its id (an edit or a
    resend), put in its place with the messages after it cut (what the client did). Returns
    whether the thread changed."""
    stored = dict(message)
    messages = thread.messages
    for i, old in enumerate(messages):
        if old.get("id") == stored.get("id"):
            if old == stored:
                return False  # a resend: the thread stays as it is
            thread.messages = [*messages[:i], stored]
            break
    else:
        thread.messages = [*messages, stored]
    if not thread.title:
        thread.title = _text_of(stored)[:_TITLE_LENGTH]
    return True


def mark_answers(message: dict[str, Any], resume_input: Any) -> dict[str, Any]:
    """``message`` with its answered approvals as useChat holds them after
    ``addToolApprovalResponse``: ``approval.approved`` (the call ran: true; it was denied: false)
    and the ``reason`` the last resume's ``toolAnswers`` gave. The stream carries no answer: a
    fold of it alone (``readUIMessageStream``) has the approval's id only."""
    given: dict[str, Any] = {}
    if isinstance(resume_input, dict):
        answers: object = cast("dict[str, Any]", resume_input).get("toolAnswers")
        for answer in cast("list[object]", answers) if isinstance(answers, list) else []:
            if isinstance(answer, dict):
                given[str(cast("dict[str, Any]", answer).get("toolCallId"))] = answer
    parts: list[dict[str, Any]] = message.get("parts", [])
    for part in parts:
        approval: object = part.get("approval")
        if not isinstance(approval, dict):
            continue
        fields = cast("dict[str, Any]", approval)
        state = part.get("state")
        if "approved" in fields or state not in ("output-available", "output-error",
                                                 "output-denied"):
            continue
        fields["approved"] = state != "output-denied"
        reason: object = cast("dict[str, Any]", given.get(str(part.get("toolCallId")), {})
                              ).get("reason")
        if isinstance(reason, str):
            fields["reason"] = reason
    return message


def place_reply(thread: Thread, user_message_id: str, message: dict[str, Any]) -> bool:
    """Store a reply's assistant ``message`` after the user message it answers (module
    docstring). Returns whether it was placed."""
    messages = thread.messages
    at = next((i for i, m in enumerate(messages) if m.get("id") == user_message_id
               and m.get("role") == "user"), None)
    if at is None:
        return False
    end = at + 1
    while end < len(messages) and messages[end].get("role") == "assistant":
        end += 1
    thread.messages = [*messages[:at + 1], message, *messages[end:]]
    return True


def _text_of(message: Mapping[str, Any]) -> str:
    parts: object = message.get("parts")
    if not isinstance(parts, list):
        return ""
    text: list[str] = []
    for item in cast("list[object]", parts):
        part = cast("dict[str, Any]", item) if isinstance(item, dict) else {}
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            text.append(part["text"])
    return "".join(text)


class ThreadStore:
    """Threads on a ``RecordStore`` of kind ``"thread"`` (module docstring)."""

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    async def get(self, chat_id: str) -> Thread | None:
        """The live thread, or None (none, or deleted)."""
        stored = await self.records.get(chat_id)
        if stored is None or stored.status != RUNNING:
            return None
        return _decode_thread(stored.body)

    async def update(self, chat_id: str, change: Callable[[Thread], Awaitable[bool] | bool],
                     *, create: bool = True) -> Thread | None:
        """Apply ``change`` to the thread (a new one when there is none, if ``create``) and
        store it if it returns True, atomically (compare-and-set, retried on a concurrent change:
        ``change`` may run more than once). Returns the thread as it stands (None: none)."""
        while True:
            stored = await self.records.get(chat_id)
            live = stored is not None and stored.status == RUNNING
            if not live and not create:
                return None
            thread = _decode_thread(stored.body) if stored is not None and live \
                else new_thread(chat_id)
            outcome = change(thread)
            changed = await outcome if not isinstance(outcome, bool) else outcome
            if not changed:
                return thread
            now = time.time()
            thread.updated_at = max(now, thread.updated_at)
            if stored is None:
                thread.version = 1
                if await self.records.insert(self._record(thread)) is None:
                    return thread
                continue
            thread.version = stored.version + 1
            if not live:
                thread.created_at = now
            if await self.records.swap(self._record(thread)):
                return thread

    async def delete(self, chat_id: str) -> bool:
        """Delete the thread (a tombstone, then removed by ``expire``); False if there was
        none."""
        while True:
            stored = await self.records.get(chat_id)
            if stored is None or stored.status != RUNNING:
                return False
            tomb = StoredRecord(id=chat_id, status=_DELETED, version=stored.version + 1,
                                updated_at=time.time(), body=b"{}")
            if await self.records.swap(tomb):
                await self.records.expire(time.time() + 1)  # tombstones only: threads are live
                return True

    async def all(self) -> list[Thread]:
        """Every live thread (unordered)."""
        out: list[Thread] = []
        for chat_id in await self.records.running():
            thread = await self.get(chat_id)
            if thread is not None:
                out.append(thread)
        return out

    @staticmethod
    def _record(thread: Thread) -> StoredRecord:
        return StoredRecord(id=thread.id, status=RUNNING, version=thread.version,
                            updated_at=thread.updated_at, body=_encode(thread))


def page_threads(threads: list[Thread], *, after: str | None,
                 limit: int) -> tuple[list[Thread], str | None]:
    """Newest first (``updatedAt``, then id), the ``limit`` after the cursor ``after``; and the
    cursor of the next page (None: this is the last)."""
    ordered = sorted(threads, key=lambda t: (-t.updated_at, t.id))
    if after:
        stamp, _, last_id = after.partition("~")
        try:
            key = (-float(stamp), last_id)
        except ValueError:
            raise ValueError(f"not a thread cursor: {after[:40]!r}") from None
        ordered = [t for t in ordered if (-t.updated_at, t.id) > key]
    page = ordered[:limit]
    more = len(ordered) > limit
    return page, (f"{page[-1].updated_at!r}~{page[-1].id}" if more and page else None)


