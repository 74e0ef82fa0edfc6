"""The ASGI shapes the server's modules share (raw ASGI: the streaming routes skip Starlette's
response classes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

__all__ = ["Message", "Receive", "Scope", "Send", "peer_of"]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]


def peer_of(scope: Scope) -> str:
    """``host:port`` of the client, for log lines ("-" when the server does not say)."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"
