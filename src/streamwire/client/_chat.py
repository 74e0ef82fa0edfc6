"""The Python chat transport: a run's durable reply read as the chat events of the Stream Module
TRD (``seeds/003_60bfba441a0f0128.txt``), over the resumable reader. It is the reader side of
"The chat reply" in the wire v2 seed (``seeds/000_e7e163321047a0a9.txt``): a forwarded run error
ends the reply as an error, and a body with no terminal frame is a drop.

::

    async with AsyncChatReply(client, f"{base}/runs/{run_id}/sse") as reply:  # httpx.AsyncClient
        async for msg in reply.messages():
            ...  # Message[Chat, Any]

The reply is also an ``SSEReadable`` of the chat events: ``StreamReader(reply, Chat)`` reads it
(``consume()``; ``consume_sync()`` for the sync ``ChatReply``).

``streamwire.aisdk.ChatReplyDecoder`` maps the frames (sans-I/O; ``_chat_core`` holds the rest of
what the reply decides; ``_chat_sync.py`` is generated from ``_chat.py``); this module adds what
the wire does to them: a drop re-attaches from the cursor (``StreamOptions``: ``retry``,
``cursor``...); a ``fail`` frame becomes the chat ``error`` event and the reply ends (a
recoverable one once the re-attach attempts run out, or at once when a re-attach answers the same
stored ``fail`` again), its ``StreamFailedError`` kept as ``failure``; ``truncated`` raises
``StreamTruncatedError``; a body that keeps ending with no terminal frame raises
``StreamDropError`` into the consumer once the attempts run out (never a clean end). Closing the
reply (an abort by its caller) ends it quietly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Unpack

import httpx

from ..aisdk import ChatReplyDecoder
from ..chat import Chat
from ..contract import Message
from ..errors import RetriesExhaustedError, StreamFailedError
from ..frames import TerminalFrame
from ..sse import SSEEvent
from ._async import AsyncResumableStream
from ._base import StreamOptions
from ._chat_core import failure, message, settle

__all__ = ["AsyncChatReply"]


class AsyncChatReply:
    """A run's reply as chat events, over an ``httpx.AsyncClient`` (module docstring).

    Args:
        client: the client (not closed by the reply).
        url: the run's wire v2 stream (``/runs/{id}/sse`` or ``/streams/{id}/sse``).
        message_id: the id ``done`` carries if the reply sends no ``message_start``.
        user_message_id: likewise, the user message's.
        options: the resumable reader's ``StreamOptions``.
    """

    def __init__(self, client: httpx.AsyncClient, url: str | httpx.URL, *, message_id: str = "",
                 user_message_id: str = "", **options: Unpack[StreamOptions]) -> None:
        self._stream = AsyncResumableStream(client, url, **options)
        self._decoder = ChatReplyDecoder(message_id=message_id, user_message_id=user_message_id)
        #: The typed error a ``fail`` ended the reply with (its ``error_detail`` and
        #: ``recoverable``), once its ``error`` event was yielded; None otherwise.
        self.failure: StreamFailedError | None = None

    async def __aenter__(self) -> AsyncChatReply:
        await self._stream.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stream.aclose()

    async def aclose(self) -> None:
        """Abort the read, also from another task or thread (quietly: no terminal event, no
        error)."""
        await self._stream.aclose()

    def __aiter__(self) -> AsyncIterator[SSEEvent]:
        """The chat events as ``SSEEvent``s (what a ``StreamReader`` reads)."""
        return self._events()

    async def messages(self) -> AsyncIterator[Message[Chat, Any]]:
        """The chat events as validated ``Message``s (``PayloadError`` on a bad payload)."""
        async for event in self._events():
            yield message(event)

    async def _events(self) -> AsyncIterator[SSEEvent]:
        decoder = self._decoder
        terminal: TerminalFrame | None
        try:
            async for chunk in self._stream:
                event = decoder.event(chunk)
                if event is not None:
                    yield event
            terminal = self._stream.end_frame
        except (StreamFailedError, RetriesExhaustedError) as exc:
            terminal = settle(exc)
            self.failure = failure(exc)
        if terminal is not None:  # None: the caller closed the reply
            yield decoder.terminal(terminal)
