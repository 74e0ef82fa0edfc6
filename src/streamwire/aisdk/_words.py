"""Users' words: what a chat page shows when a reply fails, and the code it gives machines.

A failed run's stream ends with ``fail{error, errorDetail: {code}}``; its ``error`` is written for
operators ("the worker running the agent shut down", or with ``expose_errors`` an exception's
text). A chat page shows the reply's ``error`` chunk's ``errorText`` to its user, so the reply
carries words for that user instead, by code (``REPLY_ERROR_WORDS``, the one table), and the code
itself in the message's metadata just before (a ``message-metadata`` chunk: ``metadata.error =
{"code", "recoverable"}``; the page's logic reads it, the message keeps it, its parts are
untouched). The ``error`` chunk comes last because the AI SDK's ``Chat`` stops reading at it. A code the server does not make (an agent's own
``AgentError(message, code=...)``) keeps the writer's ``error``: that message was written for the
client. ``tests/test_server_integrity.py`` checks that the table covers every code the server
emits.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ..frames import FailFrame, TruncatedFrame

__all__ = ["GENERIC_WORDS", "OWN_WORDS", "REPLY_ERROR_WORDS", "reply_error_code",
           "reply_error_words"]

_AGAIN: Final = " Please send your message again."
#: What the user is told when nothing better is known.
GENERIC_WORDS: Final = "Something went wrong while writing this reply."

#: ``errorDetail.code`` -> the words a chat page shows for a reply that ended with it.
REPLY_ERROR_WORDS: Final[Mapping[str, str]] = MappingProxyType({
    # the agent
    "AGENT_ERROR": GENERIC_WORDS,
    "INVALID_OUTCOME": "Something went wrong while finishing this reply.",
    "TOOL_ERROR": "A tool this reply needed failed.",
    "TIMEOUT": "This reply took too long and was stopped." + _AGAIN,
    "PAUSE_EXPIRED": "This reply waited too long for your answer and cannot go on." + _AGAIN,
    # the server running it (a retried run never shows these: its reply is replaced)
    "WORKER_SHUTDOWN": "The reply was interrupted by a server restart." + _AGAIN,
    "WORKER_LOST": "The server working on this reply stopped answering." + _AGAIN,
    "WRITER_GONE": "The server working on this reply stopped answering." + _AGAIN,
    "SERVER_SHUTDOWN": "The server is restarting; reconnecting…",
    "LOG_CLOSED": "The server is restarting; reconnecting…",
    "INTERNAL": "Something went wrong on the server." + _AGAIN,
    # the stored reply
    "STREAM_ERROR": "This reply could not be saved." + _AGAIN,
    "STREAM_EXISTS": "This reply could not be started." + _AGAIN,
    "STREAM_DELETED": "This reply is no longer available.",
    "TRUNCATED": "The start of this reply is no longer available; reload the conversation.",
    # the connection
    "READER_BEHIND": "The connection fell behind the reply; reconnecting…",
    "TRANSPORT_STREAM_DROP": "The connection was lost; reconnecting…",
})


#: Codes whose failures carry their own words for the user: a model provider's failure
#: (``streamwire.providers.ProviderError`` says busy, lost or failed, never the provider's text).
OWN_WORDS: Final = frozenset({"PROVIDER_ERROR"})


def reply_error_code(frame: FailFrame | TruncatedFrame) -> dict[str, Any]:
    """``metadata.error`` of a failed reply: ``{"code", "recoverable"}`` (``code`` null when
    the writer named none)."""
    detail = frame.error_detail or {}
    code = detail.get("code")
    recoverable = frame.recoverable if isinstance(frame, FailFrame) else False
    return {"code": code if isinstance(code, str) else None, "recoverable": recoverable}


def reply_error_words(frame: FailFrame | TruncatedFrame) -> str:
    """The ``errorText`` a user reads for a reply that ended with ``frame``."""
    code = (frame.error_detail or {}).get("code")
    words = REPLY_ERROR_WORDS.get(code) if isinstance(code, str) else None
    if words is not None:
        return words
    if isinstance(frame, FailFrame) and frame.error:
        # OWN_WORDS, or an agent's own code: its message was written for the client
        return frame.error
    return GENERIC_WORDS
