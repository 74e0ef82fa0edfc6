"""uvicorn's undocumented parts streamwire relies on, each checked against the installed version.

Three reach-ins, none with a public route:

* **The connection's transport** (``resettable_transport``, ``reset_connection``). ASGI has no
  message that aborts a response. When an app raises, or returns before its body is complete,
  uvicorn calls ``transport.close()``, and an asyncio transport closes only once its write buffer
  is flushed: to a peer that never reads, never. The socket, the buffered bytes and uvicorn's
  connection then stay for as long as the peer stays, so evicting a reader that does not read
  would free nothing. ``reset_connection`` aborts instead: the write buffer is dropped and the
  socket closed with ``SO_LINGER`` 0, so the kernel sends RST and keeps no unsent data either.
  The way in: uvicorn's ASGI ``send`` is a bound method of the request cycle object, whose
  ``transport`` attribute is the connection's ``asyncio.Transport`` (the h11 and httptools
  protocols alike). Used only on the versions in ``_UVICORN_TESTED`` and only when that shape is
  there; anywhere else (granian, a ``send`` wrapped by middleware, another uvicorn) the functions
  return None / False and the caller closes the connection the ordinary way (the fallback), with
  one warning naming the version. ``tests/test_server_hardening.py`` fails when the installed
  uvicorn no longer has the shape.
* **A body message written past ``send``** (``direct_body``, ``DirectBody``). A stream's hub writes
  the same message to thousands of connections; uvicorn's h11 ``send`` turns each into an
  ``h11.Data`` event, runs h11's state machine and frames it, per connection. ``DirectBody.write``
  writes bytes framed once (``_compat.h11.h11_chunk``) to the transport, after the same checks
  ``send`` makes (the client left, the transport paused writing, the response ended: then it
  writes nothing and the caller uses ``send``). Only for the h11 request cycle (``cycle``'s
  ``response_started``, ``response_complete``, ``disconnected``, ``flow.write_paused``,
  ``transport``, ``conn``, ``scope``) of a response under way, not to a ``HEAD``, whose h11
  connection sends a chunked body (``_compat.h11.chunked_body``), on the versions in
  ``_UVICORN_TESTED``; httptools' cycle and anything else keep ``send``.
* **``uvicorn.Server.handle_exit``** (``ExitHookServer``): the method uvicorn's signal handlers call
  (documented only in its source). It is overridden to run a callback on the server's loop first;
  ``ExitHookServer`` checks at construction that the installed ``uvicorn.Server`` still has it
  (and ``serve``) with the parameters used here, and raises a ``RuntimeError`` naming the version
  if not, so a moved method fails at start-up, not at the first signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import struct
from collections.abc import Callable
from types import FrameType
from typing import Any, Final, Protocol, cast, final

import uvicorn

from ._versions import VersionGate, installed_version
from .h11 import chunked_body

__all__ = ["DirectBody", "ExitHookServer", "Transport", "direct_body", "reset_connection",
           "resettable_transport", "uvicorn_version"]

#: uvicorn versions (major, minor) whose request cycle was checked to hold ``transport`` and whose
#: ``Server`` has ``handle_exit(sig, frame)`` and ``serve(sockets)``: from 0.30 up to, not
#: including, 1.0.
_UVICORN_TESTED: Final = ((0, 30), (1, 0))
_GATE: Final = VersionGate("uvicorn", *_UVICORN_TESTED,
                           "resets evicted connections on; they are closed the ordinary way")
_LINGER_ZERO: Final = struct.pack("ii", 1, 0)
_TRANSPORT_METHODS: Final = ("abort", "get_extra_info", "get_write_buffer_size",
                             "get_write_buffer_limits")

#: Per class of ``send``'s owner: is it uvicorn's request cycle?
_CYCLES: dict[type, bool] = {}
#: Per class of transport: has it what ``Transport`` names?
_TRANSPORTS: dict[type, bool] = {}


class Transport(Protocol):
    """What streamwire uses of a connection's transport: asyncio's own, or uvloop's (which does
    not derive from ``asyncio.Transport``)."""

    def abort(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...

    def get_write_buffer_size(self) -> int: ...

    def get_write_buffer_limits(self) -> tuple[int, int]: ...


def uvicorn_version() -> tuple[int, int]:
    """The installed uvicorn's (major, minor); (-1, -1) when it cannot be read."""
    return installed_version("uvicorn")


def resettable_transport(send: Callable[..., Any]) -> Transport | None:
    """The transport under uvicorn's ASGI ``send`` (asyncio's or uvloop's), or None when
    ``send`` is anything else (another server, or wrapped by middleware)."""
    owner: object = getattr(send, "__self__", None)
    if owner is None:
        return None
    kind: type = type(owner)
    known = _CYCLES.get(kind)
    if known is None:  # looked at once per class: every connection asks (the stream server's)
        known = _CYCLES[kind] = kind.__module__.startswith("uvicorn.protocols.http.")
    if not known or not (_GATE.ok or _GATE.passes()):
        return None
    transport: object = getattr(owner, "transport", None)
    if transport is None:
        return None
    shape = _TRANSPORTS.get(type(transport))
    if shape is None:
        shape = _TRANSPORTS[type(transport)] = isinstance(transport, asyncio.Transport) or all(
            hasattr(transport, m) for m in _TRANSPORT_METHODS)
    return cast(Transport, transport) if shape else None


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


#: The module of uvicorn's h11 request cycle, and what ``DirectBody`` reads of the cycle.
_H11_CYCLE: Final = "uvicorn.protocols.http.h11_impl"
_CYCLE_FIELDS: Final = ("response_started", "response_complete", "disconnected", "flow",
                        "transport", "conn", "scope")


@final
class DirectBody:
    """One uvicorn h11 response under way, written past its ``send`` (see the module docstring)."""

    __slots__ = ("_cycle", "_flow", "_transport")

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle
        self._flow = cycle.flow
        self._transport = cycle.transport

    def write(self, framed: bytes) -> bool:
        """Write a body message with more to come, already framed (``_compat.h11.h11_chunk``), as
        ``send`` would; False, with nothing written, where ``send`` must be used instead."""
        cycle = self._cycle
        if cycle.disconnected or cycle.response_complete or self._flow.write_paused:
            return False
        self._transport.write(framed)
        return True


def direct_body(send: Callable[..., Any]) -> DirectBody | None:
    """A ``DirectBody`` for the response ``send`` (uvicorn's h11 ``send``, unwrapped) is
    streaming, or None where its body messages must go through ``send``."""
    owner: Any = getattr(send, "__self__", None)
    if (owner is None or type(owner).__module__ != _H11_CYCLE or not (_GATE.ok or _GATE.passes())
            or not all(hasattr(owner, name) for name in _CYCLE_FIELDS)
            or not hasattr(owner.flow, "write_paused")):
        return None
    if (not owner.response_started or owner.response_complete or owner.disconnected
            or owner.scope.get("method") == "HEAD" or not chunked_body(owner.conn)):
        return None
    return DirectBody(owner)


def _check_server_shape() -> None:
    """Refuse to start on a uvicorn whose ``Server`` lost the methods ``ExitHookServer`` overrides."""
    wanted = {"handle_exit": ["self", "sig", "frame"], "serve": ["self", "sockets"]}
    for name, params in wanted.items():
        method = getattr(uvicorn.Server, name, None)
        try:
            found = list(inspect.signature(method).parameters) if method is not None else None
        except (TypeError, ValueError):
            found = None
        if found != params:
            major, minor = uvicorn_version()
            raise RuntimeError(
                f"uvicorn {major}.{minor}: uvicorn.Server.{name} is not {name}"
                f"({', '.join(params[1:])}) any more (found {found}); streamwire's DrainingServer "
                "overrides it to drain open streams on a signal. Install uvicorn>=0.30,<1.0, or "
                "serve the app another way and call drain() yourself")


class ExitHookServer(uvicorn.Server):
    """A ``uvicorn.Server`` that runs ``on_exit()`` on its event loop as soon as it is told to exit
    (SIGINT / SIGTERM, or ``handle_exit`` called from any thread), before uvicorn's own shutdown."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        _check_server_shape()
        super().__init__(config)
        self._on_exit = on_exit
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._on_exit)
