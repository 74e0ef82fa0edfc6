"""``StreamWriter[C]``: the TRD's typed server-side emitter over any ``SSEWritable``.

::

    writer = StreamWriter(writable, Chat, signal=signal)
    await writer.event(Chat.message_start({...}))
    await writer.event(Chat.chunk({"chunk": "hi"}))
    await writer.end("complete", message_id, user_message_id)

Behavioural contracts (the TRD's table):

* Write guard: after a terminal frame (``end``, ``error``, an abort, or a ``done``/``error`` message
  given to ``event``) every later ``event``, ``end`` and ``error`` is a silent no-op and ``closed``
  is True. At most one terminal frame is ever written.
* Abort: on ``signal`` abort, a reason that is a ``StreamEndReason`` sends ``done`` with that
  reason; any other reason (none, a non-string, an unknown string, an exception) sends
  ``error("Stream aborted unexpectedly")``. A signal already aborted at construction fires in the
  constructor. The frame is written synchronously (``SSEWritable.write`` never blocks).
* Message-ID tracking: a ``message_start`` event's ``assistantMessageId`` / ``userMessageId`` are
  remembered, and an abort's ``done`` carries them ("" before any ``message_start``).
* Validation: each payload is checked at write time with the reader's own rules (the event's
  msgspec decoder), so a payload the reader would drop as a parse error (``{"text": ...}`` for
  ``chunk``, a ``done`` reason outside ``StreamEndReason``) raises ``PayloadError`` in the producer
  instead of vanishing on the client. ``validate=False`` skips it on hot paths whose payloads are
  trusted. ``end`` always checks its reason (``UsageError`` naming the five valid values).
* An abort by ``SSEResponse`` because its producer raised or returned without a terminal frame
  carries a ``ProducerFailure``; the ``error`` frame then says which of the two happened.

``end`` and ``error`` exist only on writers whose contract is ``Chat`` or extends it: their ``self``
is ``StreamWriter[Chat]`` and the writer is covariant in its contract (mypy reports ``[misc]``,
pyright ``reportAttributeAccessIssue`` on any other writer). A bound TypeVar self-type would be
simpler but mypy 2.4 does not check the bound there.
A writer of a contract without the chat terminals answers an abort by ending the body.
"""

from __future__ import annotations

from typing import Any, Final, Generic, TypeVar, get_args

from .chat import Chat, StreamEndReason, is_stream_end_reason
from .contract import BoundEvent, Contract, Message
from .errors import PayloadError, UsageError
from .transport import AbortSignal, ProducerFailure, SSEWritable

__all__ = ["ABORT_ERROR_MESSAGE", "StreamWriter"]

# Covariant: a writer of ``MyChat(Chat)`` can do everything a ``Chat`` writer can (``event`` takes
# ``Message[C_co, Any]``, contravariant in ``C``), and the self-type of ``end``/``error`` relies on it.
C_co = TypeVar("C_co", bound=Contract, covariant=True)

#: The ``error`` text an abort with a reason that is not a ``StreamEndReason`` sends (TRD).
ABORT_ERROR_MESSAGE: Final = "Stream aborted unexpectedly"

_DONE: Final = Chat.done.name
_ERROR: Final = Chat.error.name
_MESSAGE_START: Final = Chat.message_start.name
# In the TRD's order (the Literal's; a frozenset's order varies between runs).
_VALID_REASONS: Final = ", ".join(get_args(StreamEndReason))


class StreamWriter(Generic[C_co]):
    """Writes the events of contract ``C_co`` to ``writable``; see the module docstring.

    Args:
        writable: the transport (``create_sse_writable``'s, ``MemoryWritable``, or your own).
        contract: the contract class; ``event`` refuses messages of events outside it.
        signal: aborting it ends the stream (``done`` with a valid reason, else ``error``).
        validate: check each payload against its event's type before writing it (default); pass
            False on a hot path whose payloads are already known to be valid.
    """

    __slots__ = (
        "_chat",
        "_closed",
        "_contract",
        "_end_reason",
        "_events",
        "_message_id",
        "_signal",
        "_user_message_id",
        "_validate",
        "_writable",
    )

    def __init__(self, writable: SSEWritable, contract: type[C_co], *,
                 signal: AbortSignal | None = None, validate: bool = True) -> None:
        self._writable = writable
        self._validate = validate
        self._contract = contract
        self._events = contract.events()
        self._chat = issubclass(contract, Chat)
        self._closed = False
        self._end_reason: StreamEndReason | None = None
        self._message_id = ""
        self._user_message_id = ""
        self._signal = signal
        if signal is not None:
            if signal.aborted:
                self._on_abort()  # TRD: a pre-aborted signal fires in the constructor
            else:
                signal.add_listener(self._on_abort)

    @property
    def closed(self) -> bool:
        """True once a terminal frame was written (or the stream ended by abort)."""
        return self._closed

    @property
    def end_reason(self) -> StreamEndReason | None:
        """The reason of the ``done`` frame written, or None (still open, or ended with ``error``)."""
        return self._end_reason

    @property
    def message_id(self) -> str:
        """The ``assistantMessageId`` of the last ``message_start`` written ("" before one)."""
        return self._message_id

    @property
    def user_message_id(self) -> str:
        """The ``userMessageId`` of the last ``message_start`` written ("" before one)."""
        return self._user_message_id

    async def event(self, msg: Message[C_co, Any]) -> None:
        """Write one event, then wait for the transport to drain (backpressure).

        A no-op once ``closed``. Raises ``UsageError`` if the event is not in the contract
        (only possible when the static check was bypassed), ``PayloadError`` if the payload
        cannot be encoded or (unless ``validate=False``) does not match the event's type.
        """
        if self._closed:
            return
        bound: BoundEvent[Any, Any] = msg.event
        name = bound.name
        if self._events.get(name) is not bound:
            raise UsageError(f"event {name!r} of {bound.contract.__qualname__} is not an event "
                             f"of {self._contract.__qualname__}")
        raw = bound.encode(msg.data)
        if self._validate:
            _check(bound, raw)
        data = raw.decode()
        if self._chat:
            if name == _MESSAGE_START:
                self._message_id = msg.data["assistantMessageId"]
                self._user_message_id = msg.data["userMessageId"]
            elif name in (_DONE, _ERROR):
                self._terminal(name, data, msg.data["reason"] if name == _DONE else None)
                await self._writable.drain()
                return
        self._writable.write(name, data)
        await self._writable.drain()

    async def end(self: StreamWriter[Chat], reason: StreamEndReason, message_id: str,
                  user_message_id: str) -> None:
        """Write the terminal ``done`` event; a no-op once ``closed``.

        Raises ``UsageError`` if ``reason`` is not a ``StreamEndReason`` (checked even when
        closed, and whatever ``validate`` says: a wrong word here is never a hot-path cost).
        """
        if not is_stream_end_reason(reason):  # statically checked; untyped callers get here too
            raise _unknown_reason(reason)
        if self._closed:
            return
        self._done(reason, message_id, user_message_id)
        await self._writable.drain()

    async def error(self: StreamWriter[Chat], message: str) -> None:
        """Write the terminal ``error`` event (``error`` and ``message`` both ``message``)."""
        if self._closed:
            return
        self._fail(message)
        await self._writable.drain()

    # -- internals -------------------------------------------------------------------------------

    def _done(self, reason: StreamEndReason, message_id: str, user_message_id: str) -> None:
        payload = Chat.done.encode({"done": True, "messageId": message_id,
                                    "userMessageId": user_message_id, "reason": reason})
        self._terminal(_DONE, payload.decode(), reason)

    def _fail(self, message: str) -> None:
        payload = Chat.error.encode({"error": message, "message": message})
        self._terminal(_ERROR, payload.decode(), None)

    def _terminal(self, name: str, data: str, reason: StreamEndReason | None) -> None:
        # Closed before writing: a failing transport must not let a second terminal through.
        self._closed = True
        self._end_reason = reason
        if self._signal is not None:
            self._signal.remove_listener(self._on_abort)
        try:
            self._writable.write(name, data)
        finally:
            self._writable.end()

    def _on_abort(self) -> None:
        if self._closed:
            return
        signal = self._signal
        reason = signal.reason if signal is not None else None
        if not self._chat:
            self._closed = True
            self._writable.end()
        elif is_stream_end_reason(reason):
            self._done(reason, self._message_id, self._user_message_id)
        elif isinstance(reason, ProducerFailure):
            self._fail(f"{ABORT_ERROR_MESSAGE}: {reason.message}")
        else:
            self._fail(ABORT_ERROR_MESSAGE)


def _unknown_reason(reason: object) -> UsageError:
    hint = (' ("completed" is the durable profile\'s word; the direct profile\'s is "complete")'
            if reason == "completed" else "")
    return UsageError(f"end({reason!r}): the reason must be one of {_VALID_REASONS}{hint}")


def _check(bound: BoundEvent[Any, Any], raw: bytes) -> None:
    """Refuse a payload the reader would drop: decode it with the reader's own rules."""
    try:
        bound.decode(raw)
    except PayloadError as exc:
        raise PayloadError(
            f"{bound.contract.__qualname__}.{bound.attr}: the payload does not match the event's "
            f"type, so a reader would drop it: {exc} (payload: {raw[:200]!r}; "
            "StreamWriter(..., validate=False) skips this check)",
            event=bound.name, raw=raw) from None
