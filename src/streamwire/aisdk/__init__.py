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
done, error             nothing: the run's terminal frame ends the reply
======================  ==================================================================

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
fail (D-4)                         ``finish-step``, ``error{errorText}``, ``finish{error}``
truncated                          ``finish-step``, ``error{errorText}``, ``finish{error}``
=================================  =============================================================

Open text or reasoning parts are closed (``text-end``/``reasoning-end``) before ``finish-step``.
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
    UIMessageChunk,
    encode_event_id,
    encode_ui_event,
    split_message_chunk,
)
from ._mapping import (
    DATA_PARTS,
    END_REASONS,
    FINISH_REASONS,
    TERMINALS,
    ChatTerminal,
    chat_terminal,
    end_reason,
    terminal_frame,
)
from ._reply import ChatReplyDecoder
from ._stream import EventPosition, UIMessageStreamEncoder, format_event_id, parse_event_id

__all__ = [
    "DATA_PARTS",
    "DONE_DATA",
    "END_REASONS",
    "FINISH_REASONS",
    "TERMINALS",
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
    "UIMessageChunk",
    "UIMessageStreamEncoder",
    "chat_terminal",
    "encode_event_id",
    "encode_ui_event",
    "end_reason",
    "format_event_id",
    "parse_event_id",
    "split_message_chunk",
    "terminal_frame",
]

publish(globals(), __all__)
