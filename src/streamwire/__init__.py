"""streamwire: typed, resumable Server-Sent Events.

Layers, bottom up: the SSE wire codec (``sse``), typed contracts (``contract``, ``chat``), typed
streams (``transport``, ``writer``, ``reader``), wire v2 frames (``frames``), the durable stream
log (``log``), and the edges: the ASGI stream server (``server``), the httpx client (``client``)
and the command line (``cli``). Backends live in their own modules: ``streamwire.log.memory``,
``streamwire.log.sqlite``, ``streamwire.log.redis``.

``import streamwire`` stays light: it loads the sans-I/O core only. The names that need a web
framework, an HTTP client or an async library (``create_app``, ``AsyncResumableStream``,
``StreamReader``, ...) are imported on first use.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from .chat import Chat, StreamEndReason, is_stream_end_reason, stop_reason_to_end_reason
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
    RewoundFrame,
    StreamFrame,
    TerminalAction,
    TerminalFrame,
    TruncatedFrame,
    classify_stream_terminal,
)
from .log import StreamInfo, StreamLog
from .sse import SSEDecoder, SSEEvent, encode_comment, encode_frame
from .transport import SSE_HEADERS, AbortController, AbortSignal, SSEReadable, SSEWritable
from .writer import StreamWriter

if _typing.TYPE_CHECKING:
    from .client import (
        AsyncResumableStream,
        ClientStats,
        ResumableStream,
        RetryPolicy,
        create_sse_readable,
    )
    from .reader import StreamReader
    from .server import StreamApp, bearer_token, create_app, create_sse_writable

__version__ = "0.1.0"

#: Names imported on first use, and the module each comes from (they load anyio, httpx or starlette).
_LAZY: dict[str, str] = {
    "AsyncResumableStream": "client",
    "ClientStats": "client",
    "ResumableStream": "client",
    "RetryPolicy": "client",
    "StreamApp": "server",
    "StreamReader": "reader",
    "bearer_token": "server",
    "create_app": "server",
    "create_sse_readable": "client",
    "create_sse_writable": "server",
}

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
    "ResponseStatusError",
    "ResumableStream",
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
    "UsageError",
    "bearer_token",
    "classify_stream_terminal",
    "create_app",
    "create_sse_readable",
    "create_sse_writable",
    "encode_comment",
    "encode_frame",
    "is_event",
    "is_stream_end_reason",
    "stop_reason_to_end_reason",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streamwire' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


# Errors read as ``streamwire.StreamDropError`` in tracebacks (httpx does this for every export;
# here only for exceptions, whose module is never used to resolve annotations).
def _rename_errors() -> None:
    for name in __all__:
        obj = globals().get(name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            obj.__module__ = "streamwire"


_rename_errors()
