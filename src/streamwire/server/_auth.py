"""Who may read and write: the ``authorize`` hook's types, ``bearer_token``, and the rule that a
stream server's writes are never open by omission."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Literal, TypeAlias

from starlette.exceptions import HTTPException
from starlette.requests import Request

from ..errors import UsageError

__all__ = ["Access", "Authorize", "bearer_token", "write_protection"]

#: What a request does to a stream: ``read`` (info, sse) or ``write`` (every other route).
Access: TypeAlias = Literal["read", "write"]
#: The authorization hook: allow by returning, refuse by raising ``HTTPException(401|403|404)``.
Authorize: TypeAlias = Callable[[Request, str, Access], "Awaitable[None] | None"]


def bearer_token(token: str, *, protect_reads: bool = False) -> Authorize:
    """An ``authorize`` hook that requires ``Authorization: Bearer <token>`` for writes (and for
    reads when ``protect_reads``); a missing token is 401, a wrong one 403.

    Raises:
        ValueError: ``token`` is not visible ASCII (HTTP clients cannot send anything else
            reliably, so such a token could never be matched).
    """
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("the bearer token must be visible ASCII characters (no spaces or "
                         "control characters), as HTTP clients send it")
    expected = token.encode()

    def authorize(request: Request, stream_id: str, access: Access) -> None:
        if access == "read" and not protect_reads:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise HTTPException(401, "a bearer token is required",
                                {"WWW-Authenticate": 'Bearer realm="streamwire"'})
        if not hmac.compare_digest(given.strip().encode(), expected):
            raise HTTPException(403, "the bearer token is not valid")

    return authorize


def write_protection(authorize: Authorize | None, token: str | None,
                      allow_anonymous_writes: bool) -> Authorize | None:
    """The hook writes go through: exactly one explicit choice, never open by omission."""
    chosen = [name for name, given in (("authorize", authorize is not None),
                                       ("token", token is not None),
                                       ("allow_anonymous_writes", allow_anonymous_writes)) if given]
    if not chosen:
        raise UsageError(
            "create_app() needs a choice about who may write (create, append, end, fail, reset): "
            "pass authorize=<hook>, token=<bearer token>, or allow_anonymous_writes=True")
    if len(chosen) > 1:
        raise UsageError(f"create_app(): pass only one of {', '.join(chosen)} "
                         "(for a token and a hook, check the token inside the hook: bearer_token())")
    if token is not None:
        if not token:
            raise UsageError("create_app(token=...) must not be empty")
        return bearer_token(token)
    return authorize
