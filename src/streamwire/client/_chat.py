"""The Python chat transport: a run's durable reply read as the chat events of the Stream Module
TRD (``seeds/003_60bfba441a0f0128.txt``), over the resumable reader. It is the reader side of
"The chat reply" in the wire v2 seed (``seeds/000_e7e163321047a0a9.txt``): a forwarded run error
ends the reply as an error, and a body with no terminal frame is a drop.

::

    async with AsyncChatReply(client, f"{base}/runs/{run_id}/sse") as reply:
        await StreamReader(reply, Chat).on(Chat.chunk, show).on(Chat.done, finish).consume()

    with ChatReply(client, url) as reply:                  # httpx.Client
        for msg in reply.messages(): ...                   # Message[Chat, Any]

``streamwire.aisdk.ChatReplyDecoder`` maps the frames (sans-I/O); this module adds what the wire
does to them: a drop re-attaches from the cursor (``StreamOptions``: ``retry``, ``cursor``...); a
``fail`` frame becomes the chat ``error`` event and the reply ends (a recoverable one once the
re-attach attempts run out); ``truncated`` raises ``StreamTruncatedError``; a body that keeps
ending with no terminal frame raises ``StreamDropError`` into the consumer once the attempts run
out (never a clean end). Closing the reply (an abort by its caller) ends it quietly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any, Unpack

import httpx

from ..aisdk import ChatReplyDecoder
from ..chat import Chat
from ..contract import Message
from ..errors import RetriesExhaustedError, StreamDropError, StreamFailedError
from ..frames import FailFrame, TerminalFrame
from ..sse import SSEEvent
from ._async import AsyncResumableStream
from ._base import StreamOptions
from ._sync import ResumableStream

__all__ = ["AsyncChatReply", "ChatReply"]


def _settle(exc: StreamFailedError | RetriesExhaustedError) -> FailFrame:
    """The ``fail`` frame a failed read ends the reply with, or raise what the consumer gets."""
    if isinstance(exc, RetriesExhaustedError):
        last = exc.last_error
        if isinstance(last, StreamDropError):
            raise StreamDropError(f"the reply's stream kept ending without a terminal frame: "
                                  f"{exc}", cursor=last.cursor) from exc
        if not isinstance(last, StreamFailedError):
            raise exc
        exc = last
    return FailFrame(exc.error, exc.recoverable, exc.error_detail)


def _message(event: SSEEvent) -> Message[Chat, Any]:
    bound = Chat.event_named(event.event)
    assert bound is not None  # the decoder yields Chat events only
    return Message(bound, bound.decode(event.data))


class AsyncChatReply:
    """A run's reply as chat events, over an ``httpx.AsyncClient`` (module docstring).

    Args:
        client: the client (not closed by the reply).
        url: the run's wire v2 stream (``/runs/{id}/sse`` or ``/streams/{id}/sse``).
        message_id, user_message_id: the ids ``done`` carries if the reply sends no
            ``message_start``.
        options: the resumable reader's ``StreamOptions``.
    """

    def __init__(self, client: httpx.AsyncClient, url: str | httpx.URL, *, message_id: str = "",
                 user_message_id: str = "", **options: Unpack[StreamOptions]) -> None:
        self._stream = AsyncResumableStream(client, url, **options)
        self._decoder = ChatReplyDecoder(message_id=message_id, user_message_id=user_message_id)

    async def __aenter__(self) -> AsyncChatReply:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stream.aclose()

    async def aclose(self) -> None:
        """Abort the read (quietly: no terminal event, no error)."""
        await self._stream.aclose()

    def __aiter__(self) -> AsyncIterator[SSEEvent]:
        """The chat events as ``SSEEvent``s (what a ``StreamReader`` reads)."""
        return self._events()

    async def messages(self) -> AsyncIterator[Message[Chat, Any]]:
        """The chat events as validated ``Message``s (``PayloadError`` on a bad payload)."""
        async for event in self._events():
            yield _message(event)

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
            terminal = _settle(exc)
        if terminal is not None:  # None: the caller closed the reply
            yield decoder.terminal(terminal)


class ChatReply:
    """The sync twin of ``AsyncChatReply`` over an ``httpx.Client``."""

    def __init__(self, client: httpx.Client, url: str | httpx.URL, *, message_id: str = "",
                 user_message_id: str = "", **options: Unpack[StreamOptions]) -> None:
        self._stream = ResumableStream(client, url, **options)
        self._decoder = ChatReplyDecoder(message_id=message_id, user_message_id=user_message_id)

    def __enter__(self) -> ChatReply:
        self._stream.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stream.close()

    def close(self) -> None:
        """Abort the read (quietly), also from another thread."""
        self._stream.close()

    def __iter__(self) -> Iterator[SSEEvent]:
        """The chat events as ``SSEEvent``s (what ``StreamReader.consume_sync`` reads)."""
        return self._events()

    def messages(self) -> Iterator[Message[Chat, Any]]:
        """The chat events as validated ``Message``s."""
        for event in self._events():
            yield _message(event)

    def _events(self) -> Iterator[SSEEvent]:
        decoder = self._decoder
        terminal: TerminalFrame | None
        try:
            for chunk in self._stream:
                event = decoder.event(chunk)
                if event is not None:
                    yield event
            terminal = self._stream.end_frame
        except (StreamFailedError, RetriesExhaustedError) as exc:
            terminal = _settle(exc)
        if terminal is not None:
            yield decoder.terminal(terminal)
