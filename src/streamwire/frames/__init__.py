"""Wire v2: the six stream frames, their codec and the terminal/resume state machines (sans-I/O).

The frames are the table "Frames" of the wire v2 seed (``seeds/000_e7e163321047a0a9.txt``); field
names are snake_case in Python and camelCase on the wire (``error_detail`` <-> ``errorDetail``).

=========  ==========================================  ========
event      data                                        kind
=========  ==========================================  ========
chunk      {sequence, chunk}, SSE ``id:`` = sequence   content
end        {status, output?, state?, usage?}           terminal
fail       {error, errorDetail?, recoverable}          terminal
truncated  {floor, errorDetail} (code TRUNCATED)       terminal
rewound    {atStep, atSequence?, minSequence?}         marker
caught-up  {head}                                      marker
=========  ==========================================  ========

Modules, h11-style, one job each: ``_types`` (the values), ``_codec`` (frames <-> SSE, the
incremental ``FrameDecoder``), ``_state`` (``classify_stream_terminal`` and ``ResumeState``, every
rule about what a frame means to a reader), ``_transport`` (the remote protocol's transport events
and outcomes), ``_payload`` (contract-typed payloads inside chunks).

No back-compat (the same seed): ``error`` decodes to an unknown frame; ``fail`` is always a failure,
whatever its ``errorDetail.code``; ``truncated`` is always the retention-floor terminal.
"""

from __future__ import annotations

from .._public import publish
from ._codec import (
    FRAME_EVENTS,
    FrameDecoder,
    decode_stream_frame,
    encode_stream_frame,
    stream_frame_to_sse,
)
from ._payload import ChunkCodec, decode_message_chunk, encode_message_chunk
from ._state import (
    TRANSPORT_DROP_ERROR,
    RepeatedFail,
    ResumeState,
    ResumeStatus,
    TerminalAction,
    classify_stream_terminal,
    transport_drop_frame,
)
from ._transport import (
    RemoteOutcome,
    RemoteOutcomeKind,
    TransportDecoder,
    TransportEvent,
    decode_transport_events,
    iter_transport_events,
    remote_terminal_outcome,
)
from ._types import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    EndStatus,
    FailFrame,
    RewoundFrame,
    SSEFields,
    StreamFrame,
    TerminalFrame,
    TruncatedFrame,
    UnknownFrame,
)

__all__ = [
    "FRAME_EVENTS",
    "TRANSPORT_DROP_ERROR",
    "CaughtUpFrame",
    "ChunkCodec",
    "ChunkFrame",
    "EndFrame",
    "EndStatus",
    "FailFrame",
    "FrameDecoder",
    "RemoteOutcome",
    "RemoteOutcomeKind",
    "RepeatedFail",
    "ResumeState",
    "ResumeStatus",
    "RewoundFrame",
    "SSEFields",
    "StreamFrame",
    "TerminalAction",
    "TerminalFrame",
    "TransportDecoder",
    "TransportEvent",
    "TruncatedFrame",
    "UnknownFrame",
    "classify_stream_terminal",
    "decode_message_chunk",
    "decode_stream_frame",
    "decode_transport_events",
    "encode_message_chunk",
    "encode_stream_frame",
    "iter_transport_events",
    "remote_terminal_outcome",
    "stream_frame_to_sse",
    "transport_drop_frame",
]

publish(globals(), __all__)
