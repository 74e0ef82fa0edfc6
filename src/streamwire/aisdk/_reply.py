"""``ChatReplyDecoder``: a run's durable frames -> the TRD's chat events (D-4's reader side, sans-I/O).

What a direct-profile reader expects, from what a durable stream holds:

* each chunk that carries a ``Chat`` event -> that event, its data passed through as sent (the
  ``StreamReader`` validates it, so a bad payload reaches its ``on_parse_error`` handlers);
* ``end`` -> ``done{reason}`` (``chat_terminal``), with the ids of the reply's ``message_start``
  when it sent one (else those given to the decoder);
* ``fail`` -> ``error{error, message}``, and the reply is over (the seed: "one error chunk, then
  done": the reading ends, no ``done`` event follows an ``error``);
* ``truncated`` -> ``StreamTruncatedError``; a body with no terminal is the reader's to retry.

``done`` and ``error`` events inside chunks are skipped: the terminal frame is the one end of a
reply. The tool and step events are ``Chat`` events like the others: they pass through.

An event the decoder's contract (``Chat``, or the app's contract that extends it) does not declare
is not passed on (a ``Message`` reader could not decode it) but it is not dropped silently either:
``undeclared`` counts it by name, for the reader to report (a newer server's event must not end an
older reader's reply, so it is no error). Give the decoder the app's contract and its own events
pass through like ``Chat``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, final

from ..chat import Chat
from ..contract import BoundEvent
from ..errors import PayloadError
from ..frames import ChunkFrame, TerminalFrame
from ..sse import SSEEvent
from ._chunks import split_message_chunk
from ._mapping import chat_terminal

__all__ = ["ChatReplyDecoder"]

_TERMINAL_EVENTS: Final = frozenset({"done", "error"})


@final
class ChatReplyDecoder:
    """Frames of a run's stream in, ``SSEEvent``s of the ``Chat`` contract out (module docstring).

    Args:
        message_id: the id ``done`` carries when the reply sent no ``message_start`` (whose
            ``assistantMessageId`` wins).
        user_message_id: likewise, the user message's (``message_start``'s ``userMessageId``
            wins).
        contract: the events passed on: ``Chat``'s, or those of a contract extending it.
    """

    __slots__ = ("_events", "message_id", "undeclared", "user_message_id")

    def __init__(self, *, message_id: str = "", user_message_id: str = "",
                 contract: type[Chat] = Chat) -> None:
        self.message_id = message_id
        self.user_message_id = user_message_id
        self._events: Mapping[str, BoundEvent[Any, Any]] = contract.events()
        #: Event name -> how many of its chunks were not passed on: the contract does not
        #: declare it.
        self.undeclared: dict[str, int] = {}

    def event(self, chunk: ChunkFrame) -> SSEEvent | None:
        """The chat event ``chunk`` carries (``id`` = its sequence), or None when skipped.

        Raises:
            PayloadError: the chunk is not a ``{"event", "data"}`` message.
        """
        envelope = split_message_chunk(chunk.chunk)  # the payload is the reader's to validate
        name = envelope.event
        if name in _TERMINAL_EVENTS:
            return None
        if name not in self._events:
            self.undeclared[name] = self.undeclared.get(name, 0) + 1
            return None
        data = bytes(envelope.data).decode()
        if name == "message_start":
            try:
                ids = Chat.message_start.decode(data)
            except PayloadError:
                pass  # the reader's on_parse_error handlers get it
            else:
                self.message_id = ids["assistantMessageId"]
                self.user_message_id = ids["userMessageId"]
        return SSEEvent(name, data, str(chunk.sequence))

    def terminal(self, frame: TerminalFrame) -> SSEEvent:
        """The chat event that ends the reply (``done`` or ``error``).

        Raises:
            StreamTruncatedError: ``frame`` is ``truncated``.
        """
        msg = chat_terminal(frame, message_id=self.message_id,
                            user_message_id=self.user_message_id)
        return SSEEvent(msg.name, msg.encode().decode())
