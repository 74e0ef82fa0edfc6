"""The chat contract: the TRD's ``StreamEventMap`` (plus tool calls and steps) as ``Chat``, its end
reasons and the stop-reason map.

Every event keeps exactly the TRD's wire JSON (camelCase keys such as ``userMessageId``)::

    chunk                  {"chunk": str}
    reasoning              {"chunk": str} | {"done": true}
    progress               {"steps": [ConversationStep]} | {"done": true} | {"chunk": str}
    clear                  {}
    message_start          {"userMessageId", "assistantMessageId",
                            "model": {"id", "displayName", "provider"}}
    usage                  UsageStats
    sources                [SourceLink]             (bare array)
    suggestions            [str]                    (bare array)
    attachments            [ExtractedAttachment]    (bare array)
    title                  {"title": str}
    warnings               [str]                    (bare array)
    compression            {"messageCount": int} | {"done": true}
    selection_required     SelectionRequired
    tool_input_start       {"toolCallId", "toolName", "title"?}
    tool_input_delta       {"toolCallId", "inputTextDelta"}   (a fragment of the input's JSON text)
    tool_input_available   {"toolCallId", "toolName", "input": JSON, "title"?}
    tool_approval_request  {"approvalId", "toolCallId"}
    tool_output_available  {"toolCallId", "output": JSON}
    tool_output_error      {"toolCallId", "errorText"}
    tool_output_denied     {"toolCallId"}
    step_start             {}                       (a round of the tool loop begins)
    step_finish            {}                       (that round ends)
    done                   {"done": true, "messageId", "userMessageId", "reason": StreamEndReason}
    error                  {"error": str, "message": str}

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

The tool and step events are not the TRD's: they carry the AI SDK v6 tool chunks (same camelCase
fields, ``streamwire.aisdk`` maps them one to one). A tool call's events follow ``TOOL_TRANSITIONS``
(h11's way: the transitions are data): ``tool_input_start``, ``tool_input_delta``..., then
``tool_input_available`` (which may also come alone), then ``tool_output_available``,
``tool_output_error``, or ``tool_approval_request`` followed by an output or ``tool_output_denied``.
``advance_tool_call`` applies one event to a table of calls and raises ``UsageError`` on an event out
of that order (a delta before its start, a second output...): the writer's side checks with it,
and the AI SDK encoder skips such an event instead of sending the client a stream it throws on.

Decoding drops keys a payload type does not declare (see ``streamwire.contract``), so a server may
add fields to these types without breaking older readers.
"""

# No ``from __future__ import annotations`` here: the TypedDicts below are read at run time by
# msgspec and by the contract's key-presence union logic, and eager annotations keep
# ``__required_keys__`` exact for NotRequired keys.

from collections.abc import Mapping, MutableMapping
from types import MappingProxyType
from typing import (
    Any,
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
from .errors import UsageError

__all__ = [
    "STOP_REASON_TO_END_REASON",
    "STREAM_END_REASONS",
    "TOOL_TRANSITIONS",
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
    "StepPayload",
    "StepStatus",
    "StopReason",
    "StreamEndReason",
    "TitlePayload",
    "ToolApprovalRequest",
    "ToolCallState",
    "ToolInputAvailable",
    "ToolInputDelta",
    "ToolInputStart",
    "ToolOutputAvailable",
    "ToolOutputDenied",
    "ToolOutputError",
    "UsageStats",
    "advance_tool_call",
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


# --- tool calls and steps (the AI SDK v6 tool chunks' fields) ------------------------------------


@final
class ToolInputStart(TypedDict):
    """A tool call begins; its input follows in ``tool_input_delta`` fragments. ``title``: a
    human-readable name for the tool card."""

    toolCallId: str
    toolName: str
    title: NotRequired[str]


@final
class ToolInputDelta(TypedDict):
    """A fragment of the call's input as JSON text (the fragments concatenated are the input)."""

    toolCallId: str
    inputTextDelta: str


@final
class ToolInputAvailable(TypedDict):
    """The call's complete input (any JSON value): the tool runs (or waits for approval)."""

    toolCallId: str
    toolName: str
    input: Any
    title: NotRequired[str]


@final
class ToolApprovalRequest(TypedDict):
    """The call waits for the user's approval; ``approvalId`` names the answer expected."""

    approvalId: str
    toolCallId: str


@final
class ToolOutputAvailable(TypedDict):
    """The tool's result (any JSON value)."""

    toolCallId: str
    output: Any


@final
class ToolOutputError(TypedDict):
    """The tool failed; ``errorText`` is shown in its place (and given to the model)."""

    toolCallId: str
    errorText: str


@final
class ToolOutputDenied(TypedDict):
    """The user denied the call: the tool did not run."""

    toolCallId: str


@final
class StepPayload(TypedDict):
    """``{}``: a step boundary (``step_start``, ``step_finish``)."""


#: A tool call's state after each of its events (the AI SDK's tool part states).
ToolCallState: TypeAlias = Literal["input-streaming", "input-available", "approval-requested",
                                   "output-available", "output-error", "output-denied"]

#: Tool event -> (the states its call may be in before it, None: no event of that call yet; the
#: state after it). ``output-*`` states are final: a call gets one output.
TOOL_TRANSITIONS: Final[Mapping[str, tuple[frozenset[ToolCallState | None], ToolCallState]]] = (
    MappingProxyType({
        "tool_input_start": (frozenset({None}), "input-streaming"),
        "tool_input_delta": (frozenset({"input-streaming"}), "input-streaming"),
        "tool_input_available": (frozenset({None, "input-streaming"}), "input-available"),
        "tool_approval_request": (frozenset({"input-available"}), "approval-requested"),
        "tool_output_available": (frozenset({"input-available", "approval-requested"}),
                                  "output-available"),
        "tool_output_error": (frozenset({"input-streaming", "input-available",
                                         "approval-requested"}), "output-error"),
        "tool_output_denied": (frozenset({"approval-requested"}), "output-denied"),
    }))


def advance_tool_call(calls: MutableMapping[str, ToolCallState], event: str,
                      data: Mapping[str, Any]) -> ToolCallState:
    """Apply the tool event ``event`` (its payload ``data``) to ``calls`` (tool call id -> state);
    return the call's new state.

    Raises:
        UsageError: the event does not fit its call's state (``TOOL_TRANSITIONS``): a delta or an
            output before the call's start, an event after its output, a second start...
        KeyError: ``event`` is not a tool event.
    """
    before, after = TOOL_TRANSITIONS[event]
    call_id: str = data["toolCallId"]
    state = calls.get(call_id)
    if state not in before:
        where = ("before its tool_input_start" if state is None
                 else f"whose state is already {state!r}")
        raise UsageError(f"{event} for tool call {call_id!r} {where} (a call goes "
                         "tool_input_start, tool_input_delta..., tool_input_available, then one "
                         "output)")
    calls[call_id] = after
    return after


Reasoning: TypeAlias = ChunkPayload | DoneSignal
Progress: TypeAlias = ProgressSteps | DoneSignal | ChunkPayload
Compression: TypeAlias = CompressionStart | DoneSignal


class Chat(Contract):
    """The TRD's ``StreamEventMap`` plus tool calls and steps: every chat event and its payload type."""

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
    # tool calls and steps (the AI SDK's tool parts)
    tool_input_start: Event[ToolInputStart] = Event()
    tool_input_delta: Event[ToolInputDelta] = Event()
    tool_input_available: Event[ToolInputAvailable] = Event()
    tool_approval_request: Event[ToolApprovalRequest] = Event()
    tool_output_available: Event[ToolOutputAvailable] = Event()
    tool_output_error: Event[ToolOutputError] = Event()
    tool_output_denied: Event[ToolOutputDenied] = Event()
    step_start: Event[StepPayload] = Event()
    step_finish: Event[StepPayload] = Event()
    # terminal
    done: Event[DonePayload] = Event()
    error: Event[ErrorPayload] = Event()
