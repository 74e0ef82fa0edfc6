"""The stream server's default limits: each one has a name, a reason, and an error that says how
to raise it (``create_app(name=...)``)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL",
    "DEFAULT_MAX_BACKLOG_BYTES",
    "DEFAULT_MAX_BATCH_CHUNKS",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_STREAM",
    "DEFAULT_MAX_STREAM_ID_LENGTH",
    "DEFAULT_RETRY_AFTER",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SHUTDOWN_GRACE_PERIOD",
]

#: Seconds between heartbeat comments on a quiet stream. Proxies cut silent streams after 30-60 s
#: (API Gateway 29 s, nginx and Cloud Run 60 s); 15 s leaves each of them at least one beat.
DEFAULT_HEARTBEAT_INTERVAL: Final = 15.0
#: Seconds one write may stay blocked (the client's window and the server's write buffer full)
#: before the consumer is evicted with a bare close; it re-attaches from its cursor.
DEFAULT_SEND_TIMEOUT: Final = 30.0
#: Bytes a reader following its stream's shared reader may leave untaken (its socket's buffers
#: full) before it is evicted; it re-attaches from its cursor. 4 MiB rides out a stall of
#: seconds on a busy stream; the bytes are shared with the other readers, the reader holds only
#: references to them.
DEFAULT_MAX_BACKLOG_BYTES: Final = 4 * 1024 * 1024
#: Open SSE connections per server; each costs a socket and a few tens of KiB.
DEFAULT_MAX_CONNECTIONS: Final = 10_000
#: Open SSE connections per stream: a fan-out bigger than this belongs behind a CDN or on Redis.
DEFAULT_MAX_CONNECTIONS_PER_STREAM: Final = 1_000
#: Bytes of one write request's body. The TRD's attachments travel as 1-10 MB data URLs in one
#: chunk, so 16 MiB admits them.
DEFAULT_MAX_BODY_SIZE: Final = 16 * 1024 * 1024
#: Chunks in one ``POST /chunks`` batch (one atomic ``append_many``).
DEFAULT_MAX_BATCH_CHUNKS: Final = 10_000
#: Characters of a stream id (it becomes a key in every backend).
DEFAULT_MAX_STREAM_ID_LENGTH: Final = 256
#: Seconds ``drain()`` waits for open connections to write their ``fail`` frame and close.
DEFAULT_SHUTDOWN_GRACE_PERIOD: Final = 5.0
#: Seconds a refused reader (429, 503) is told to wait before it tries again: long enough that a
#: burst of re-connects does not meet the same full server, short enough to go unnoticed.
DEFAULT_RETRY_AFTER: Final = 1
