"""The SSE decoder: bytes to events (the package docstring has the strategy)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Final, NoReturn, final

import msgspec

from ..errors import SSEDecodeError, UsageError

__all__ = ["DEFAULT_MAX_EVENT_SIZE", "DEFAULT_MAX_LINE_SIZE", "SSEDecoder", "SSEEvent"]

#: Default cap on one line (bytes). LLM streams carry attachments as data URLs in one JSON line;
#: the Stream Module TRD (``seeds/003_60bfba441a0f0128.txt``) sizes them at 1-10 MB, so 32 MiB
#: admits them with room, while a peer that never sends a line end cannot grow the buffer past it.
DEFAULT_MAX_LINE_SIZE: Final = 32 * 1024 * 1024
#: Default cap on the data of one event (characters, which is bytes for the ASCII of JSON): the same
#: reasoning as the line cap, for events made of many ``data:`` lines.
DEFAULT_MAX_EVENT_SIZE: Final = 32 * 1024 * 1024
# Longer ``retry`` values (over 10**18 ms, thirty million years) are ignored rather than handed to
# ``int()``, whose digit limit would raise on hostile input.
_MAX_RETRY_DIGITS: Final = 18
_BOM: Final = b"\xef\xbb\xbf"
# A buffered line at least this long is ended without copying it (see ``_end_long_data_line``); below
# it, copies are cheaper than the bookkeeping.
_LONG_LINE: Final = 64 * 1024
# The hot loop tells a "data: " line by ``line.removeprefix(b"data: ") is not line``: for an exact
# bytes object without the prefix, CPython returns the object itself. That is an implementation
# detail, so it is checked once here: an interpreter that copied would misread every line.
_PROBE: Final = b"x"
if _PROBE.removeprefix(b"y") is not _PROBE:  # pragma: no cover
    raise ImportError("streamwire.sse needs bytes.removeprefix to return the object itself when "
                      "the prefix is absent (CPython does)")
# SSEDecoder._mode bits.
_FRESH: Final = 1  # nothing decoded yet: a BOM may come
_SKIP_LF: Final = 2  # the last feed ended in CR: a LF starting the next one is its CRLF's tail
_DONE: Final = 4  # flushed or failed
_FLUSH: Final = 8  # interpret every complete line now: hold nothing back
# Pieces that end one data/id/event line are held back (see ``feed``) while the buffer stays under
# this size: enough for the usual small frame, small enough that holding costs nothing.
_HOLD_LIMIT: Final = 256


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
        max_event_size: the most characters of data (data lines joined by LF) one event may hold.
        on_comment: called with the text of each comment line (after the colon, one leading space
            removed), in stream order, before the events of the same ``feed`` are returned. Comments
            are how a quiet stream shows it is alive; with no callback they cost nothing.
        retry: the reconnection time (ms) in force before the stream sets one with ``retry:``. A
            reader that reconnects passes the value the previous connection left (``.retry``), as
            an ``EventSource`` keeps its reconnection time across connections.

    Raises:
        SSEDecodeError: from ``feed``/``flush`` when a limit is exceeded. Its ``limit`` attribute
            names the keyword to raise, and ``events`` holds the events decoded before the error.
            The decoder is finished afterwards.
        UsageError: ``feed`` after ``flush`` or after an ``SSEDecodeError``.
    """

    __slots__ = (
        "_buf",
        "_counted",
        "_data",
        "_data_size",
        "_event",
        "_exact",
        "_hold_limit",
        "_id",
        "_limit",
        "_max_event",
        "_max_line",
        "_measured",
        "_mode",
        "_more",
        "_on_comment",
        "_retry",
        "_type_line",
        "_type_name",
        "last_event_id",
    )

    def __init__(
        self,
        *,
        max_line_size: int = DEFAULT_MAX_LINE_SIZE,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        on_comment: Callable[[str], object] | None = None,
        retry: int | None = None,
    ) -> None:
        if max_line_size < 1 or max_event_size < 1:
            raise ValueError("max_line_size and max_event_size must be positive")
        if retry is not None and (type(retry) is not int or retry < 0):
            raise ValueError(f"retry must be a non-negative int (milliseconds), got {retry!r}")
        self._max_line = max_line_size
        self._max_event = max_event_size
        # What the no-line-end path compares the buffer with: max_line_size, or -1 once finished,
        # so that one comparison also refuses a feed after flush().
        self._limit = max_line_size
        # Held lines can never hide a line or an event over its limit (see feed).
        self._hold_limit = min(_HOLD_LIMIT, max_line_size, max_event_size)
        self._on_comment = on_comment
        self._buf = bytearray()  # the line whose end has not arrived
        self._mode = _FRESH  # the rare states, in one int so that the usual path tests it once
        # The event being built (WHATWG's data, event type and last event ID buffers) and the
        # reconnection time. The data buffer is its first line (None: empty) and the lines after it.
        self._data: str | None = None
        self._more: list[str] = []
        self._event = "message"
        self._id = ""
        self._retry = retry
        # The last ``event:`` line and its type: streams repeat a few types, and a repeated line is
        # recognised by one comparison instead of being split and decoded again.
        self._type_line: bytes = b""
        self._type_name = "message"
        # Size of the open event's data: a cheap upper bound (``_data_size``), and an exact count of
        # the first ``_counted`` lines of ``_measured``, taken only when the bound passes the limit.
        self._data_size = 0
        self._measured: list[str] | None = None
        self._counted = 0
        self._exact = 0
        #: The last event ID string as of the last blank line (what a reconnect sends).
        self.last_event_id = ""

    @property
    def retry(self) -> int | None:
        """The reconnection time (ms) the stream set, or None."""
        return self._retry

    def feed(self, data: bytes | bytearray) -> list[SSEEvent]:
        """Decode more bytes; return the events they complete (possibly none)."""
        if 10 not in data and 13 not in data:
            # No line end: the bytes only extend the current line (tiny network pieces, or a line
            # of megabytes arriving in pieces). bytearray ``+=`` is amortised O(1) per byte.
            buf = self._buf
            buf += data
            if len(buf) > self._limit:
                self._overlong()
            return []
        if type(data) is not bytes:
            data = bytes(data)
        buf = self._buf
        mode = self._mode
        if mode:
            if mode & _DONE:
                self._refuse()
            if mode & _SKIP_LF:
                # The last run ended in CR, which ended its line: a LF now is that CRLF's tail.
                self._mode = mode = mode & ~_SKIP_LF
                if data[0] == 10 and not buf:
                    return self.feed(data[1:])
        elif (
            len(data) < self._hold_limit
            and len(buf) + len(data) + self._data_size <= self._hold_limit
            and 13 not in data
            and data.count(10) == 1
        ):
            # Small pieces (a slow or finely chunked connection) that only end a data, id or event
            # line are held in the buffer: such lines change nothing until the blank line that
            # dispatches them, so they are interpreted then, together. Blank lines, comments
            # (heartbeats) and retry lines are never held.
            start = buf.rfind(10) + 1
            first = buf[start] if start < len(buf) else data[0]  # LF here: a blank line
            if first == 100 or first == 105 or first == 101:  # d, i, e
                buf += data
                return []
        return self._lines(data, mode)

    def _lines(self, data: bytes, mode: int) -> list[SSEEvent]:
        """Interpret ``data`` (which holds a line end) after the buffered start of its first line.

        Kept apart from ``feed`` so that feed's frame stays small: most feeds of a slow stream
        take feed's first few lines only.
        """
        buf = self._buf
        if buf:
            if 10 in buf:  # lines held back by earlier feeds
                buf += data
                data = bytes(buf)
                buf.clear()
            elif len(buf) >= _LONG_LINE and buf.startswith(b"data:"):
                return self._end_long_data_line(data)

        # Split the new bytes into lines. The last piece (b"" when they end with a line end) is the
        # start of the next line and goes into the buffer; what the buffer held (never a line
        # end) is the start of the first line.
        new_mode = 0
        if 13 in data:
            # bytes.splitlines (unlike str's) breaks at CRLF, LF and CR only: SSE's line ends, in
            # one pass. It drops the empty piece after a final line end, which split() would give.
            lines = data.splitlines()
            last = data[-1]
            if last == 13:
                # That CR ended its line; a LF starting the next feed will be its CRLF's tail.
                new_mode = _SKIP_LF
                lines.append(b"")
            elif last == 10:
                lines.append(b"")
        else:
            lines = data.split(b"\n")
        size = len(data)
        nul = 0 in data
        if buf:
            size += len(buf)
            if 0 in buf:
                nul = True
            buf += lines[0]
            lines[0] = bytes(buf)
            buf.clear()
        if mode or new_mode:
            self._mode = new_mode
            if mode & _FRESH and lines[0].startswith(_BOM):  # one BOM, at stream start only
                lines[0] = lines[0][3:]
        tail = lines.pop()
        if tail:
            buf += tail
        overflow = 0
        if size > self._max_line:
            if len(tail) > self._max_line:
                overflow = len(tail)  # raised below, with the events of the complete lines
            too_long = [i for i, line in enumerate(lines) if len(line) > self._max_line]
            if too_long:
                # Interpret the lines before the first one over the limit (their events go into
                # the error), then raise.
                overflow = len(lines[too_long[0]])
                del lines[too_long[0] :]

        # The hot loop: state lives in locals; a "data: " or "id: " line costs one C call and one
        # copy of its value; UTF-8 is decoded strictly first (the fast path), with replacement
        # only if that fails.
        bound = size + self._data_size  # no event dispatched here can hold more data than this
        events: list[SSEEvent] = []
        append = events.append
        data_ = self._data
        more = self._more
        etype = self._event
        last_id = self._id
        retry = self._retry
        type_line = self._type_line
        type_name = self._type_name
        dispatched: str | None = None
        for line in lines:
            if not line:
                # WHATWG "dispatch the event": lastEventId takes the buffer's value even when
                # nothing is dispatched; an empty data buffer dispatches nothing.
                dispatched = last_id
                if data_ is not None:
                    if more:
                        data_ = "\n".join([data_, *more])
                        self._more = more = []
                    append(SSEEvent(etype, data_, last_id, retry))
                    data_ = None
                etype = "message"
                continue
            if line == type_line:
                etype = type_name
                continue
            # The usual lines ("data: ..." and "id: ..."), each recognised by one C call that
            # allocates only the value (see _PROBE).
            raw = line.removeprefix(b"data: ")
            if raw is not line:
                if data_ is None:
                    try:
                        data_ = raw.decode()
                    except UnicodeDecodeError:
                        data_ = raw.decode("utf-8", "replace")
                else:
                    more.append(raw.decode("utf-8", "replace"))
                continue
            raw = line.removeprefix(b"id: ")
            if raw is not line:
                if not (nul and 0 in raw):  # an id containing NUL is ignored
                    try:
                        last_id = raw.decode()
                    except UnicodeDecodeError:
                        last_id = raw.decode("utf-8", "replace")
                continue
            # Every other shape, by the letter of the spec: the field name is everything up to the
            # first colon, and one leading space is removed from the value.
            name, colon, raw = line.partition(b":")
            if raw[:1] == b" ":
                raw = raw[1:]
            value = raw.decode("utf-8", "replace")
            if name == b"event":
                etype = value or "message"
                self._type_line = type_line = line
                self._type_name = type_name = etype
            elif name == b"data":
                if data_ is None:
                    data_ = value
                else:
                    more.append(value)
            elif name == b"id":
                if 0 not in raw:
                    last_id = value
            elif name == b"retry":
                # WHATWG: only if the value is all ASCII digits (bytes.isdigit is ASCII-only).
                if raw.isdigit() and len(raw) <= _MAX_RETRY_DIGITS:
                    self._retry = retry = int(raw)
            elif not name and colon and self._on_comment is not None:
                self._on_comment(value)
            # any other field is ignored

        self._id = last_id
        self._event = etype
        if bound > self._max_event:
            self._check_sizes(events)
        if dispatched is None:
            # No blank line: the open event (if any) went on through the whole run.
            if data_ is not None:
                self._data = data_
                self._data_size = bound
                if bound > self._max_event:
                    self._data_size = self._measure(data_, more, events)
        else:
            self.last_event_id = dispatched
            self._data = data_
            if data_ is None:
                self._data_size = 0
            else:
                # The open event began after the run's last blank line.
                self._data_size = size
                if size > self._max_event:
                    self._data_size = self._measure(data_, more, events)
        if overflow:
            self._line_too_long(overflow, events)
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: deliver the last event even without its closing blank line (wire v2).

        The end of the stream acts as a blank line: it dispatches the open event and puts a last
        ``id:`` line in force (``last_event_id``).

        The WHATWG algorithm discards an unterminated event at end of file; call ``flush`` only
        where the protocol says a last frame may lack its blank line. The decoder is done afterwards.
        """
        if self._mode & _DONE:
            return []
        # The end of the stream ends the last line and then, like a blank line, the last event (a LF
        # is not a CRLF's tail now, and nothing is held back).
        self._mode = (self._mode & _FRESH) | _FLUSH
        rest = bytes(self._buf)  # held lines (see feed) and the unterminated last line
        self._buf.clear()
        if rest and rest[-1] != 10:
            rest += b"\n"
        events = self.feed(rest + b"\n")
        self._finish()
        return events

    # -- internals -------------------------------------------------------------------------------

    def _end_long_data_line(self, data: bytes | bytearray) -> list[SSEEvent]:
        """A long buffered data line ends in ``data``: take its value without copying it.

        Copies of a multi-megabyte line cost more than parsing it, so the buffer itself is cut
        (``del`` at the front of a bytearray is O(1)) and decoded once.
        """
        lf = data.find(10)
        cr = data.find(13)
        first = cr if lf < 0 or 0 <= cr < lf else lf
        buf = self._buf
        buf += data[:first]
        if len(buf) > self._max_line:
            self._line_too_long(len(buf), [])
        self._buf = bytearray()
        self._mode = 0
        skip = first + 1
        if data[first] == 13:
            if skip == len(data):
                self._mode = _SKIP_LF
            elif data[skip] == 10:
                skip += 1
        del buf[: 6 if len(buf) > 5 and buf[5] == 32 else 5]
        value = buf.decode("utf-8", "replace")
        if self._data is None:
            self._data = value
            self._data_size = len(value)
        else:
            self._more.append(value)
            self._data_size += len(value) + 1
            if self._data_size > self._max_event:
                self._data_size = self._measure(self._data, self._more, [])
        if len(value) > self._max_event:
            self._event_too_big(len(value), [])
        return self.feed(data[skip:]) if skip < len(data) else []

    def _overlong(self) -> None:
        """The buffer passed max_line_size: interpret any lines held in it, then look again."""
        if self._mode & _DONE:
            self._refuse()
        buf = self._buf
        end = buf.rfind(10) + 1
        if end:
            held = bytes(buf[:end])
            partial = bytes(buf[end:])
            buf.clear()
            self._mode |= _FLUSH
            self.feed(held)  # held lines hold no blank line, so this dispatches nothing
            self._buf += partial
        if len(self._buf) > self._max_line:
            self._line_too_long(len(self._buf), [])

    def _check_sizes(self, events: list[SSEEvent]) -> None:
        for i, event in enumerate(events):
            if len(event.data) > self._max_event:
                self._event_too_big(len(event.data), events[:i])

    def _measure(self, data: str, more: list[str], events: list[SSEEvent]) -> int:
        """Exact size of the open event's data, counting each line once; raise past the limit."""
        if self._measured is not more:
            self._measured = more
            self._counted = self._exact = 0
        counted = self._counted
        self._exact += sum(map(len, islice(more, counted, None))) + len(more) - counted
        self._counted = len(more)
        size = len(data) + self._exact
        if size > self._max_event:
            self._event_too_big(size, events)
        return size

    def _finish(self) -> None:
        self._mode = _DONE
        self._limit = -1
        self._buf = bytearray()
        self._data = None
        self._more = []

    def _refuse(self) -> NoReturn:
        raise UsageError(
            "SSEDecoder.feed() after flush() or a decode error: use a new decoder per stream"
        )

    def _line_too_long(self, size: int, events: list[SSEEvent]) -> NoReturn:
        self._finish()
        raise SSEDecodeError(
            f"SSE line of {size} bytes exceeds max_line_size={self._max_line}; "
            "pass a larger max_line_size to the decoder (or the client) if this stream is trusted",
            limit="max_line_size",
            events=events,
        )

    def _event_too_big(self, size: int, events: list[SSEEvent]) -> NoReturn:
        self._finish()
        raise SSEDecodeError(
            f"SSE event data of {size} characters exceeds max_event_size={self._max_event}; "
            "pass a larger max_event_size to the decoder (or the client) if this stream is trusted",
            limit="max_event_size",
            events=events,
        )

