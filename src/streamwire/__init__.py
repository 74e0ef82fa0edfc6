"""streamwire: typed, resumable Server-Sent Events.

Layers, bottom up: the SSE wire codec (``sse``), typed contracts (``contract``, ``chat``), typed
streams (``writer``, ``reader``, ``transport``), wire v2 frames (``frames``), the durable stream log
(``log``), and the edges: the ASGI stream server (``server``), the resumable httpx client
(``client``) and the command line (``cli``). Backends live in their own modules:
``streamwire.log.memory``, ``streamwire.log.sqlite``, ``streamwire.log.redis``.
"""

from __future__ import annotations

from .chat import Chat, StreamEndReason, is_stream_end_reason, stop_reason_to_end_reason
from .client import AsyncResumableStream, ClientStats, ResumableStream, RetryPolicy
from .contract import BoundEvent, Contract, Event, Message, is_event
from .errors import (
    ContractError,
    LogError,
    LogLimitError,
    MalformedFrameError,
    PayloadError,
    ResponseStatusError,
    RetriesExhaustedError,
    SSEDecodeError,
    StreamDropError,
    StreamFailedError,
    StreamGapError,
    StreamNotFoundError,
    StreamStateError,
    StreamTruncatedError,
    StreamwireError,
    UsageError,
)
from .frames import (
    CaughtUpFrame,
    ChunkCodec,
    ChunkFrame,
    EndFrame,
    FailFrame,
    FrameDecoder,
    RemoteOutcome,
    ResumeState,
    RewoundFrame,
    StreamFrame,
    TerminalAction,
    TerminalFrame,
    TruncatedFrame,
    UnknownFrame,
    classify_stream_terminal,
    decode_stream_frame,
    decode_transport_events,
    encode_stream_frame,
    iter_transport_events,
    remote_terminal_outcome,
    stream_frame_to_sse,
)
from .log import StreamInfo, StreamLog
from .reader import StreamReader
from .server import StreamApp, bearer_token, create_app
from .sse import SSEDecoder, SSEEvent, encode_comment, encode_frame
from .transport import (
    SSE_HEADERS,
    AbortController,
    AbortSignal,
    SSEReadable,
    SSEWritable,
    create_sse_readable,
    create_sse_writable,
)
from .writer import StreamWriter

__version__ = "0.1.0"

__all__ = [
    "SSE_HEADERS",
    "AbortController",
    "AbortSignal",
    "AsyncResumableStream",
    "BoundEvent",
    "CaughtUpFrame",
    "Chat",
    "ChunkCodec",
    "ChunkFrame",
    "ClientStats",
    "Contract",
    "ContractError",
    "EndFrame",
    "Event",
    "FailFrame",
    "FrameDecoder",
    "LogError",
    "LogLimitError",
    "MalformedFrameError",
    "Message",
    "PayloadError",
    "RemoteOutcome",
    "ResponseStatusError",
    "ResumableStream",
    "ResumeState",
    "RetriesExhaustedError",
    "RetryPolicy",
    "RewoundFrame",
    "SSEDecodeError",
    "SSEDecoder",
    "SSEEvent",
    "SSEReadable",
    "SSEWritable",
    "StreamApp",
    "StreamDropError",
    "StreamEndReason",
    "StreamFailedError",
    "StreamFrame",
    "StreamGapError",
    "StreamInfo",
    "StreamLog",
    "StreamNotFoundError",
    "StreamReader",
    "StreamStateError",
    "StreamTruncatedError",
    "StreamWriter",
    "StreamwireError",
    "TerminalAction",
    "TerminalFrame",
    "TruncatedFrame",
    "UnknownFrame",
    "UsageError",
    "bearer_token",
    "classify_stream_terminal",
    "create_app",
    "create_sse_readable",
    "create_sse_writable",
    "decode_stream_frame",
    "decode_transport_events",
    "encode_comment",
    "encode_frame",
    "encode_stream_frame",
    "is_event",
    "is_stream_end_reason",
    "iter_transport_events",
    "remote_terminal_outcome",
    "stop_reason_to_end_reason",
    "stream_frame_to_sse",
]

# Errors read as ``streamwire.StreamDropError`` in tracebacks (httpx does this for every export;
# here only for exceptions, whose module is never used to resolve annotations).
def _rename_errors() -> None:
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) and issubclass(obj, BaseException):
            obj.__module__ = "streamwire"


_rename_errors()
