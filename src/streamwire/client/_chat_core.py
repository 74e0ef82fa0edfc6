"""What the async and sync chat replies (``_chat.py``, ``_chat_sync.py``) decide beyond moving
bytes: how a failed read ends the reply, and a chat event as a ``Message``. The frames themselves
map through ``streamwire.aisdk.ChatReplyDecoder``."""

from __future__ import annotations

from typing import Any

from ..chat import Chat
from ..contract import Message
from ..errors import RetriesExhaustedError, StreamDropError, StreamFailedError
from ..frames import FailFrame
from ..sse import SSEEvent

__all__ = ["failure", "message", "settle"]


def settle(exc: StreamFailedError | RetriesExhaustedError) -> FailFrame:
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


def failure(exc: StreamFailedError | RetriesExhaustedError) -> StreamFailedError:
    """The typed failure behind the ``fail`` frame ``settle`` ended the reply with."""
    if isinstance(exc, RetriesExhaustedError):
        assert isinstance(exc.last_error, StreamFailedError)  # settle raised otherwise
        return exc.last_error
    return exc


def message(event: SSEEvent) -> Message[Chat, Any]:
    """A chat event the reply yields, as its validated ``Message`` (``PayloadError`` if bad)."""
    bound = Chat.event_named(event.event)
    assert bound is not None  # the decoder yields Chat events only
    return Message(bound, bound.decode(event.data))
