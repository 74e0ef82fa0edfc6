"""The mapping tables between a run's stream and a chat reply, each rule in one place.

* ``TERMINALS``: a run stream's terminal frame <-> the TRD's chat terminal event, both directions
  (a reader turns ``end``/``fail`` into ``done``/``error``; ``terminal_frame`` writes them back).
* ``FINISH_REASONS``: a chat end reason -> the AI SDK's ``finishReason``.
* ``DATA_PARTS``: the chat events with no native UI part -> their ``data-*`` part.
* ``TOOL_CHUNKS``: the chat tool events -> their UI tool chunk (the same fields).
* ``open_tool_ending``: which tool parts still open when the stream ends are closed, and with what.

The tables are data: ``tests/test_aisdk_mapping.py`` walks them row by row.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, TypeAlias, cast, get_args

from ..chat import (
    STOP_REASON_TO_END_REASON,
    Chat,
    DonePayload,
    ErrorPayload,
    StreamEndReason,
    ToolCallState,
    is_stream_end_reason,
)
from ..contract import Message
from ..errors import StreamTruncatedError
from ..frames import EndFrame, EndStatus, FailFrame, TerminalFrame, TruncatedFrame
from ._chunks import FinishReason
from ._words import reply_error_words

__all__ = [
    "DATA_PARTS",
    "END_REASONS",
    "FINISH_REASONS",
    "INPUT_NEVER_COMPLETED",
    "STOPPED_BEFORE_OUTPUT",
    "TERMINALS",
    "TOOL_CHUNKS",
    "ChatTerminal",
    "chat_terminal",
    "end_reason",
    "finish_reason",
    "open_tool_ending",
    "terminal_frame",
    "truncated_text",
]

ChatTerminal: TypeAlias = Message[Chat, DonePayload] | Message[Chat, ErrorPayload]

#: The reason of an ``end`` that names none of its own, by status. A paused run's reply is complete
#: for now (it waits for the user; a resume continues the same stream).
END_REASONS: Final[Mapping[EndStatus, StreamEndReason]] = MappingProxyType({
    "completed": "complete",
    "interrupted": "cancelled",
    "paused": "complete",
})

#: Chat end reason <-> the ``end`` frame that carries it. A completed run names a reason other
#: than ``complete`` in its output (``{"reason": ...}``, or a model's ``{"stopReason": ...}``).
TERMINALS: Final[Mapping[StreamEndReason, EndFrame]] = MappingProxyType({
    "complete": EndFrame("completed"),
    "cancelled": EndFrame("interrupted"),
    "context_limit": EndFrame("completed", output={"reason": "context_limit"}),
    "max_rounds": EndFrame("completed", output={"reason": "max_rounds"}),
    "timeout": EndFrame("completed", output={"reason": "timeout"}),
})

#: Chat end reason -> AI SDK ``finishReason``. A stopped reply keeps its text and finishes ``stop``
#: (after an ``abort`` chunk); v7's ``interrupted`` is refused by v6 clients, so it is not used.
FINISH_REASONS: Final[Mapping[StreamEndReason, FinishReason]] = MappingProxyType({
    "complete": "stop",
    "cancelled": "stop",
    "context_limit": "length",
    "max_rounds": "other",
    "timeout": "other",
})

#: Chat event -> (``data-*`` part name, part id). A part with an id is replaced in place by the next
#: event of that name (the latest progress, usage, title...); one without is appended.
DATA_PARTS: Final[Mapping[str, tuple[str, str | None]]] = MappingProxyType({
    "progress": ("data-progress", "progress"),
    "usage": ("data-usage", "usage"),
    "title": ("data-title", "title"),
    "suggestions": ("data-suggestions", "suggestions"),
    "warnings": ("data-warnings", None),
    "compression": ("data-compression", "compression"),
    "selection_required": ("data-selection-required", None),
    "clear": ("data-clear", None),
})

#: Chat tool event -> its UI message chunk's ``type``; the chunk carries the event's payload as is
#: (the payload types declare exactly the v6 chunk fields, and decoding drops any other key).
TOOL_CHUNKS: Final[Mapping[str, str]] = MappingProxyType({
    "tool_input_start": "tool-input-start",
    "tool_input_delta": "tool-input-delta",
    "tool_input_available": "tool-input-available",
    "tool_approval_request": "tool-approval-request",
    "tool_output_available": "tool-output-available",
    "tool_output_error": "tool-output-error",
    "tool_output_denied": "tool-output-denied",
})

#: The ``errorText`` of a tool part closed because its input never completed.
INPUT_NEVER_COMPLETED: Final = "the tool call's input never completed"
#: The ``errorText`` of a tool part closed because the reply was stopped.
STOPPED_BEFORE_OUTPUT: Final = "the reply was stopped before the tool call ended"


def open_tool_ending(frame: TerminalFrame, state: ToolCallState) -> str | None:
    """The ``errorText`` of the ``tool-output-error`` that closes a tool part left in ``state``
    when the run's stream ends with ``frame``; None leaves the part as it is.

    A part whose input is still streaming is closed at any end (no one can complete it). A part
    waiting for its output or an approval is closed when the reply failed (with the failure's
    words, ``_words``: D-4, before ``error``) or was stopped; at a completed or paused end it
    stays open: the
    client's own tool (``addToolOutput``) or the user's approval answers it.
    """
    if state not in ("input-streaming", "input-available", "approval-requested"):
        return None
    if isinstance(frame, FailFrame | TruncatedFrame):
        return reply_error_words(frame)
    if frame.status == "interrupted":
        return STOPPED_BEFORE_OUTPUT
    return INPUT_NEVER_COMPLETED if state == "input-streaming" else None


def end_reason(frame: EndFrame) -> StreamEndReason:
    """Why a run's reply ended: the reason its output names (``reason``, or a model's
    ``stopReason`` through the TRD's table), else its status's (``END_REASONS``)."""
    raw: object = frame.output
    if frame.status == "completed" and isinstance(raw, dict):
        output = cast(dict[str, Any], raw)
        reason = output.get("reason")
        if is_stream_end_reason(reason):
            return reason
        stop = output.get("stopReason")
        if isinstance(stop, str):
            mapped = STOP_REASON_TO_END_REASON.get(stop)
            if mapped is not None:
                return mapped
    return END_REASONS[frame.status]


_FINISH_VALUES: Final = frozenset(get_args(FinishReason))


def finish_reason(frame: EndFrame) -> FinishReason:
    """The ``finishReason`` of a reply whose run ended with ``frame``: the one its output names
    in the AI SDK's words (a model relay's ``finishReason``: ``tool-calls``, ``content-filter``,
    ...), else its end reason's (``FINISH_REASONS``)."""
    raw: object = frame.output
    if frame.status == "completed" and isinstance(raw, dict):
        named: object = cast(dict[str, Any], raw).get("finishReason")
        if named in _FINISH_VALUES:
            return cast(FinishReason, named)
    return FINISH_REASONS[end_reason(frame)]


def chat_terminal(frame: TerminalFrame, *, message_id: str = "",
                  user_message_id: str = "") -> ChatTerminal:
    """The chat event that ends a reply whose run stream ended with ``frame``.

    ``end`` -> ``done`` with its reason; ``fail`` -> ``error`` (``error`` and ``message`` both
    carry the frame's ``error``, as the TRD's D4 has them).

    Raises:
        StreamTruncatedError: ``frame`` is ``truncated``: the reply cannot be read from here.
    """
    if isinstance(frame, EndFrame):
        return Chat.done({"done": True, "messageId": message_id,
                          "userMessageId": user_message_id, "reason": end_reason(frame)})
    if isinstance(frame, FailFrame):
        return Chat.error({"error": frame.error, "message": frame.error})
    raise StreamTruncatedError(truncated_text(frame), floor=frame.floor,
                               error_detail=frame.error_detail)


def terminal_frame(terminal: ChatTerminal) -> EndFrame | FailFrame:
    """The run stream's terminal frame for a chat terminal event (the writer's direction).

    ``done`` -> ``TERMINALS[reason]``; ``error`` -> a ``fail`` that is not recoverable (a reply
    that failed does not succeed by being read again).
    """
    data: Any = terminal.data
    if "reason" in data:
        return TERMINALS[data["reason"]]
    return FailFrame(data["message"], False)


def truncated_text(frame: TruncatedFrame) -> str:
    """The ``errorText`` of a reply whose stream is truncated."""
    return f"the reply's stream is truncated below sequence {frame.floor}"
