"""``UIMessageStreamEncoder``: a run's chat stream -> the AI SDK UI message stream (sans-I/O).

Feed it the frames of a run's stream in order (``log.read``, a ``/sse`` body's frames); it answers
with the UI message chunks they mean (``chunks``) or with the SSE bytes of those chunks
(``feed``). The mapping (``streamwire.aisdk`` documents it as a table):

* the preamble: ``start{messageId}``, ``start-step`` (the first step is open from the start);
* ``chunk`` / ``reasoning`` events open a text / reasoning part when none is open (closing the
  other kind first), then append a delta; ``reasoning{done}`` closes the reasoning part;
* ``sources`` -> one ``source-url`` per link, ``attachments`` -> one ``file`` per attachment,
  ``message_start`` -> ``message-metadata``, the rest -> ``data-*`` parts (``DATA_PARTS``);
* tool events -> their tool chunk (``TOOL_CHUNKS``), in the order ``TOOL_TRANSITIONS`` allows: an
  event out of that order (a delta before its start...) is skipped and counted, never sent (the
  client would throw). The event that creates a tool part closes the open text/reasoning part
  first, so text after a tool call is a new part below it;
* ``step_finish`` closes the open part and the step (``finish-step``); ``step_start`` opens one
  (``start-step``), after closing the current step if it has content (a ``step_start`` in the
  empty step of the preamble adds nothing). Content (text, reasoning, a new tool part, sources,
  files) after a ``step_finish`` opens a step of its own; ``data-*`` parts need none;
* the terminal frame closes the open part, the tool parts ``open_tool_ending`` names (each with
  ``tool-output-error``) and the open step, then ends the message: ``finish`` with the mapped
  reason (after ``abort`` for a stopped run); a ``fail`` (or ``truncated``) ends it as D-4 says:
  ``error{errorText}``, then ``finish{finishReason: "error"}``; then ``[DONE]``. The ``errorText``
  is the user's words for the failure's code; just before it, ``message-metadata`` gives the page's
  logic ``metadata.error = {code, recoverable}`` (``_words``).

Event ids. Every SSE event carries its position in the run's stream: the sequence of the chunk
that produced it, and its index among that chunk's UI events (``"7"`` for the first, ``"7.1"``
for the second...; the preamble is chunk 0, the terminal's events continue the last chunk's).
Positions are a total order, so a reader that sends the last id it saw back (``after=``) gets
exactly the events after it: nothing twice even when a cut fell between two events of one chunk.
The encoder re-reads the stream from its start to rebuild the state at the cursor (which parts
are open), and writes only what lies after it.

An event the ``Chat`` contract does not declare (an app's own event, from a contract that extends
``Chat``) is not dropped: it becomes a ``data-<event name>`` part with its payload as ``data``
(appended; the page's ``onData`` and ``message.parts`` see it).

A re-run (``Runs(run_retries=)``: the run's worker was lost and another process runs the agent
again) restarts the run's stream: its attached readers get ``rewound`` at step 0, the chunks are
dropped and the new attempt's continue the sequence. A reader whose cursor (``after``) lies
before the current attempt's first chunk gets the reply from its start, preamble included:
``start`` with the same ``messageId`` replaces the message the client has (``restarted``). A
reader attached while the restart happens cannot have parts taken back (a UI message cannot drop
parts in v6): at a ``rewound`` to step 0 (or a chunk that skips dropped ones) its body ends with
no ``[DONE]`` (``restarted``, ``finished``), a drop the client re-attaches from, and so gets the
replacing reply. (An app's own ``cleanup_to_step(0)`` costs its readers that one re-attach.)

Ignored: chunks whose payload does not validate and tool events out of order (counted in
``skipped``), ``done``/``error`` events inside chunks (the terminal frame decides how a reply
ends), and the ``rewound`` markers of steps after 0 and ``caught-up`` (a UI message cannot drop parts in
v6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast, final

import msgspec

from ..chat import Chat, ToolCallState, advance_tool_call
from ..errors import PayloadError, UsageError
from ..frames import (
    ChunkFrame,
    EndFrame,
    FailFrame,
    RewoundFrame,
    StreamFrame,
    TruncatedFrame,
    UnknownFrame,
)
from ._chunks import UIMessageChunk, encode_event_id, encode_ui_event, split_message_chunk
from ._mapping import (
    DATA_PARTS,
    TOOL_CHUNKS,
    finish_reason,
    open_tool_ending,
)
from ._words import reply_error_code, reply_error_words

__all__ = ["EventPosition", "UIMessageStreamEncoder", "after_chunk", "format_event_id",
           "parse_event_id"]

#: A UI event's place in a run's stream: (chunk sequence, index among that chunk's UI events).
EventPosition = tuple[int, int]

_MAX_ID_DIGITS: Final = 18
#: The ``Chat`` events that map to no UI chunk (the terminal frame ends the reply).
_IN_CHUNK_TERMINALS: Final = frozenset({"done", "error"})
_DECODE_ANY: Final = msgspec.json.Decoder().decode


def format_event_id(position: EventPosition) -> str:
    """``(7, 0)`` -> ``"7"``, ``(7, 2)`` -> ``"7.2"``."""
    return encode_event_id(*position).decode()


def after_chunk(sequence: int) -> str:
    """The event id past every event of chunk ``sequence``: an encoder given it as ``after``
    encodes the later chunks only (a paused reply's continuation)."""
    return format_event_id((sequence, 10**_MAX_ID_DIGITS - 1))


def parse_event_id(text: str) -> EventPosition:
    """The position an event id names (``format_event_id``'s inverse).

    Raises:
        ValueError: ``text`` is not ``<sequence>`` or ``<sequence>.<index>`` in decimal digits.
    """
    sequence, dot, index = text.strip().partition(".")
    for part in (sequence, index) if dot else (sequence,):
        if not (part.isascii() and part.isdigit()) or len(part) > _MAX_ID_DIGITS:
            raise ValueError(f"not a UI message stream event id: {text[:40]!r} "
                             "(expected <sequence> or <sequence>.<index>)")
    return int(sequence), int(index) if dot else 0


@final
class UIMessageStreamEncoder:
    """Turns one run's chat stream into the UI message stream of its reply (module docstring).

    Args:
        message_id: the assistant message's id, sent in ``start`` so a resumed reply replaces the
            message instead of appending a copy (None: the client picks one).
        after: a resuming reader's last event id: only the events after it are encoded.
    """

    __slots__ = ("_after", "_index", "_out", "_reasoning", "_rewound", "_routes", "_sequence",
                 "_started", "_step_open", "_step_used", "_text", "_tools", "finished",
                 "message_id", "restarted", "skipped")

    def __init__(self, message_id: str | None = None, *, after: str | None = None) -> None:
        self.message_id = message_id
        self._after: EventPosition = parse_event_id(after) if after is not None else (-1, 0)
        self._sequence: int = 0
        self._index = 0
        self._text: str | None = None
        self._reasoning: str | None = None
        self._started = False
        self._step_open = False
        self._step_used = False
        #: tool call id -> its state, in the order the calls began
        self._tools: dict[str, ToolCallState] = {}
        self._out: list[UIMessageChunk] = []
        #: True once the terminal frame was fed: the stream is over (or it restarted under
        #: this reader: ``restarted``).
        self.finished = False
        #: The run was re-run (a new attempt restarted its stream): the reply starts over
        #: (module docstring).
        self.restarted = False
        self._rewound = False  # a ``rewound`` marker came: a jump after it is its survivors
        #: Chunks ignored: their payload does not validate against ``Chat``, or a tool event
        #: breaks its call's order (``TOOL_TRANSITIONS``).
        self.skipped = 0
        handlers: dict[str, Callable[[Any], None]] = {
            "chunk": self._chunk, "reasoning": self._reasoning_event, "sources": self._sources,
            "attachments": self._attachments, "message_start": self._message_start,
            "step_start": self._step_start, "step_finish": self._step_finish,
        }
        for name, (part, part_id) in DATA_PARTS.items():
            handlers[name] = self._data_handler(part, part_id)
        for name, chunk_type in TOOL_CHUNKS.items():
            handlers[name] = self._tool_handler(name, chunk_type)
        # event name -> (the payload's validating decoder, the mapping of its payload)
        self._routes: dict[str, tuple[Callable[[Any], Any], Callable[[Any], None]]] = {
            name: (Chat.events()[name].decode, handler) for name, handler in handlers.items()}

    # -- the typed API ---------------------------------------------------------------------------

    def start(self) -> list[UIMessageChunk]:
        """The preamble (``start``, ``start-step``); ``[]`` once it was produced."""
        if self._started:
            return []
        self._started = True
        self._step_open = True
        return self._preamble()

    def _preamble(self) -> list[UIMessageChunk]:
        start: UIMessageChunk = ({"type": "start"} if self.message_id is None
                                 else {"type": "start", "messageId": self.message_id})
        return [start, {"type": "start-step"}]

    def _restart(self, sequence: int) -> bool:
        """Whether the chunk numbered ``sequence`` begins a new attempt of the run for this
        reader (module docstring); if so, the reply starts over."""
        last = self._sequence
        if last == 0 and 0 < self._after[0] < sequence:
            self._after = (-1, 0)  # the cursor is an earlier attempt's: all of this one goes
        elif last and sequence > last + 1 and not self._rewound:
            self.finished = True
        else:
            return False
        self.restarted = True
        return True

    def chunks(self, frame: StreamFrame | UnknownFrame) -> list[UIMessageChunk]:
        """The UI chunks ``frame`` means (the preamble first, if not yet produced)."""
        preamble = self.start()
        return preamble + self._map(frame) if preamble else self._map(frame)

    def _map(self, frame: StreamFrame | UnknownFrame) -> list[UIMessageChunk]:
        out: list[UIMessageChunk] = []
        if self.finished:
            return out
        self._out = out
        kind = type(frame)
        if kind is ChunkFrame:
            chunk = cast(ChunkFrame, frame)  # (``type() is`` is the fast test; it narrows nothing)
            self._sequence = chunk.sequence
            try:
                envelope = split_message_chunk(chunk.chunk)
                route = self._routes.get(envelope.event)
                if route is not None:
                    route[1](route[0](envelope.data))
                elif envelope.event not in _IN_CHUNK_TERMINALS:
                    self._undeclared(envelope.event, envelope.data)
            except (PayloadError, UsageError):
                self.skipped += 1
        elif kind is EndFrame or kind is FailFrame or kind is TruncatedFrame:
            self._terminal(frame)  # type: ignore[arg-type]
        return out

    # -- the SSE API -----------------------------------------------------------------------------

    def encode_start(self) -> bytes:
        """The preamble's SSE events (what a reply sends before its first chunk)."""
        self._index = 0
        return self._encode(self.start(), 0)

    def feed(self, frame: StreamFrame | UnknownFrame) -> bytes:
        """The SSE events of ``frame``'s chunks that lie after the cursor; ``[DONE]`` after the
        terminal. ``b""`` when there are none."""
        if self.finished:
            return b""
        preamble = b"" if self._started else self.encode_start()
        if type(frame) is ChunkFrame and self._restart(frame.sequence):
            if self.finished:
                return b""  # restarted under this reader: the body ends, the client re-attaches
            self._index = 0
            preamble += self._encode(self._preamble(), 0)
        elif type(frame) is RewoundFrame:
            if frame.at_step == 0:  # the run restarted (or was cleared)
                self.restarted = self.finished = True
                return b""
            self._rewound = True
        chunks = self._map(frame)
        if type(frame) is ChunkFrame:
            self._index = 0  # a chunk starts a new group of positions
        body = self._encode(chunks, self._sequence) if chunks else b""
        if self.finished:
            index = self._index
            self._index += 1
            if (self._sequence, index) > self._after:
                body += encode_ui_event(None, self._sequence, index)
        return preamble + body if preamble else body

    def _encode(self, chunks: list[UIMessageChunk], sequence: int) -> bytes:
        index = self._index
        self._index = index + len(chunks)
        if len(chunks) == 1 and (sequence, index) > self._after:  # the common case: one delta
            return encode_ui_event(chunks[0], sequence, index)
        after = self._after
        return b"".join([encode_ui_event(chunk, sequence, i)
                         for i, chunk in enumerate(chunks, index) if (sequence, i) > after])

    # -- the mapping -----------------------------------------------------------------------------

    def _close_text(self) -> None:
        if self._text is not None:
            self._out.append({"type": "text-end", "id": self._text})
            self._text = None

    def _close_reasoning(self) -> None:
        if self._reasoning is not None:
            self._out.append({"type": "reasoning-end", "id": self._reasoning})
            self._reasoning = None

    def _content(self) -> None:
        """Content goes into a step: open one if none is (after a ``step_finish``)."""
        if not self._step_open:
            self._out.append({"type": "start-step"})
            self._step_open = True
        self._step_used = True

    def _end_step(self) -> None:
        self._close_text()
        self._close_reasoning()
        self._out.append({"type": "finish-step"})
        self._step_open = False

    def _step_start(self, data: Any) -> None:
        if self._step_open:
            if not self._step_used:
                return  # the open step is still empty: it is this one
            self._end_step()
        self._out.append({"type": "start-step"})
        self._step_open = True
        self._step_used = False

    def _step_finish(self, data: Any) -> None:
        if self._step_open:
            self._end_step()

    def _chunk(self, data: Any) -> None:
        part = self._text
        if part is None:
            self._close_reasoning()
            self._content()
            part = self._text = f"t{self._sequence}"
            self._out.append({"type": "text-start", "id": part})
        self._out.append({"type": "text-delta", "id": part, "delta": data["chunk"]})

    def _reasoning_event(self, data: Any) -> None:
        if "done" in data:
            self._close_reasoning()
            return
        part = self._reasoning
        if part is None:
            self._close_text()
            self._content()
            part = self._reasoning = f"r{self._sequence}"
            self._out.append({"type": "reasoning-start", "id": part})
        self._out.append({"type": "reasoning-delta", "id": part, "delta": data["chunk"]})

    def _sources(self, data: Any) -> None:
        if data:
            self._content()
        for i, link in enumerate(data):
            self._out.append({"type": "source-url", "sourceId": f"s{self._sequence}.{i}",
                              "url": link["url"], "title": link["title"]})

    def _attachments(self, data: Any) -> None:
        if data:
            self._content()
        for item in data:
            self._out.append({
                "type": "file", "url": item["dataUrl"], "mediaType": item["mimeType"],
                "providerMetadata": {"streamwire": {"id": item["id"],
                                                    "filename": item["filename"]}}})

    def _message_start(self, data: Any) -> None:
        self._out.append({"type": "message-metadata", "messageMetadata": data})

    def _data_handler(self, part: str, part_id: str | None) -> Callable[[Any], None]:
        if part == "data-clear":
            def clear(data: Any) -> None:
                # The parts so far are discarded: close them, so new text opens a new part.
                self._close_text()
                self._close_reasoning()
                self._out.append({"type": part, "data": data})
            return clear
        if part_id is None:
            return lambda data: self._out.append({"type": part, "data": data})
        return lambda data: self._out.append({"type": part, "id": part_id, "data": data})

    def _tool_handler(self, event: str, chunk_type: str) -> Callable[[Any], None]:
        def tool(data: Any) -> None:
            calls = self._tools
            new = data["toolCallId"] not in calls
            advance_tool_call(calls, event, data)  # UsageError: out of order, skipped
            if new:  # the part is created: below the text so far, in a step
                self._close_text()
                self._close_reasoning()
                self._content()
            self._out.append(cast(UIMessageChunk, {"type": chunk_type, **data}))
        return tool

    def _undeclared(self, event: str, raw: msgspec.Raw) -> None:
        # (the envelope's decoder has checked that ``raw`` is JSON)
        self._out.append({"type": f"data-{event}", "data": _DECODE_ANY(raw)})

    def _terminal(self, frame: EndFrame | FailFrame | TruncatedFrame) -> None:
        self.finished = True
        self._close_text()
        self._close_reasoning()
        out = self._out
        for call_id, state in self._tools.items():
            text = open_tool_ending(frame, state)
            if text is not None:
                out.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": text})
        if self._step_open:
            out.append({"type": "finish-step"})
        if isinstance(frame, EndFrame):
            if frame.status == "interrupted":
                out.append({"type": "abort", "reason": "interrupted"})
            out.append({"type": "finish", "finishReason": finish_reason(frame)})
            return
        # D-4, in the user's words (``_words``); the code for the page's logic just before
        out.append({"type": "message-metadata",
                    "messageMetadata": {"error": reply_error_code(frame)}})
        out.append({"type": "error", "errorText": reply_error_words(frame)})
        out.append({"type": "finish", "finishReason": "error"})
