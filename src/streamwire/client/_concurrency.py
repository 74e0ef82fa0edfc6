"""What the async and the sync client do differently, and only that, written side by side.

The async client modules are written once; their sync twins are generated from them by
``tools/unasync.py`` (its ``PAIRS``: ``_async.py`` gives ``_sync.py``, and so on), which drops
``async`` and ``await`` and renames ``AsyncX`` to ``X`` and ``aname`` to ``name``. What cannot be
written once is here, each async name beside the sync one it becomes:

- ``AsyncHook``/``Hook``, ``acall``/``call``: a user's callback (the async reader awaits what it
  returns when that is awaitable, so a hook may be either kind of function);
- ``asleep``/``sleep``, ``AsyncLock``/``Lock``, ``aread_head``/``read_head``;
- ``AsyncLink``/``Link``: the connection a reader is on, and how ``close()`` stops a read blocked
  on it (a cancel scope; a socket shutdown from another thread);
- ``AsyncKeeper``/``Keeper``: a loop run in the background while an object is open (a task in
  a task group; a daemon thread).
"""

from __future__ import annotations

import contextlib
import inspect
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterator
from typing import Any, Final, TypeAlias, TypeVar

import anyio
import anyio.abc
import httpx

from ._http import BODY_QUOTE

__all__ = [
    "AsyncHook",
    "AsyncKeeper",
    "AsyncLink",
    "AsyncLock",
    "Hook",
    "Keeper",
    "Link",
    "Lock",
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
AsyncLock: Final = anyio.Lock
Lock: Final = threading.Lock


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


class AsyncKeeper:
    """Runs a loop as a task while its owner is open (``start`` in ``__aenter__``, ``stop`` in
    ``__aexit__``); ``stop`` cancels it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._group: anyio.abc.TaskGroup | None = None

    @property
    def running(self) -> bool:
        return True  # a stopped loop is cancelled, it never sees this turn False

    async def start(self, loop: Callable[[], Coroutine[Any, Any, object]]) -> None:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(loop, name=self._name)

    async def stop(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class Keeper:
    """Runs a loop in a daemon thread while its owner is open; the loop ends once ``running``
    is False (``stop`` sets it, wakes ``sleep`` and waits for the thread)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return not self._stop.is_set()

    def start(self, loop: Callable[[], object]) -> None:
        self._thread = threading.Thread(target=loop, daemon=True, name=self._name)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)
