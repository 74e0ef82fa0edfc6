"""The chat front end: a run's chat stream as the Vercel AI SDK's UI message stream, and back to
the TRD's chat events (sans-I/O; the routes are ``streamwire.server``'s ``/api/chat``, the reader
is ``streamwire.client``'s chat transport).

The mapping (``UIMessageStreamEncoder``), one row per ``Chat`` event:

======================  ==================================================================
chat event              UI message chunks
======================  ==================================================================
(first)                 ``start{messageId}``, ``start-step``
chunk                   [``reasoning-end``], [``text-start``], ``text-delta``
reasoning {chunk}       [``text-end``], [``reasoning-start``], ``reasoning-delta``
reasoning {done}        ``reasoning-end``
sources                 ``source-url{sourceId, url, title}`` per link
attachments             ``file{url: dataUrl, mediaType}`` per attachment (id and filename in
                        ``providerMetadata.streamwire``)
message_start           ``message-metadata{messageMetadata: <the payload>}``
progress                ``data-progress`` (id ``progress``: replaced in place)
usage                   ``data-usage`` (id ``usage``)
title                   ``data-title`` (id ``title``)
suggestions             ``data-suggestions`` (id ``suggestions``)
compression             ``data-compression`` (id ``compression``)
warnings                ``data-warnings`` (appended)
selection_required      ``data-selection-required`` (appended)
clear                   [``text-end``/``reasoning-end``], ``data-clear`` (the parts before it
                        are discarded by the page)
tool_input_start        [``text-end``/``reasoning-end``], [``start-step``],
                        ``tool-input-start{toolCallId, toolName, title?}``
tool_input_delta        ``tool-input-delta{toolCallId, inputTextDelta}``
tool_input_available    ``tool-input-available{toolCallId, toolName, input, title?}`` (with
                        the closings of ``tool_input_start`` when no start came first)
tool_approval_request   ``tool-approval-request{approvalId, toolCallId}``
tool_output_available   ``tool-output-available{toolCallId, output}``
tool_output_error       ``tool-output-error{toolCallId, errorText}``
tool_output_denied      ``tool-output-denied{toolCallId}``
step_start              [``text-end``...], [``finish-step``], ``start-step``: nothing while
                        the open step is still empty (the preamble's)
step_finish             [``text-end``/``reasoning-end``], ``finish-step`` (if a step is open)
done, error             nothing: the run's terminal frame ends the reply
(not a ``Chat`` event)  ``data-<event name>{data: <the payload>}`` (appended)
======================  ==================================================================

A tool event out of its call's order (``streamwire.chat.TOOL_TRANSITIONS``: a delta before its
start, an output after the output...) is skipped and counted (``skipped``): the client would throw.
Text, reasoning, a new tool part, sources and files after a ``step_finish`` open a step
(``start-step``) first.

The terminal frame (``FINISH_REASONS``; then ``data: [DONE]``):

=================================  =============================================================
run stream ends with               UI message chunks
=================================  =============================================================
end completed                      ``finish-step``, ``finish{stop}``
end completed, reason              ``finish{length}`` for ``context_limit`` (``stopReason:
                                   max_tokens``), ``finish{other}`` for ``max_rounds``/``timeout``
end interrupted (stopped)          ``finish-step``, ``abort{reason: interrupted}``,
                                   ``finish{stop}``: the text so far is kept
end paused                         ``finish-step``, ``finish{stop}``
fail (D-4)                         ``finish-step``, ``message-metadata{error: {code,
                                   recoverable}}``, ``error{errorText}``, ``finish{error}``
truncated                          the same, code ``TRUNCATED``
=================================  =============================================================

``errorText`` is in the user's words for the failure's code (``REPLY_ERROR_WORDS``: "The reply
was interrupted by a server restart. Please send your message again."), never internal text; an
agent's own ``AgentError`` code keeps its message. The code is for machines, in the message's
metadata (``message.metadata.error.code``).

Open text or reasoning parts are closed (``text-end``/``reasoning-end``) before ``finish-step``,
and so are the tool parts left open (``open_tool_ending``: a ``tool-output-error`` each): at any end
one whose input is still streaming, on ``fail``/``truncated`` (with the error's words, before
``error``) and on a stop every one waiting for its output or approval. ``finish-step`` is sent
only while a step is open (not after a ``step_finish``).
"""

from __future__ import annotations

from .._public import publish
from ._chunks import (
    DONE_DATA,
    UI_MESSAGE_STREAM_HEADERS,
    AbortChunk,
    DataChunk,
    ErrorChunk,
    FileChunk,
    FinishChunk,
    FinishReason,
    FinishStepChunk,
    MessageEnvelope,
    MessageMetadataChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningStartChunk,
    SourceUrlChunk,
    StartChunk,
    StartStepChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolApprovalRequestChunk,
    ToolInputAvailableChunk,
    ToolInputDeltaChunk,
    ToolInputStartChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
    UIMessageChunk,
    encode_event_id,
    encode_ui_event,
    split_message_chunk,
)
from ._mapping import (
    DATA_PARTS,
    END_REASONS,
    FINISH_REASONS,
    INPUT_NEVER_COMPLETED,
    STOPPED_BEFORE_OUTPUT,
    TERMINALS,
    TOOL_CHUNKS,
    ChatTerminal,
    chat_terminal,
    end_reason,
    open_tool_ending,
    terminal_frame,
)
from ._reply import ChatReplyDecoder
from ._stream import EventPosition, UIMessageStreamEncoder, format_event_id, parse_event_id
from ._words import GENERIC_WORDS, REPLY_ERROR_WORDS, reply_error_code, reply_error_words

__all__ = [
    "DATA_PARTS",
    "DONE_DATA",
    "END_REASONS",
    "FINISH_REASONS",
    "GENERIC_WORDS",
    "INPUT_NEVER_COMPLETED",
    "REPLY_ERROR_WORDS",
    "STOPPED_BEFORE_OUTPUT",
    "TERMINALS",
    "TOOL_CHUNKS",
    "UI_MESSAGE_STREAM_HEADERS",
    "AbortChunk",
    "ChatReplyDecoder",
    "ChatTerminal",
    "DataChunk",
    "ErrorChunk",
    "EventPosition",
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
    "UIMessageStreamEncoder",
    "chat_terminal",
    "encode_event_id",
    "encode_ui_event",
    "end_reason",
    "format_event_id",
    "open_tool_ending",
    "parse_event_id",
    "reply_error_code",
    "reply_error_words",
    "split_message_chunk",
    "terminal_frame",
]

publish(globals(), __all__)
