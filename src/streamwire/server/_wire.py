"""What a wire v2 reader is owed beyond the log's own frames: the recoverable ``fail`` of a server
shutting down, and the ``fail`` that stands for a log reader that broke (shared by a solo
connection, ``_sse``, and a fan-out hub, ``_fanout``)."""

from __future__ import annotations

import logging
from typing import Final

from ..errors import LogError, StreamwireError
from ..frames import EndFrame, FailFrame, TruncatedFrame
from ._engine import Outcome

__all__ = ["SHUTDOWN_FRAME", "TERMINALS", "failure_frame"]

logger = logging.getLogger("streamwire.server")

TERMINALS: Final = frozenset({EndFrame, FailFrame, TruncatedFrame})

SHUTDOWN_FRAME: Final = FailFrame(
    error="the server is shutting down; re-attach from your cursor",
    recoverable=True,
    error_detail={"code": "SERVER_SHUTDOWN"},
)


def failure_frame(exc: Exception, stream_id: str,
                  expose_errors: bool) -> tuple[FailFrame, Outcome]:
    """The ``fail`` frame a reader gets when its log reader raised ``exc``: the message of a
    client-side ``StreamwireError`` (or any, with ``expose_errors``), else a generic one; the
    exception itself goes to the server's log."""
    if isinstance(exc, StreamwireError):
        logger.warning("sse %s: log read failed: %r", stream_id, exc)
        return FailFrame(
            error=str(exc) if expose_errors or exc.status_hint < 500 else "the stream log failed",
            recoverable=exc.retryable or isinstance(exc, LogError),
            error_detail={"code": type(exc).__name__},
        ), "error"
    logger.error("sse %s: unexpected error while streaming", stream_id, exc_info=exc)
    return FailFrame(
        error=repr(exc) if expose_errors else "internal server error",
        recoverable=True,
        error_detail={"code": "INTERNAL"},
    ), "error"
