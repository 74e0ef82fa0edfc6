"""Frames <-> SSE: ``encode_stream_frame``, ``stream_frame_to_sse``, ``decode_stream_frame`` and the
incremental ``FrameDecoder`` (bytes -> frames).

One msgspec encoder and one decoder per frame type, built at import (msgspec perf-tips). A chunk's
payload is ``msgspec.Raw``: it is copied through, never parsed, on both sides; only the envelope
``{sequence, chunk}`` and the SSE ``id:`` (which must equal the sequence) are checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final, final, get_args

import msgspec

from ..errors import MalformedFrameError, SSEDecodeError, StreamwireError
from ..sse import (
    DEFAULT_MAX_EVENT_SIZE,
    DEFAULT_MAX_LINE_SIZE,
    SSEDecoder,
    SSEEvent,
    encode_frame,
)
from ._types import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    EndStatus,
    FailFrame,
    RewoundFrame,
    SSEFields,
    StreamFrame,
    TruncatedFrame,
    UnknownFrame,
)

__all__ = [
    "FRAME_EVENTS",
    "FrameDecoder",
    "decode_stream_frame",
    "encode_stream_frame",
    "stream_frame_to_sse",
]

_END_STATUSES: Final = frozenset(get_args(EndStatus))
# How much of a bad frame's data an error message quotes.
_QUOTE: Final = 200


@final
class _TruncatedWire(msgspec.Struct, frozen=True, rename="camel"):
    # On the wire errorDetail is required (wire v2 seed, "Frames"); the public type defaults it.
    floor: Annotated[int, msgspec.Meta(ge=0)]
    error_detail: dict[str, Any]


#: Wire event name of each frame type (wire v2 seed, "Frames").
FRAME_EVENTS: Final[dict[type[Any], str]] = {
    ChunkFrame: "chunk",
    EndFrame: "end",
    FailFrame: "fail",
    TruncatedFrame: "truncated",
    RewoundFrame: "rewound",
    CaughtUpFrame: "caught-up",
}

_ENCODE: Final = msgspec.json.Encoder().encode
# A chunk frame: event line, id line, data line, blank line (exactly four LFs when the payload
# holds none). Field order and spacing are msgspec's, so both encoder paths give the same bytes.
_CHUNK_FRAME: Final = b'event: chunk\nid: %d\ndata: {"sequence":%d,"chunk":%b}\n\n'
# Where a line end of the payload would be: after the id line's LF, which is at index 17 + digits
# <= 33 (a sequence has at most 16 digits), while the payload starts at 45 + 2 * digits.
_PAYLOAD_START: Final = 45
_DECODERS: Final[dict[str, Callable[[str], Any]]] = {
    "chunk": msgspec.json.Decoder(ChunkFrame).decode,
    "end": msgspec.json.Decoder(EndFrame).decode,
    "fail": msgspec.json.Decoder(FailFrame).decode,
    "truncated": msgspec.json.Decoder(_TruncatedWire).decode,
    "rewound": msgspec.json.Decoder(RewoundFrame).decode,
    "caught-up": msgspec.json.Decoder(CaughtUpFrame).decode,
}


def _check(frame: StreamFrame | UnknownFrame) -> None:
    """Refuse to write what our own decoder would call malformed (ValueError, a caller bug)."""
    match frame:
        case ChunkFrame(sequence=seq):
            if type(seq) is not int or seq < 1:
                raise ValueError(f"chunk sequence must be an int >= 1, got {seq!r}")
        case EndFrame(status=status):
            if status not in _END_STATUSES:
                raise ValueError(f"end status must be one of {sorted(_END_STATUSES)}, got {status!r}")
        case TruncatedFrame(floor=floor, error_detail=detail):
            if floor < 0 or detail.get("code") != "TRUNCATED":
                raise ValueError(f"truncated needs floor >= 0 and errorDetail.code TRUNCATED: {frame!r}")
        case _:
            pass


def _data_lines(body: bytes) -> bytes:
    # A chunk payload is opaque JSON and may be pretty-printed: every line becomes a data line
    # (the decoder joins them with LF, which is JSON whitespace), so no payload can end a frame.
    body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return body.replace(b"\n", b"\ndata: ")


def encode_stream_frame(frame: StreamFrame | UnknownFrame) -> bytes:
    """Serialise one frame as SSE bytes; a chunk carries ``id: <sequence>``.

    A chunk's payload must be JSON text: it is copied through, never parsed (the log checks it on
    append; a reader would call a bad one malformed). A payload with line ends (pretty-printed
    JSON) is split over several ``data:`` lines, so it can never end the frame early.

    Raises:
        ValueError: the frame is one the decoder would reject (sequence < 1, unknown end status,
            a truncated frame whose ``errorDetail.code`` is not TRUNCATED).
        TypeError: a field holds a value JSON cannot encode.
    """
    if type(frame) is ChunkFrame:
        seq = frame.sequence
        if type(seq) is not int or seq < 1:
            _check(frame)
        # The hot path: one formatting call that reads the Raw's buffer in place (no JSON
        # encoder, no copy), then two scans proving the payload added no line end.
        out = _CHUNK_FRAME % (seq, seq, frame.chunk)
        # the last LF before the closing pair is the id line's (two byte searches, memchr)
        if out.rfind(b"\n", 0, -2) < _PAYLOAD_START and out.find(b"\r") < 0:
            return out
        body = _data_lines(_ENCODE(frame))
        return b"event: chunk\nid: %d\ndata: %b\n\n" % (seq, body)
    if type(frame) is UnknownFrame:
        return encode_frame(frame.data, event=frame.event, id=frame.id)  # tests, probes
    _check(frame)
    body = _ENCODE(frame)
    if b"\n" in body or b"\r" in body:
        body = _data_lines(body)
    return b"event: %b\ndata: %b\n\n" % (FRAME_EVENTS[type(frame)].encode(), body)


def stream_frame_to_sse(frame: StreamFrame) -> SSEFields:
    """A frame's unserialised SSE fields: event name, JSON data, and the id (chunks only)."""
    _check(frame)
    data = _ENCODE(frame).decode()
    if type(frame) is ChunkFrame:
        return SSEFields("chunk", data, str(frame.sequence))
    return SSEFields(FRAME_EVENTS[type(frame)], data)


def _malformed(event: SSEEvent, why: str) -> MalformedFrameError:
    quoted = event.data if len(event.data) <= _QUOTE else event.data[:_QUOTE] + "..."
    return MalformedFrameError(
        f"malformed {event.event!r} frame: {why}; data: {quoted!r}", event=event.event,
        data=event.data)


def decode_stream_frame(event: SSEEvent) -> StreamFrame | UnknownFrame:
    """Decode one SSE event into its frame.

    An event this version does not know (``error``, ``message``, ...) is an ``UnknownFrame``,
    whatever its data: readers ignore it.

    Raises:
        MalformedFrameError: a known event whose JSON or envelope does not validate, a chunk whose
            SSE ``id`` is not its sequence, or a ``truncated`` frame whose ``errorDetail.code`` is not
            TRUNCATED (retryable: re-attach from the cursor; never a skip, never an end).
    """
    decode = _DECODERS.get(event.event)
    if decode is None:
        return UnknownFrame(event.event, event.data)
    try:
        frame = decode(event.data)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise _malformed(event, str(exc)) from None
    if type(frame) is ChunkFrame:
        if event.id != str(frame.sequence):
            raise _malformed(event, f"SSE id {event.id!r} is not the sequence {frame.sequence}")
        return frame
    if type(frame) is _TruncatedWire:
        # No back-compat: the v1 "fail + code TRUNCATED" overload is gone, and a truncated frame is
        # always the retention-floor terminal, never the v1 cleanup marker (that is rewound).
        if frame.error_detail.get("code") != "TRUNCATED":
            raise _malformed(event, "errorDetail.code must be 'TRUNCATED'")
        return TruncatedFrame(frame.floor, frame.error_detail)
    return frame  # type: ignore[no-any-return]


class FrameDecoder:
    """Incremental bytes -> frames decoder over ``streamwire.sse.SSEDecoder`` (LF and CRLF).

    ``feed`` returns the frames the bytes complete; ``flush`` at the end of the body delivers a
    last frame that has no closing blank line (wire v2). Comments (heartbeats, ``: waiting``) are
    not frames: they go to ``on_comment``. ``retry`` is the reconnection time (ms) in force before
    the stream sets one (a re-attaching reader passes the previous connection's ``.retry``).
    ``unknown_ids=True`` keeps each unknown event's SSE id in ``UnknownFrame.id``.

    An error waits behind the frames decoded before it: the call returns those frames and the next
    call raises it (at once when there are none), so no good frame is lost; ``error`` shows it
    meanwhile, so a reader can stop reading at once. From then on every call raises the same error
    (sticky): the connection is unusable; re-attach with a new decoder.

    Raises:
        MalformedFrameError: see ``decode_stream_frame`` (retryable).
        SSEDecodeError: a line or event over ``max_line_size`` / ``max_event_size``.
    """

    __slots__ = ("_error", "_sse", "_unknown_ids")

    def __init__(
        self,
        *,
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        on_comment: Callable[[str], object] | None = None,
        retry: int | None = None,
        unknown_ids: bool = False,
    ) -> None:
        self._sse = SSEDecoder(max_line_size=max_line_size, max_event_size=max_event_size,
                               on_comment=on_comment, retry=retry)
        self._error: StreamwireError | None = None
        self._unknown_ids = unknown_ids

    @property
    def last_event_id(self) -> str:
        """The last SSE ``id`` seen (for a chunk stream: the last sequence, as text)."""
        return self._sse.last_event_id

    @property
    def retry(self) -> int | None:
        """The reconnection time (ms) in force (the stream's ``retry:``, else the one passed in)."""
        return self._sse.retry

    @property
    def error(self) -> StreamwireError | None:
        """The error that stopped this decoder (the next call raises it), or None."""
        return self._error

    def feed(self, data: bytes | bytearray) -> list[StreamFrame | UnknownFrame]:
        """Decode more bytes; return the frames they complete (possibly none)."""
        if self._error is not None:
            raise self._error
        try:
            events = self._sse.feed(data)
        except SSEDecodeError as exc:
            return self._limit(exc)
        return self._deliver(events)

    def flush(self) -> list[StreamFrame | UnknownFrame]:
        """End of body: deliver a last frame that lacks its closing blank line."""
        if self._error is not None:
            raise self._error
        try:
            events = self._sse.flush()
        except SSEDecodeError as exc:
            return self._limit(exc)
        return self._deliver(events)

    def _limit(self, exc: SSEDecodeError) -> list[StreamFrame | UnknownFrame]:
        out = self._deliver(exc.events)  # the events complete before the limit tripped
        if self._error is None:
            self._error = exc
        if not out:
            raise self._error
        return out

    def _deliver(self, events: list[SSEEvent]) -> list[StreamFrame | UnknownFrame]:
        out: list[StreamFrame | UnknownFrame] = []
        try:
            self._frames(events, out)
        except MalformedFrameError as exc:
            self._error = exc
            if not out:
                raise
        return out

    def _frames(self, events: list[SSEEvent], out: list[StreamFrame | UnknownFrame]) -> None:
        append = out.append
        chunk_decode = _DECODERS["chunk"]
        unknown_ids = self._unknown_ids
        for event in events:
            if event.event == "chunk":
                # The hot path, inlined: one msgspec call and one id check per chunk.
                try:
                    frame = chunk_decode(event.data)
                except msgspec.DecodeError:
                    frame = None
                if frame is not None and event.id == str(frame.sequence):
                    append(frame)
                    continue
            elif unknown_ids and event.event not in _DECODERS:
                append(UnknownFrame(event.event, event.data, event.id))
                continue
            append(decode_stream_frame(event))
