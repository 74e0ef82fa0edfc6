"""Resetting an HTTP connection from inside an ASGI app: the one place streamwire reaches into the
ASGI server it runs under.

ASGI has no message that aborts a response. When an app raises, or returns before its body is
complete, uvicorn calls ``transport.close()``, and an asyncio transport closes only once its
write buffer is flushed: to a peer that never reads, never. The socket, the buffered bytes and
uvicorn's connection then stay for as long as the peer stays, so evicting a reader that does not
read would free nothing. ``reset_connection`` aborts instead: the write buffer is dropped and the
socket closed with ``SO_LINGER`` 0, so the kernel sends RST and keeps no unsent data either.

The way in is uvicorn's, and not a documented API: its ASGI ``send`` is a bound method of the
request cycle object, whose ``transport`` attribute is the connection's ``asyncio.Transport`` (the
h11 and httptools protocols alike). It is used only on the uvicorn versions in
``_UVICORN_TESTED`` and only when that shape is there; ``tests/test_server_hardening.py``
fails when the installed uvicorn is outside the range or no longer has the shape. Anywhere else
(granian, a ``send`` wrapped by middleware) ``reset_connection`` returns False and the caller
closes the connection the ordinary way.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any, Final, Protocol

__all__ = ["Transport", "reset_connection", "resettable_transport"]

logger = logging.getLogger("streamwire.server")

#: uvicorn versions (major, minor) whose request cycle was checked to hold ``transport``:
#: from 0.30 up to, not including, 1.0.
_UVICORN_TESTED: Final = ((0, 30), (1, 0))
_LINGER_ZERO: Final = struct.pack("ii", 1, 0)

_uvicorn_ok: bool | None = None


class Transport(Protocol):
    """What streamwire uses of a connection's transport: asyncio's own, or uvloop's (which does
    not derive from ``asyncio.Transport``)."""

    def abort(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...

    def get_write_buffer_size(self) -> int: ...

    def get_write_buffer_limits(self) -> tuple[int, int]: ...


_TRANSPORT_METHODS: Final = ("abort", "get_extra_info", "get_write_buffer_size",
                             "get_write_buffer_limits")


def _uvicorn_version_ok() -> bool:
    global _uvicorn_ok
    if _uvicorn_ok is None:
        try:
            parts = importlib.metadata.version("uvicorn").split(".")
            version = (int(parts[0]), int(parts[1]))
        except (importlib.metadata.PackageNotFoundError, ValueError, IndexError):
            version = (-1, -1)
        low, high = _UVICORN_TESTED
        _uvicorn_ok = low <= version < high
        if not _uvicorn_ok:
            logger.warning("uvicorn %s.%s is outside the versions streamwire resets evicted "
                           "connections on; they are closed the ordinary way", *version)
    return _uvicorn_ok


def resettable_transport(send: Callable[..., Any]) -> Transport | None:
    """The transport under uvicorn's ASGI ``send`` (asyncio's or uvloop's), or None when
    ``send`` is anything else (another server, or wrapped by middleware)."""
    owner = getattr(send, "__self__", None)
    if owner is None or not type(owner).__module__.startswith("uvicorn.protocols.http."):
        return None
    if not _uvicorn_version_ok():
        return None
    transport = getattr(owner, "transport", None)
    if isinstance(transport, asyncio.Transport) or (
            transport is not None and all(hasattr(transport, m) for m in _TRANSPORT_METHODS)):
        return transport
    return None


def reset_connection(send: Callable[..., Any]) -> bool:
    """Abort the connection under ``send`` at once: no flush, RST to the peer. Returns False when
    the server gives no way to do it (then close it the ordinary way)."""
    transport = resettable_transport(send)
    if transport is None:
        return False
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # already closed, or not a TCP socket: abort() still drops the buffer
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
    transport.abort()
    return True
