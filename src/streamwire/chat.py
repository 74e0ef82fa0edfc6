"""The chat contract: the TRD's ``StreamEventMap`` as ``Chat``, its end reasons and the stop-reason map.

Every event keeps exactly the TRD's wire JSON (camelCase keys such as ``userMessageId``)::

    chunk               {"chunk": str}
    reasoning           {"chunk": str} | {"done": true}
    progress            {"steps": [ConversationStep]} | {"done": true} | {"chunk": str}
    clear               {}
    message_start       {"userMessageId", "assistantMessageId", "model": {"id", "displayName", "provider"}}
    usage               UsageStats
    sources             [SourceLink]               (bare array)
    suggestions         [str]                      (bare array)
    attachments         [ExtractedAttachment]      (bare array)
    title               {"title": str}
    warnings            [str]                      (bare array)
    compression         {"messageCount": int} | {"done": true}
    selection_required  SelectionRequired
    done                {"done": true, "messageId", "userMessageId", "reason": StreamEndReason}
    error               {"error": str, "message": str}

The union variants are told apart by which key is present, as the TRD's readers do
(``"steps" in data``); every payload TypedDict is ``@final`` so mypy narrows on ``in`` like pyright.

The TRD imports five types from its app (``api/src/types.ts``) without listing their fields. The
fields chosen here are what a chat app streaming an LLM reply sends, in the TRD's camelCase:

* ``UsageStats`` is the token usage of the reply, with the key names of AWS Bedrock's Converse API
  (the TRD's stop reasons are Bedrock's): ``inputTokens``, ``outputTokens``, ``totalTokens`` and the
  optional prompt-cache counts ``cacheReadInputTokens`` / ``cacheWriteInputTokens``.
* ``SourceLink`` is one cited web source: ``url``, ``title`` and an optional ``snippet``.
* ``ExtractedAttachment`` is a file the reply produced or extracted, carried inline as a data URL
  (TRD non-goal N4: files travel as data URLs inside JSON): ``id``, ``filename``, ``mimeType``,
  ``dataUrl`` and an optional ``size`` in bytes.
* ``ConversationStep`` is one step of the tool loop shown while the reply is being produced: ``id``,
  ``label``, ``status`` (pending, active, complete, error) and optional ``toolName`` and ``detail``.
* ``SelectionRequired`` asks the user to choose before the reply goes on: ``selectionId``,
  ``prompt``, ``options`` (``SelectionOption``: ``id``, ``label``, optional ``description``) and an
  optional ``multiple`` flag.

Decoding drops keys a payload type does not declare (see ``streamwire.contract``), so a server may
add fields to these types without breaking older readers.
"""

# No ``from __future__ import annotations`` here: the TypedDicts below are read at run time by
# msgspec and by the contract's key-presence union logic, and eager annotations keep
# ``__required_keys__`` exact for NotRequired keys.

from collections.abc import Mapping
from types import MappingProxyType
from typing import (
    Final,
    Literal,
    NotRequired,
    TypeAlias,
    TypedDict,
    TypeGuard,
    final,
    get_args,
    overload,
)

from .contract import Contract, Event

__all__ = [
    "STOP_REASON_TO_END_REASON",
    "STREAM_END_REASONS",
    "Chat",
    "ChunkPayload",
    "ClearPayload",
    "Compression",
    "CompressionStart",
    "ConversationStep",
    "DonePayload",
    "DoneSignal",
    "ErrorPayload",
    "ExtractedAttachment",
    "MessageStart",
    "ModelInfo",
    "Progress",
    "ProgressSteps",
    "Reasoning",
    "SelectionOption",
    "SelectionRequired",
    "SourceLink",
    "StepStatus",
    "StopReason",
    "StreamEndReason",
    "TitlePayload",
    "UsageStats",
    "is_stream_end_reason",
    "stop_reason_to_end_reason",
]

#: Why a stream ended, carried by the ``done`` event (the TRD's five reasons).
StreamEndReason: TypeAlias = Literal["complete", "max_rounds", "cancelled", "context_limit", "timeout"]

#: The five end reasons, for run-time checks (``is_stream_end_reason``).
STREAM_END_REASONS: Final[frozenset[StreamEndReason]] = frozenset(get_args(StreamEndReason))


def is_stream_end_reason(value: object) -> TypeGuard[StreamEndReason]:
    """True if ``value`` is one of the five ``StreamEndReason`` strings (e.g. an abort reason)."""
    return isinstance(value, str) and value in STREAM_END_REASONS


#: The model stop reasons the TRD maps (Bedrock's ``stopReason`` / Anthropic's ``stop_reason``).
StopReason: TypeAlias = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]

#: The TRD's table: stop reason -> end reason; None means "not terminal, the tool loop goes on".
STOP_REASON_TO_END_REASON: Final[Mapping[str, StreamEndReason | None]] = MappingProxyType({
    "end_turn": "complete",
    "max_tokens": "context_limit",
    "stop_sequence": "complete",
    "tool_use": None,
})


@overload
def stop_reason_to_end_reason(
        stop_reason: Literal["end_turn", "stop_sequence"]) -> Literal["complete"]: ...
@overload
def stop_reason_to_end_reason(stop_reason: Literal["max_tokens"]) -> Literal["context_limit"]: ...
@overload
def stop_reason_to_end_reason(stop_reason: Literal["tool_use"]) -> None: ...
@overload
def stop_reason_to_end_reason(stop_reason: str) -> StreamEndReason | None: ...
def stop_reason_to_end_reason(stop_reason: str) -> StreamEndReason | None:
    """Map a model's stop reason to the stream's end reason; None when it is not terminal.

    ``end_turn`` and ``stop_sequence`` -> ``complete``, ``max_tokens`` -> ``context_limit``,
    ``tool_use`` -> None (the server runs the tool and continues). Any other value raises
    ``ValueError``: a stop reason nobody mapped must neither end a reply as ``complete`` nor keep a
    tool loop running; the caller decides (and can extend the mapping) explicitly.
    """
    try:
        return STOP_REASON_TO_END_REASON[stop_reason]
    except (KeyError, TypeError):
        known = ", ".join(STOP_REASON_TO_END_REASON)
        raise ValueError(f"unknown stop reason {stop_reason!r}; known: {known}") from None


# --- payloads shared by several events -------------------------------------------------------


@final
class ChunkPayload(TypedDict):
    """``{"chunk": str}``: a piece of text (``chunk``, and a variant of ``reasoning``/``progress``)."""

    chunk: str


@final
class DoneSignal(TypedDict):
    """``{"done": true}``: a phase ended (a variant of ``reasoning``, ``progress``, ``compression``)."""

    done: Literal[True]


# --- the app types the TRD imports ------------------------------------------------------------

#: A step's state in the progress display.
StepStatus: TypeAlias = Literal["pending", "active", "complete", "error"]


@final
class ConversationStep(TypedDict):
    """One step of the tool loop, shown while the reply is being produced."""

    id: str
    label: str
    status: StepStatus
    toolName: NotRequired[str]
    detail: NotRequired[str]


@final
class UsageStats(TypedDict):
    """Token usage of the reply (Bedrock Converse key names)."""

    inputTokens: int
    outputTokens: int
    totalTokens: int
    cacheReadInputTokens: NotRequired[int]
    cacheWriteInputTokens: NotRequired[int]


@final
class SourceLink(TypedDict):
    """A cited source."""

    url: str
    title: str
    snippet: NotRequired[str]


@final
class ExtractedAttachment(TypedDict):
    """A file the reply carries inline as a data URL (``data:<mime>;base64,...``)."""

    id: str
    filename: str
    mimeType: str
    dataUrl: str
    size: NotRequired[int]


@final
class SelectionOption(TypedDict):
    """One choice offered by ``selection_required``."""

    id: str
    label: str
    description: NotRequired[str]


@final
class SelectionRequired(TypedDict):
    """The reply waits for the user to pick one (or, with ``multiple``, several) of ``options``."""

    selectionId: str
    prompt: str
    options: list[SelectionOption]
    multiple: NotRequired[bool]


# --- event payloads ---------------------------------------------------------------------------


@final
class ProgressSteps(TypedDict):
    """``{"steps": [...]}``: the current tool-loop steps (a variant of ``progress``)."""

    steps: list[ConversationStep]


@final
class CompressionStart(TypedDict):
    """``{"messageCount": int}``: the context is being compressed (a variant of ``compression``)."""

    messageCount: int


@final
class ClearPayload(TypedDict):
    """``{}``: discard the partial reply shown so far (TS ``Record<string, never>``)."""


@final
class ModelInfo(TypedDict):
    """The model that answers, for the client's model badge."""

    id: str
    displayName: str
    provider: str


@final
class MessageStart(TypedDict):
    """The ids of the user's and the assistant's messages, and the answering model."""

    userMessageId: str
    assistantMessageId: str
    model: ModelInfo


@final
class TitlePayload(TypedDict):
    """A title for the conversation."""

    title: str


@final
class DonePayload(TypedDict):
    """Terminal: the reply ended, with why."""

    done: Literal[True]
    messageId: str
    userMessageId: str
    reason: StreamEndReason


@final
class ErrorPayload(TypedDict):
    """Terminal: the reply failed. ``error`` is for detection, ``message`` for people (TRD D4)."""

    error: str
    message: str


Reasoning: TypeAlias = ChunkPayload | DoneSignal
Progress: TypeAlias = ProgressSteps | DoneSignal | ChunkPayload
Compression: TypeAlias = CompressionStart | DoneSignal


class Chat(Contract):
    """The TRD's ``StreamEventMap``: every chat event and its payload type."""

    # streaming content
    chunk: Event[ChunkPayload] = Event()
    reasoning: Event[Reasoning] = Event()
    progress: Event[Progress] = Event()
    clear: Event[ClearPayload] = Event()
    # metadata
    message_start: Event[MessageStart] = Event()
    usage: Event[UsageStats] = Event()
    sources: Event[list[SourceLink]] = Event()
    suggestions: Event[list[str]] = Event()
    attachments: Event[list[ExtractedAttachment]] = Event()
    title: Event[TitlePayload] = Event()
    warnings: Event[list[str]] = Event()
    compression: Event[Compression] = Event()
    # interactive
    selection_required: Event[SelectionRequired] = Event()
    # terminal
    done: Event[DonePayload] = Event()
    error: Event[ErrorPayload] = Event()
