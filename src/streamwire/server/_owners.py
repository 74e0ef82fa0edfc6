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

import time
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


#: Seconds an answer of ``Owners.of_stream`` is reused: a re-attach storm (thousands of readers
#: of one stream at once) asks the run store once a stream, not once a reader. A run's owner never
#: changes; what may (a stream deleted, then a run started under its id) waits this long at most.
OWNER_CACHE_SECONDS: Final = 2.0
#: Streams whose answer is kept at most (the oldest go first).
OWNER_CACHE_SIZE: Final = 10_000


class Owners:
    """The owners of streams over one log and its run store (for the stream routes)."""

    def __init__(self, log: StreamLog, store: RunStore | None) -> None:
        self.log = log
        if store is None and capabilities_of(log).records:  # another process may run agents
            store = store_for(log)
        self.store = store
        #: stream id -> (when it was asked, what ``of_stream`` answered)
        self._known: dict[str, tuple[float, tuple[bool, str | None]]] = {}

    async def of_stream(self, stream_id: str) -> tuple[bool, str | None]:
        """Whether ``stream_id`` is a run's or a chat's stream, and its owner. A settled answer
        (a run's record found; a plain stream that exists) is reused for
        ``OWNER_CACHE_SECONDS``; one that may still change (nothing there yet) never is."""
        now = time.monotonic()
        known = self._known.get(stream_id)
        if known is not None and now - known[0] < OWNER_CACHE_SECONDS:
            return known[1]
        answer, settled = await self._look_up(stream_id)
        if settled:
            known_streams = self._known
            known_streams.pop(stream_id, None)
            if len(known_streams) >= OWNER_CACHE_SIZE:
                del known_streams[next(iter(known_streams))]
            known_streams[stream_id] = (now, answer)
        return answer

    async def _look_up(self, stream_id: str) -> tuple[tuple[bool, str | None], bool]:
        """``of_stream``'s answer, and whether it is settled (see there)."""
        if stream_id.startswith(CHAT_PREFIX):
            rest = stream_id[len(CHAT_PREFIX):]
            if ":" not in rest:  # a chat's index: its owner comes with its first pointer
                pointer = await chat_pointer(self.log, rest)
                return (True, None if pointer is None else pointer.get("user")), \
                    pointer is not None
            record = await self.store.get(stream_id) if self.store is not None else None
            return (True, None if record is None else record.user), record is not None
        if self.store is None:
            return (False, None), True
        record = await self.store.get(stream_id)
        if record is not None:
            return (True, record.user), True
        try:  # a plain stream: settled once it exists (a run cannot take its id meanwhile)
            await self.log.info(stream_id)
        except StreamNotFoundError:
            return (False, None), False
        return (False, None), True

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
