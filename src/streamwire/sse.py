"""The SSE wire codec: bytes to events and back, sans-I/O.

``SSEDecoder`` implements the WHATWG HTML "event stream" interpretation
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
exactly, with size limits; ``encode_frame`` and ``encode_comment`` write frames that no field value
can break out of. Nothing here does I/O or imports asyncio.

Strategy (decoder). Bytes that do not yet end a line wait in one ``bytearray``. Each ``feed`` finds
the *last* line terminator of the new data with single-byte ``rfind`` (memrchr); everything up to it
is a run of complete lines, decoded from UTF-8 once (invalid bytes become U+FFFD; a line terminator is
ASCII, so a multi-byte character never straddles a run), CR and CRLF folded to LF, and split in C.
The Python loop then touches each line once. A CR that ends one ``feed`` ends its line at once; a LF
that starts the next ``feed`` is dropped (no holding back, unlike eventsource-parser). Time is linear
in the input whatever the chunking; memory is bounded by ``max_line_size`` and ``max_event_size``.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Final, NoReturn, final

import msgspec

from .errors import SSEDecodeError, UsageError

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "DEFAULT_MAX_LINE_SIZE",
    "SSEDecoder",
    "SSEEvent",
    "encode_comment",
    "encode_frame",
]

#: Default cap on one line (bytes). LLM streams carry attachments as data URLs in one JSON line;
#: the TRD sizes them at 1-10 MB, so 32 MiB admits them with room, while a peer that never sends a
#: line end cannot grow the buffer past it.
DEFAULT_MAX_LINE_SIZE: Final = 32 * 1024 * 1024
#: Default cap on the data of one event (characters, which is bytes for the ASCII of JSON): the same
#: reasoning as the line cap, for events made of many ``data:`` lines.
DEFAULT_MAX_EVENT_SIZE: Final = 32 * 1024 * 1024
# Longer ``retry`` values (over 10**18 ms, thirty million years) are ignored rather than handed to
# ``int()``, whose digit limit would raise on hostile input.
_MAX_RETRY_DIGITS: Final = 18
_BOM: Final = "\ufeff"


@final
class SSEEvent(msgspec.Struct, frozen=True, gc=False):
    """One dispatched event, as a browser's ``MessageEvent`` would see it.

    ``id`` is the last event ID in force at dispatch (``lastEventId``; "" before any) and ``retry``
    the reconnection time in milliseconds in force, or None if the stream never set one.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


class SSEDecoder:
    """Incremental WHATWG event-stream decoder: ``feed`` bytes, get events; ``flush`` at the end.

    Args:
        max_line_size: the most bytes one line may hold before its end arrives.
        max_event_size: the most characters of data one event may accumulate.
        on_comment: called with the text of each comment line (after the colon, one leading space
            removed), in stream order, before the events of the same ``feed`` are returned. Comments
            are how a quiet stream shows it is alive; with no callback they cost nothing.

    Raises:
        SSEDecodeError: from ``feed``/``flush`` when a limit is exceeded. Its ``limit`` attribute
            names the keyword to raise, and ``events`` holds the events decoded before the error.
    """

    __slots__ = (
        "_buf",
        "_data",
        "_data_checked",
        "_data_size",
        "_event",
        "_finished",
        "_id",
        "_max_event",
        "_max_line",
        "_on_comment",
        "_retry",
        "_skip_lf",
        "_started",
        "last_event_id",
    )

    def __init__(
        self,
        *,
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        on_comment: Callable[[str], object] | None = None,
    ) -> None:
        if max_line_size < 1 or max_event_size < 1:
            raise ValueError("max_line_size and max_event_size must be positive")
        self._max_line = max_line_size
        self._max_event = max_event_size
        self._on_comment = on_comment
        self._buf = bytearray()
        self._skip_lf = False
        self._started = False
        self._finished = False
        # The event being built: data lines, type buffer, last-event-ID buffer, reconnection time.
        self._data: list[str] = []
        self._data_checked = 0
        self._data_size = 0
        self._event = ""
        self._id = ""
        self._retry: int | None = None
        #: The last event ID string as of the last blank line (what a reconnect sends).
        self.last_event_id = ""

    @property
    def retry(self) -> int | None:
        """The reconnection time (ms) the stream set, or None."""
        return self._retry

    def feed(self, data: bytes | bytearray) -> list[SSEEvent]:
        """Decode more bytes; return the events they complete (possibly none)."""
        if self._finished:
            raise UsageError("SSEDecoder.feed() after flush(): use a new decoder per stream")
        if not data:
            return []
        if self._skip_lf:
            # The previous feed ended in CR, which ended its line; a LF now is that CRLF's tail.
            self._skip_lf = False
            if data[0] == 10:
                data = data[1:]
                if not data:
                    return []
        end = data.rfind(b"\n")
        cr = data.rfind(b"\r")
        if cr > end:
            end = cr
        buf = self._buf
        if end < 0:
            buf += data
            if len(buf) > self._max_line:
                self._line_too_long(len(buf), [])
            return []
        stop = end + 1
        if buf:
            buf += data[:stop]
            region = bytes(buf)
            buf.clear()
        else:
            region = bytes(data[:stop])
        if stop < len(data):
            buf += data[stop:]
            if len(buf) > self._max_line:
                events = self._lines(region)
                self._line_too_long(len(buf), events)
        else:
            self._skip_lf = data[end] == 13
        return self._lines(region)

    def flush(self) -> list[SSEEvent]:
        """End of stream: deliver the last event even without its closing blank line (wire v2).

        The WHATWG algorithm discards an unterminated event at end of file; call ``flush`` only
        where the protocol says a last frame may lack its blank line. The decoder is done afterwards.
        """
        if self._finished:
            return []
        events: list[SSEEvent] = []
        if self._buf:
            tail = bytes(self._buf) + b"\n"
            self._buf.clear()
            events = self._lines(tail)
        if self._data:
            events.extend(self._lines(b"\n"))
        self._finished = True
        return events

    # -- internals -------------------------------------------------------------------------------

    def _lines(self, region: bytes) -> list[SSEEvent]:
        """Interpret a run of complete lines (``region`` ends with a line terminator)."""
        text = region.decode("utf-8", "replace")
        if not self._started:
            self._started = True
            if text.startswith(_BOM):  # one leading BOM, at stream start only
                text = text[1:]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if len(region) > self._max_line:
            longest = max(map(len, region.splitlines()))
            if longest > self._max_line:
                self._line_too_long(longest, [])
        lines = text.split("\n")
        lines.pop()  # the region ends with a terminator, so the last piece is always ""

        events: list[SSEEvent] = []
        data = self._data
        etype = self._event
        last_id = self._id
        retry = self._retry
        on_comment = self._on_comment
        for line in lines:
            if not line:
                # Dispatch (WHATWG "dispatch the event"): lastEventId takes the buffer's value even
                # when nothing is dispatched; an empty data buffer dispatches nothing.
                self.last_event_id = last_id
                if data:
                    value = data[0] if len(data) == 1 else "\n".join(data)
                    if len(value) > self._max_event:
                        self._event_too_big(len(value), events)
                    events.append(SSEEvent(etype or "message", value, last_id, retry))
                    data = []
                    self._data_checked = self._data_size = 0
                etype = ""
                continue
            field, colon, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "id":
                if "\x00" not in value:
                    last_id = value
            elif field == "event":
                etype = value
            elif field == "retry":
                if value.isascii() and value.isdigit() and len(value) <= _MAX_RETRY_DIGITS:
                    retry = int(value)
            elif not field and colon and on_comment is not None:
                on_comment(value)
            # any other field is ignored
        self._data = data
        self._event = etype
        self._id = last_id
        self._retry = retry
        if data:
            # An event is still open: count what this run added, so the cost stays linear.
            checked = self._data_checked
            self._data_size += sum(map(len, islice(data, checked, None))) + len(data) - checked
            self._data_checked = len(data)
            if self._data_size > self._max_event:
                self._event_too_big(self._data_size, events)
        return events

    def _line_too_long(self, size: int, events: list[SSEEvent]) -> NoReturn:
        self._finished = True
        raise SSEDecodeError(
            f"SSE line of {size} bytes exceeds max_line_size={self._max_line}; "
            "pass a larger max_line_size to the decoder (or the client) if this stream is trusted",
            limit="max_line_size",
            events=events,
        )

    def _event_too_big(self, size: int, events: list[SSEEvent]) -> NoReturn:
        self._finished = True
        raise SSEDecodeError(
            f"SSE event data of {size} characters exceeds max_event_size={self._max_event}; "
            "pass a larger max_event_size to the decoder (or the client) if this stream is trusted",
            limit="max_event_size",
            events=events,
        )


def _check_field(name: str, value: str, *, nul: bool) -> None:
    if "\n" in value or "\r" in value or (nul and "\x00" in value):
        forbidden = "CR, LF or NUL" if nul else "CR or LF"
        raise ValueError(f"SSE {name} must not contain {forbidden} (frame injection): {value!r}")


def encode_frame(
    data: str,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> bytes:
    """Serialise one SSE event. Multi-line ``data`` (LF, CR or CRLF) becomes several ``data:`` lines.

    Raises:
        ValueError: ``event`` or ``id`` contains CR or LF, ``id`` contains NUL, or ``retry`` is not
            a non-negative int.
    """
    head = ""
    if event is not None:
        _check_field("event", event, nul=False)
        head = f"event: {event}\n"
    if id is not None:
        _check_field("id", id, nul=True)
        head = f"{head}id: {id}\n"
    if retry is not None:
        if type(retry) is not int or retry < 0:
            raise ValueError(f"SSE retry must be a non-negative int, got {retry!r}")
        head = f"{head}retry: {retry}\n"
    if "\n" in data or "\r" in data:
        data = data.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\ndata: ")
    return f"{head}data: {data}\n\n".encode()


def encode_comment(text: str = "") -> bytes:
    """Serialise a comment (``: text``), e.g. a heartbeat. Each line of ``text`` stays a comment."""
    if "\n" in text or "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\n: ")
    return f": {text}\n\n".encode() if text else b":\n\n"
