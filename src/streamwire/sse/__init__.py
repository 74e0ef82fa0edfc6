"""The SSE wire codec: bytes to events and back, sans-I/O.

``SSEDecoder`` implements the WHATWG HTML "event stream" interpretation
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
exactly, with size limits; ``encode_frame`` and ``encode_comment`` write frames that no field value
can break out of. Nothing here does I/O or imports asyncio.

Strategy (decoder), measured in ``bench/bench_sse.py``:

- A feed with no line end only extends the current line: it is appended to one ``bytearray``
  (amortised O(1)) after two single-byte ``in`` tests (memchr); nothing else runs.
- Otherwise the new bytes are split into lines in C (one memchr split; CRLF streams one split on
  ``b"\r\n"``; only lone CRs pay for a rewrite) and the buffered start of the first line is joined
  to it. Lines stay bytes: each value is decoded alone, strictly first (the fast path) and with
  U+FFFD replacement only if that fails, so one emoji does not widen a whole run of text.
- The loop keeps the event being built in locals. A ``data: `` or ``id: `` line is recognised by
  ``removeprefix``, which allocates only the value; a repeated ``event:`` line by one comparison;
  anything else takes the exact WHATWG path. Events are built positionally.
- Small pieces that only end a data, id or event line are held back in the buffer and interpreted
  with the blank line that dispatches them (such lines change nothing before it); blank lines,
  comments and ``retry:`` are never held, and held lines never hide a limit.
- A data line of many megabytes that arrived in pieces is decoded straight from the buffer (``del``
  at the front of a bytearray is O(1)): no copy of it is made.
- A CR that ends one feed ends its line at once; a LF that starts the next feed is dropped (no
  holding back, unlike eventsource-parser).

The decoder is ``_decoder.py`` (its parts -- the buffer, held-back lines, the hot loop, the exact
WHATWG path and the limits -- share one buffer and one set of limits); the encoder, the same rules
in reverse, is ``_encoder.py``.

Time is linear in the input whatever the chunking; memory is bounded by ``max_line_size`` and
``max_event_size``.
"""
from __future__ import annotations

from .._public import publish
from ._decoder import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE, SSEDecoder, SSEEvent
from ._encoder import encode_comment, encode_frame

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "DEFAULT_MAX_LINE_SIZE",
    "SSEDecoder",
    "SSEEvent",
    "encode_comment",
    "encode_frame",
]

publish(globals(), __all__)
