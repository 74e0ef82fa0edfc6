"""Who may see what: the ownership rule, written once.

A run started by a user belongs to that user (its record's ``user``); a chat belongs to the user
whose message began it (its index stream ``chat:<id>`` carries the owner in every pointer, and
each of its runs is that user's run). Whatever has an owner is invisible to everyone else: it
answers exactly as if it did not exist (the route's own "not found": 404 on a run's routes and
streams, the chat's "no reply" answers on the chat routes), so its existence is not revealed.
What nobody owns (started anonymously, as on every server whose ``authorize`` hook names no
users) stays visible to all, as before users.

``GET /streams`` lists plain streams to everyone, and the streams of runs and chats (which a
plain-stream reader never needs) only to their owner: an anonymous caller sees none.

The rule for other routes (threads): ``require_owner(user, owner, not_found)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import anyio
import msgspec

from ..aisdk._request import CHAT_PREFIX
from ..errors import StreamNotFoundError
from ..frames import ChunkFrame
from ..log import StreamInfo, StreamLog, capabilities_of
from ..runs._store import RunStore, store_for
from ._auth import User

__all__ = ["Owners", "owner_id", "require_owner", "visible"]

_decode_pointer: Final = msgspec.json.Decoder(dict[str, str]).decode


def owner_id(user: User | None) -> str | None:
    """What a thing ``user`` creates records as its owner (None: anonymous, nobody's)."""
    return None if user is None else user.id


def visible(owner: str | None, user: User | None) -> bool:
    """Whether ``user`` (None: anonymous) may see something owned by ``owner`` (None: nobody)."""
    return owner is None or (user is not None and user.id == owner)


def require_owner(user: User | None, owner: str | None, not_found: Exception) -> None:
    """Raise ``not_found`` -- the route's own answer for something that does not exist, so that
    a hidden thing and a missing one cannot be told apart -- unless ``user`` may see what
    ``owner`` owns (``visible``)."""
    if not visible(owner, user):
        raise not_found


async def chat_pointer(log: StreamLog, chat_id: str) -> dict[str, str] | None:
    """The last pointer of chat ``chat_id``'s index stream (``{"runId", "user"?}``), or None when
    the chat has none."""
    stream = f"{CHAT_PREFIX}{chat_id}"
    try:
        head = (await log.info(stream)).head
    except StreamNotFoundError:
        return None
    if not head:
        return None
    frames = log.read(stream, head - 1)
    try:
        async for frame in frames:
            if isinstance(frame, ChunkFrame):
                return _decode_pointer(frame.chunk)
    finally:
        aclose = getattr(frames, "aclose", None)  # a log reader is an async generator
        if aclose is not None:
            await aclose()
    return None


class Owners:
    """The owners of streams over one log and its run store (for the stream routes)."""

    def __init__(self, log: StreamLog, store: RunStore | None) -> None:
        self.log = log
        if store is None and capabilities_of(log).records:  # another process may run agents
            store = store_for(log)
        self.store = store

    async def of_stream(self, stream_id: str) -> tuple[bool, str | None]:
        """Whether ``stream_id`` is a run's or a chat's stream, and its owner."""
        if stream_id.startswith(CHAT_PREFIX):
            rest = stream_id[len(CHAT_PREFIX):]
            if ":" not in rest:  # a chat's index
                pointer = await chat_pointer(self.log, rest)
                return True, None if pointer is None else pointer.get("user")
            return True, await self._run_owner(stream_id)
        if self.store is None:
            return False, None
        record = await self.store.get(stream_id)
        if record is None:
            return False, None
        return True, record.user

    async def _run_owner(self, run_id: str) -> str | None:
        record = await self.store.get(run_id) if self.store is not None else None
        return None if record is None else record.user

    async def check_stream(self, user: User | None, stream_id: str) -> None:
        """``StreamNotFoundError`` (404, as for a stream that does not exist) unless ``user`` may
        read ``stream_id``."""
        _, owner = await self.of_stream(stream_id)
        require_owner(user, owner, StreamNotFoundError(stream_id))

    async def listed(self, user: User | None, found: Sequence[StreamInfo]) -> list[StreamInfo]:
        """``found`` without the streams ``user`` may not list: runs' and chats' streams unless
        they are ``user``'s own (an anonymous caller lists none of them)."""
        keep = [True] * len(found)

        async def look(i: int, stream_id: str) -> None:
            owned, owner = await self.of_stream(stream_id)
            keep[i] = not owned or (user is not None and owner == user.id)

        async with anyio.create_task_group() as tg:
            for i, info in enumerate(found):
                if info.stream_id.startswith(CHAT_PREFIX) and user is None:
                    keep[i] = False
                elif user is not None or self.store is not None:
                    tg.start_soon(look, i, info.stream_id)
        return [info for info, kept in zip(found, keep, strict=True) if kept]
