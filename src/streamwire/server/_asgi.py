"""The ASGI shapes the server's modules share (raw ASGI: the streaming routes skip Starlette's
response classes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias
from urllib.parse import parse_qsl

__all__ = ["Message", "Receive", "Scope", "Send", "header_of", "peer_of", "query_param"]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]


def peer_of(scope: Scope) -> str:
    """``host:port`` of the client, for log lines ("-" when the server does not say)."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def header_of(scope: Scope, name: bytes) -> str | None:
    """The request's first ``name`` header (lower case, as ASGI servers give them), decoded as
    Starlette's ``request.headers.get`` decodes it; without building the whole mapping."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def query_param(scope: Scope, name: str) -> str | None:
    """The last value of the query parameter ``name``, as Starlette's
    ``request.query_params.get`` gives it; a query with nothing to unquote is only split."""
    query: bytes = scope.get("query_string", b"")
    if not query:
        return None
    if b"%" in query or b"+" in query:
        found = None
        for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if key == name:
                found = value
        return found
    wanted, found = name.encode("latin-1", "replace"), None
    for part in query.split(b"&"):
        raw_key, _, raw_value = part.partition(b"=")
        if raw_key == wanted:
            found = raw_value.decode("latin-1")
    return found
