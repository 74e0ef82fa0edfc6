"""Contract-typed payloads inside chunks: a chunk's JSON is ``{"event": name, "data": payload}``,
one message of a ``Contract`` (the chat events inside ``chunk``, say).

Why the frames themselves are not declared with ``Contract`` / ``Event``: a contract maps an event
to a *payload*, validated into a TypedDict (a plain dict with camelCase keys) and rejected with a
non-retryable ``PayloadError``. A frame is an *envelope* with rules a contract cannot state: the
SSE ``id:`` of a chunk must equal its sequence, sequences start at 1, the chunk payload must pass
through unparsed (``msgspec.Raw``), a bad frame is a *retryable* ``MalformedFrameError`` (the
reader re-attaches) while an unknown event is ignored, and readers match on frame types
(``match frame: case ChunkFrame(sequence=s)``, with ``assert_never``), which wants frozen classes
with snake_case fields rather than dicts. So frames are msgspec Structs decoded in C, and
contracts type what the frames carry.

Statically: ``ChunkCodec[C]`` only encodes messages of ``C`` (or of a contract ``C`` extends) and
decodes to ``Message[C, Any]``, which ``is_event(msg, Chat.chunk)`` narrows to the payload type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Generic, TypeVar, cast, final

import msgspec

from ..contract import BoundEvent, Contract, Message
from ..errors import PayloadError
from ._types import ChunkFrame

__all__ = ["ChunkCodec", "decode_message_chunk", "encode_message_chunk", "envelope_chunk"]

C = TypeVar("C", bound=Contract)


@final
class _Envelope(msgspec.Struct, frozen=True, gc=False):
    event: str
    data: msgspec.Raw


_DECODE_ENVELOPE: Final = msgspec.json.Decoder(_Envelope).decode
_ENCODE_NAME: Final = msgspec.json.Encoder().encode


#: wire name -> the chunk's opening up to its payload (a few dozen names: kept for good)
_OPENINGS: Final[dict[str, bytes]] = {}


def envelope_chunk(name: str, data: bytes) -> bytes:
    """The chunk JSON ``{"event": <name>, "data": <data>}`` (``data``: a payload's JSON)."""
    opening = _OPENINGS.get(name)
    if opening is None:
        opening = _OPENINGS[name] = b'{"event":%b,"data":' % _ENCODE_NAME(name)
    return opening + data + b"}"


def encode_message_chunk(msg: Message[Any, Any]) -> bytes:
    """The chunk JSON that carries ``msg``: ``{"event": <wire name>, "data": <payload>}``.

    Raises:
        PayloadError: the payload cannot be encoded as JSON.
    """
    return envelope_chunk(msg.event.name, msg.encode())


def decode_message_chunk(
    chunk: ChunkFrame | msgspec.Raw | bytes | str, contract: type[C]
) -> Message[C, Any] | None:
    """The message of ``contract`` a chunk carries, validated against its payload type.

    Returns None for an event name the contract does not declare: like an unknown frame, a newer
    writer's event is ignored by an older reader (``ChunkCodec(strict=True)`` raises instead).

    Raises:
        PayloadError: the chunk is not a ``{"event", "data"}`` object, or the payload does not
            match the event's declared type.
    """
    return _decode(chunk, contract.events())


def _decode(chunk: ChunkFrame | msgspec.Raw | bytes | str,
            events: Mapping[str, BoundEvent[Any, Any]]) -> Message[Any, Any] | None:
    raw: Any = chunk.chunk if type(chunk) is ChunkFrame else chunk
    try:
        envelope = _DECODE_ENVELOPE(raw)
    except msgspec.DecodeError as exc:
        raise PayloadError(f'chunk is not a {{"event", "data"}} message: {exc}', event="chunk",
                           raw=bytes(raw) if type(raw) is msgspec.Raw else raw) from None
    event = events.get(envelope.event)
    if event is None:
        return None
    # msgspec reads the Raw's buffer directly: no copy of the payload.
    return Message(event, event.decode(cast(bytes, envelope.data)))


class ChunkCodec(Generic[C]):
    """Messages of one contract in and out of chunk frames, checked statically.

    ``ChunkCodec(Chat).frame(7, Chat.chunk({"chunk": "hi"}))`` builds the chunk frame; ``decode``
    returns ``Message[Chat, Any]`` (narrow it with ``is_event``), or None for an event the contract
    does not declare unless ``strict``.
    """

    __slots__ = ("_events", "contract", "strict")

    def __init__(self, contract: type[C], *, strict: bool = False) -> None:
        self.contract = contract
        self.strict = strict
        self._events = contract.events()

    def encode(self, msg: Message[C, Any]) -> bytes:
        """The chunk JSON for ``msg`` (see ``encode_message_chunk``)."""
        return encode_message_chunk(msg)

    def frame(self, sequence: int, msg: Message[C, Any]) -> ChunkFrame:
        """A chunk frame at ``sequence`` carrying ``msg``."""
        return ChunkFrame(sequence, msgspec.Raw(encode_message_chunk(msg)))

    def decode(self, chunk: ChunkFrame | msgspec.Raw | bytes | str) -> Message[C, Any] | None:
        """The message a chunk carries (see ``decode_message_chunk``).

        Raises:
            PayloadError: a bad envelope or payload, or (``strict``) an undeclared event.
        """
        msg: Message[C, Any] | None = _decode(chunk, self._events)
        if msg is None and self.strict:
            raw: Any = chunk.chunk if type(chunk) is ChunkFrame else chunk
            name = _DECODE_ENVELOPE(raw).event
            raise PayloadError(
                f"event {name!r} is not declared by {self.contract.__qualname__} "
                "(pass strict=False to ignore events a newer writer adds)", event=name,
                raw=bytes(raw) if type(raw) is msgspec.Raw else raw)
        return msg
