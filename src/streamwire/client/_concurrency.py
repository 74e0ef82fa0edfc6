"""What the async and the sync client do differently, and only that, written side by side.

The async client modules are written once; their sync twins are generated from them by
``tools/unasync.py`` (its ``PAIRS``: ``_async.py`` gives ``_sync.py``, and so on), which drops
``async`` and ``await`` and renames ``AsyncX`` to ``X`` and ``aname`` to ``name``. What cannot be
written once is here, each async name beside the sync one it becomes:

- ``AsyncHook``/``Hook``, ``acall``/``call``: a user's callback (the async reader awaits what it
  returns when that is awaitable, so a hook may be either kind of function);
- ``asleep``/``sleep``, ``aread_head``/``read_head``;
- ``AsyncLink``/``Link``: the connection a reader is on, and how ``close()`` stops a read blocked
  on it (a cancel scope; a socket shutdown from another thread).
"""

from __future__ import annotations

import contextlib
import inspect
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Final, TypeAlias, TypeVar

import anyio
import httpx

from ._http import BODY_QUOTE

__all__ = [
    "AsyncHook",
    "AsyncLink",
    "Hook",
    "Link",
    "acall",
    "aread_head",
    "asleep",
    "call",
    "read_head",
    "sleep",
]

A = TypeVar("A")
R = TypeVar("R")

#: A callback of the async client: a plain function, or one whose result is awaited.
AsyncHook: TypeAlias = Callable[[A], Awaitable[R] | R]
#: A callback of the sync client.
Hook: TypeAlias = Callable[[A], R]

asleep: Final = anyio.sleep
sleep: Final = time.sleep


async def acall(hook: AsyncHook[A, R], arg: A) -> R:
    value = hook(arg)
    if inspect.isawaitable(value):
        return await value
    return value


def call(hook: Hook[A, R], arg: A) -> R:
    return hook(arg)


async def aread_head(response: httpx.Response) -> bytes:
    """The start of a refused answer's body, enough to quote (a big page is not read whole)."""
    return await anext(response.aiter_bytes(BODY_QUOTE), b"")


def read_head(response: httpx.Response) -> bytes:
    """The start of a refused answer's body, enough to quote (a big page is not read whole)."""
    return next(response.iter_bytes(BODY_QUOTE), b"")


class AsyncLink:
    """The response an async reader is on. ``interrupt()`` (from any task, or a callback)
    cancels the ``interruptible()`` block the reader is in, and every later one."""

    def __init__(self) -> None:
        self.response: httpx.Response | None = None
        self.body: AsyncIterator[bytes] | None = None
        self._scope: anyio.CancelScope | None = None
        self._interrupted = False

    def attach(self, response: httpx.Response) -> None:
        self.response = response

    def open(self, response: httpx.Response, body: AsyncIterator[bytes]) -> None:
        """Read ``body`` next, unless ``response`` was released meanwhile."""
        if self.response is response:
            self.body = body

    async def release(self) -> None:
        response, self.response, self.body = self.response, None, None
        if response is not None:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    def interrupt(self) -> None:
        self._interrupted = True
        if self._scope is not None:
            self._scope.cancel()

    @contextlib.contextmanager
    def interruptible(self) -> Generator[None]:
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._interrupted:
                scope.cancel()
            try:
                yield
            finally:
                self._scope = None

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class Link:
    """The response a sync reader is on, shared with ``close()`` in another thread: a read
    blocked on a socket does not wake when the socket is closed, but does when it is shut down
    (with EOF or an error, which the reading thread ignores once closed)."""

    def __init__(self) -> None:
        self.response: httpx.Response | None = None
        self.body: Iterator[bytes] | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()  # interrupt() cuts a backoff sleep short

    def attach(self, response: httpx.Response) -> None:
        with self._lock:
            self.response = response

    def open(self, response: httpx.Response, body: Iterator[bytes]) -> None:
        """Read ``body`` next, unless ``response`` was released meanwhile."""
        with self._lock:
            if self.response is response:
                self.body = body

    def release(self) -> None:
        with self._lock:
            response, self.response, self.body = self.response, None, None
        if response is not None:
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            response.close()

    def interrupt(self) -> None:
        self._wake.set()

    def interruptible(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def sleep(self, seconds: float) -> None:
        self._wake.wait(seconds)
