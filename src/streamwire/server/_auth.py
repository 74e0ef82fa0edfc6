"""Who may read and write, and who is asking: the ``authorize`` hook's types, the principal it may
return (``User``), ``bearer_token``, ``jwt_bearer``, and the rule that a stream server's writes are
never open by omission.

A hook allows a request by returning and refuses it by raising ``HTTPException``. What it returns
names the caller: ``None`` (anonymous: every hook written before users), a user id ``str`` or a
``User``. The routes hand the user to ownership (``_owners``: a run or chat started by a user is
that user's alone) and to the agent (``run.user``), like a FastAPI dependency.

``jwt_bearer(secret)`` identifies callers by an HS256 JWT (``sub`` = the user id, ``exp``
required): a token that is present but bad (signature, expiry, shape) is 401 with the reason, on
reads too; writes need a valid one; reads without one stay anonymous unless ``protect_reads``.
There is no admin token beside it (``create_app`` takes one of ``authorize`` or ``token``): an
operator mints a JWT of their own (``streamwire token``), which owns what it starts like any user,
so no key exists that reads every user's chats.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, final

from starlette.exceptions import HTTPException
from starlette.requests import Request

from ..errors import UsageError

__all__ = ["MIN_JWT_SECRET_BYTES", "Access", "Authorize", "Principal", "User", "bearer_token",
           "jwt_bearer", "mint_token", "principal_of", "write_protection"]

#: What a request does to a stream: ``read`` (info, sse) or ``write`` (every other route).
Access: TypeAlias = Literal["read", "write"]


@final
@dataclass(frozen=True, slots=True)
class User:
    """The caller an ``authorize`` hook identified: ``id`` (a JWT's ``sub``) and the claims it was
    identified by (a JWT's payload; empty for a hook that returned a plain id)."""

    id: str
    claims: Mapping[str, Any] = field(default_factory=dict[str, Any])


#: What an ``authorize`` hook returns: who the caller is (``None``: anonymous).
Principal: TypeAlias = "User | str | None"
#: The authorization hook: refuse by raising ``HTTPException(401|403|404)``; allow by returning
#: the caller (``None`` for anonymous, a user id, or a ``User``).
Authorize: TypeAlias = Callable[[Request, str, Access], "Awaitable[Principal] | Principal"]

#: The shortest HS256 secret accepted: 256 bits, as RFC 7518 section 3.2 requires.
MIN_JWT_SECRET_BYTES: Final = 32


def principal_of(result: object) -> User | None:
    """The ``User`` a hook's result names (a ``str`` is the user id)."""
    if result is None or isinstance(result, User):
        return result
    if isinstance(result, str) and result:
        return User(result)
    raise TypeError(f"an authorize hook returns None, a user id (non-empty str) or a User, not "
                    f"{type(result).__name__}")


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


def _jwt() -> Any:
    try:
        import jwt
    except ImportError as exc:
        raise ImportError(f'JWT bearer tokens need PyJWT: pip install "streamwire[jwt]" ({exc})'
                          ) from exc
    return jwt


def _secret(secret: str | bytes) -> bytes:
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    if len(key) < MIN_JWT_SECRET_BYTES:
        raise ValueError(f"the JWT secret must be at least {MIN_JWT_SECRET_BYTES} bytes (HS256 "
                         f"needs 256 bits, RFC 7518 section 3.2), not {len(key)}; e.g. "
                         "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return key


def mint_token(secret: str | bytes, sub: str, *, ttl: float = 3600.0,
               claims: Mapping[str, Any] | None = None) -> str:
    """An HS256 JWT for user ``sub`` that expires in ``ttl`` seconds (what ``jwt_bearer`` with
    the same ``secret`` accepts); ``claims`` are added to the payload."""
    if not sub:
        raise ValueError("sub (the user id) must not be empty")
    if not ttl > 0:
        raise ValueError(f"ttl must be seconds > 0, not {ttl!r}")
    now = int(time.time())
    payload = {**(claims or {}), "sub": sub, "iat": now, "exp": now + max(1, round(ttl))}
    token: str = _jwt().encode(payload, _secret(secret), algorithm="HS256")
    return token


def jwt_bearer(secret: str | bytes, *, protect_reads: bool = False,
               leeway: float = 0.0) -> Authorize:
    """An ``authorize`` hook that identifies callers by ``Authorization: Bearer <JWT>``, HS256
    signed with ``secret`` (``pip install "streamwire[jwt]"``): returns ``User(sub, claims)``.

    Writes need a valid token (missing: 401); reads without one are anonymous unless
    ``protect_reads``. A token that is present is always checked: a bad signature, an expired
    ``exp`` (``leeway`` seconds of clock skew allowed), no ``sub`` or ``exp``, or not a JWT is
    401 with that reason (``WWW-Authenticate: Bearer error="invalid_token"``, RFC 6750).

    Raises:
        ValueError: ``secret`` is shorter than ``MIN_JWT_SECRET_BYTES``.
        ImportError: PyJWT is not installed.
    """
    jwt = _jwt()
    key = _secret(secret)
    reasons: list[tuple[type[Exception], str]] = [
        (jwt.ExpiredSignatureError, "the bearer token has expired"),
        (jwt.InvalidSignatureError, "the bearer token's signature is not valid"),
        (jwt.MissingRequiredClaimError, "the bearer token lacks a required claim (sub, exp)"),
        (jwt.ImmatureSignatureError, "the bearer token is not valid yet (nbf, iat)"),
        (jwt.InvalidAlgorithmError, "the bearer token is not signed with HS256"),
        (jwt.DecodeError, "the bearer token is not a valid JWT"),
    ]

    def refuse(reason: str) -> HTTPException:
        return HTTPException(401, reason, {
            "WWW-Authenticate": f'Bearer realm="streamwire", error="invalid_token", '
                                f'error_description="{reason}"'})

    def authorize(request: Request, stream_id: str, access: Access) -> User | None:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            if access == "read" and not protect_reads and not header:
                return None
            raise HTTPException(401, "a bearer token (a JWT) is required",
                                {"WWW-Authenticate": 'Bearer realm="streamwire"'})
        try:
            claims: dict[str, Any] = jwt.decode(
                given, key, algorithms=["HS256"], leeway=leeway,
                options={"require": ["exp", "sub"]})
        except jwt.PyJWTError as exc:
            reason = next((text for kind, text in reasons if isinstance(exc, kind)),
                          "the bearer token is not valid")
            raise refuse(reason) from None
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise refuse("the bearer token's sub (the user id) must be a non-empty string")
        return User(sub, claims)

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
