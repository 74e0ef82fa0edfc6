"""The AI SDK UI message stream's chunks (the ``ai`` package v6 ``uiMessageChunkSchema``) and their SSE.

Only the chunk types streamwire sends are declared, each with exactly the fields of the schema in
``ai@6`` (``node_modules/ai/dist/index.mjs``, ``uiMessageChunkSchema``): the client validates every
chunk against it and throws on an unknown ``type`` (``tests/node`` checks these with the real
package). Keys stay camelCase, as on the wire.

Encoding (the protocol, ``ui-message-stream``): one SSE event per chunk, ``data: <json>``, the stream
ends with ``data: [DONE]``, and the response carries ``x-vercel-ai-ui-message-stream: v1``.
streamwire adds an ``id:`` line to every event (its position in the run's stream, see
``streamwire.aisdk``); the AI SDK client ignores it, a resuming reader sends it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, final

import msgspec

from ..errors import PayloadError

__all__ = [
    "DONE_DATA",
    "UI_MESSAGE_STREAM_HEADERS",
    "AbortChunk",
    "DataChunk",
    "ErrorChunk",
    "FileChunk",
    "FinishChunk",
    "FinishReason",
    "FinishStepChunk",
    "MessageEnvelope",
    "MessageMetadataChunk",
    "ReasoningDeltaChunk",
    "ReasoningEndChunk",
    "ReasoningStartChunk",
    "SourceUrlChunk",
    "StartChunk",
    "StartStepChunk",
    "TextDeltaChunk",
    "TextEndChunk",
    "TextStartChunk",
    "ToolApprovalRequestChunk",
    "ToolInputAvailableChunk",
    "ToolInputDeltaChunk",
    "ToolInputStartChunk",
    "ToolOutputAvailableChunk",
    "ToolOutputDeniedChunk",
    "ToolOutputErrorChunk",
    "UIMessageChunk",
    "encode_event_id",
    "encode_ui_event",
    "split_message_chunk",
]

#: The ``finishReason`` values ai v6 accepts (v7 adds ``interrupted``, which v6 rejects).
FinishReason: TypeAlias = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]

#: The response headers of a UI message stream (the AI SDK's ``UI_MESSAGE_STREAM_HEADERS``).
UI_MESSAGE_STREAM_HEADERS: Final[Mapping[str, str]] = MappingProxyType({
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
})

#: The data of the last event of every UI message stream.
DONE_DATA: Final = "[DONE]"


@final
class StartChunk(TypedDict):
    """The message begins; ``messageId`` is the assistant message's persisted id."""

    type: Literal["start"]
    messageId: NotRequired[str]
    messageMetadata: NotRequired[Any]


@final
class StartStepChunk(TypedDict):
    """A step begins (the message gets a ``step-start`` part)."""

    type: Literal["start-step"]


@final
class FinishStepChunk(TypedDict):
    """The step ends; the client closes its open text and reasoning parts."""

    type: Literal["finish-step"]


@final
class TextStartChunk(TypedDict):
    """A text part opens."""

    type: Literal["text-start"]
    id: str


@final
class TextDeltaChunk(TypedDict):
    """Text appended to the open text part ``id``."""

    type: Literal["text-delta"]
    id: str
    delta: str


@final
class TextEndChunk(TypedDict):
    """The text part ``id`` is complete."""

    type: Literal["text-end"]
    id: str


@final
class ReasoningStartChunk(TypedDict):
    """A reasoning part opens."""

    type: Literal["reasoning-start"]
    id: str


@final
class ReasoningDeltaChunk(TypedDict):
    """Reasoning text appended to the open reasoning part ``id``."""

    type: Literal["reasoning-delta"]
    id: str
    delta: str


@final
class ReasoningEndChunk(TypedDict):
    """The reasoning part ``id`` is complete."""

    type: Literal["reasoning-end"]
    id: str


@final
class SourceUrlChunk(TypedDict):
    """A cited web source (a ``source-url`` part)."""

    type: Literal["source-url"]
    sourceId: str
    url: str
    title: NotRequired[str]


@final
class FileChunk(TypedDict):
    """A file (a ``file`` part); ``providerMetadata`` is ``{provider: {key: JSON}}``."""

    type: Literal["file"]
    url: str
    mediaType: str
    providerMetadata: NotRequired[dict[str, dict[str, Any]]]


@final
class ToolInputStartChunk(TypedDict):
    """A tool part opens (state ``input-streaming``); the part's type is ``tool-<toolName>``."""

    type: Literal["tool-input-start"]
    toolCallId: str
    toolName: str
    title: NotRequired[str]


@final
class ToolInputDeltaChunk(TypedDict):
    """JSON text appended to the tool call's input (the client parses it partially)."""

    type: Literal["tool-input-delta"]
    toolCallId: str
    inputTextDelta: str


@final
class ToolInputAvailableChunk(TypedDict):
    """The tool call's complete input (state ``input-available``; ``onToolCall`` fires)."""

    type: Literal["tool-input-available"]
    toolCallId: str
    toolName: str
    input: Any
    title: NotRequired[str]


@final
class ToolApprovalRequestChunk(TypedDict):
    """The tool call waits for approval (state ``approval-requested``, ``approval.id``)."""

    type: Literal["tool-approval-request"]
    approvalId: str
    toolCallId: str


@final
class ToolOutputAvailableChunk(TypedDict):
    """The tool's output (state ``output-available``)."""

    type: Literal["tool-output-available"]
    toolCallId: str
    output: Any


@final
class ToolOutputErrorChunk(TypedDict):
    """The tool call failed (state ``output-error``, ``errorText``)."""

    type: Literal["tool-output-error"]
    toolCallId: str
    errorText: str


@final
class ToolOutputDeniedChunk(TypedDict):
    """The tool call was denied (state ``output-denied``)."""

    type: Literal["tool-output-denied"]
    toolCallId: str


@final
class DataChunk(TypedDict):
    """A ``data-<name>`` part: the same ``id`` replaces the part; ``transient`` keeps it out of
    the message (only ``onData`` sees it)."""

    type: str
    data: Any
    id: NotRequired[str]
    transient: NotRequired[bool]


@final
class MessageMetadataChunk(TypedDict):
    """Metadata merged into the message's ``metadata``."""

    type: Literal["message-metadata"]
    messageMetadata: Any


@final
class ErrorChunk(TypedDict):
    """The reply failed; the client's ``onError`` gets ``errorText``."""

    type: Literal["error"]
    errorText: str


@final
class AbortChunk(TypedDict):
    """The reply was stopped (the server side's ``onFinish`` sees ``isAborted``)."""

    type: Literal["abort"]
    reason: NotRequired[str]


@final
class FinishChunk(TypedDict):
    """The message is complete, and why."""

    type: Literal["finish"]
    finishReason: NotRequired[FinishReason]
    messageMetadata: NotRequired[Any]


UIMessageChunk: TypeAlias = (
    StartChunk | StartStepChunk | FinishStepChunk | TextStartChunk | TextDeltaChunk | TextEndChunk
    | ReasoningStartChunk | ReasoningDeltaChunk | ReasoningEndChunk | SourceUrlChunk | FileChunk
    | ToolInputStartChunk | ToolInputDeltaChunk | ToolInputAvailableChunk
    | ToolApprovalRequestChunk | ToolOutputAvailableChunk | ToolOutputErrorChunk
    | ToolOutputDeniedChunk | DataChunk | MessageMetadataChunk | ErrorChunk | AbortChunk
    | FinishChunk
)

_ENCODE: Final = msgspec.json.Encoder().encode


def encode_event_id(sequence: int, index: int) -> bytes:
    """A UI event's id: its chunk's sequence, then ``.<index>`` after that chunk's first event."""
    return b"%d" % sequence if index == 0 else b"%d.%d" % (sequence, index)


def encode_ui_event(chunk: UIMessageChunk | None, sequence: int, index: int) -> bytes:
    """One SSE event: ``id: <encode_event_id>`` and ``data: <chunk JSON>``; None is ``[DONE]``.

    JSON has no raw line end, so the data is always one line.
    """
    data = b"[DONE]" if chunk is None else _ENCODE(chunk)
    return b"id: %b\ndata: %b\n\n" % (encode_event_id(sequence, index), data)


@final
class MessageEnvelope(msgspec.Struct, frozen=True, gc=False):
    """A contract message as a chunk carries it (``frames.encode_message_chunk``), split only:
    ``data`` is the payload's JSON, left to the event's own decoder."""

    event: str
    data: msgspec.Raw


_SPLIT: Final = msgspec.json.Decoder(MessageEnvelope).decode


def split_message_chunk(chunk: msgspec.Raw | bytes) -> MessageEnvelope:
    """The event name and the raw payload of a chunk's message.

    Raises:
        PayloadError: the chunk is not a ``{"event", "data"}`` object.
    """
    try:
        return _SPLIT(chunk)
    except msgspec.DecodeError as exc:
        raise PayloadError(f'chunk is not a {{"event", "data"}} message: {exc}', event="chunk",
                           raw=bytes(chunk)) from None
