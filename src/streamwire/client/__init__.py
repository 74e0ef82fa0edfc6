"""The httpx client side: the resumable reader of wire v2 streams (async and sync),
``create_sse_readable`` for the direct profile, and the runs dispatcher (``AsyncDispatcher``,
``Dispatcher``: start, follow, stop and recover runs of the runs API).

The resumable client: read a wire v2 stream over httpx, every chunk exactly once, in order.

::

    async with AsyncResumableStream(client, url) as stream:     # client: httpx.AsyncClient
        async for chunk in stream:                               # ChunkFrame, or decode(chunk)
            ...
    stream.end_frame.status                                      # "completed", "paused", ...

    with ResumableStream(client, url) as stream:                 # client: httpx.Client
        for chunk in stream: ...

A drop (the body ends with no terminal frame: an eviction or a crash), a network error, a silent
connection (no byte, not even a heartbeat, for ``idle_timeout`` seconds), a malformed frame, a
retryable HTTP status or a ``fail`` with ``recoverable: true`` re-attaches from the cursor with
``Last-Event-ID`` after a backoff (``RetryPolicy``); chunks are deduplicated by sequence. A
re-attach that answers the same recoverable ``fail`` at the same cursor made no progress (the
failure is stored): it raises that ``StreamFailedError`` at once. The
stream ends on ``end`` (``end_frame`` holds it), raises ``StreamFailedError`` on a final ``fail``,
``StreamTruncatedError`` (with ``.floor``) on ``truncated`` unless ``on_truncated(floor)`` returns
the sequence a refetched snapshot covers, and ``RetriesExhaustedError`` when a cap is reached.

Typed chunks: ``decode=`` turns each ``ChunkFrame`` into what is yielded, e.g.
``decode=ChunkCodec(Chat).decode`` yields the contract's ``Message`` (None for an event the
contract does not declare); narrow it with ``is_event(msg, Chat.chunk)``.

``rewound`` markers go to ``on_rewound(frame)`` in stream order: a cleanup removed the chunks of
steps after ``frame.at_step``. Chunks above ``frame.min_sequence`` not yet handed out are dropped
(``seeds/000_e7e163321047a0a9.txt``: "a reader prunes its buffer"); those the caller already
has are its to undo. A reader still behind ``frame.at_sequence`` once the survivors are drained gets ``StreamTruncatedError``
(handled like ``truncated``: ``on_truncated`` or raise); a terminal frame pre-empts it.

An abort by the caller ends quietly: leaving the ``with`` block, ``close()``/``aclose()`` (also
from another task or thread) or cancelling the task; none of them is a drop.
"""

from __future__ import annotations

from .._public import publish
from ._async import AsyncResumableStream
from ._base import StreamOptions
from ._chat import AsyncChatReply
from ._chat_sync import ChatReply
from ._core import (
    DEFAULT_BACKOFF_INITIAL,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_ELAPSED,
    ClientStats,
    RetryPolicy,
)
from ._direct import ByteSource, create_sse_readable
from ._dispatch_core import DEFAULT_RECOVER_TIMEOUT
from ._dispatcher import AsyncDispatcher, AsyncRun
from ._dispatcher_sync import Dispatcher, Run
from ._producer import AsyncProducer
from ._producer_sync import Producer
from ._sync import ResumableStream

__all__ = [
    "DEFAULT_BACKOFF_INITIAL",
    "DEFAULT_BACKOFF_MAX",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_ELAPSED",
    "DEFAULT_RECOVER_TIMEOUT",
    "AsyncChatReply",
    "AsyncDispatcher",
    "AsyncProducer",
    "AsyncResumableStream",
    "AsyncRun",
    "ByteSource",
    "ChatReply",
    "ClientStats",
    "Dispatcher",
    "Producer",
    "ResumableStream",
    "RetryPolicy",
    "Run",
    "StreamOptions",
    "create_sse_readable",
]

publish(globals(), __all__)
