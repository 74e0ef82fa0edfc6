"""``StreamReader[C]``: the TRD's typed client-side consumer over any ``SSEReadable``.

::

    await (
        StreamReader(create_sse_readable(response), Chat)
        .on(Chat.message_start, lambda d: set_ids(d["assistantMessageId"], d["userMessageId"]))
        .on(Chat.chunk, lambda d: buffer.append(d["chunk"]))
        .on(Chat.done, finalize)                        # a plain function or an ``async def``
        .on_parse_error(lambda event, raw, err: log.warning("malformed %s: %r", event, raw))
        .consume()
    )

Behavioural contracts (the TRD's table):

* ``on`` returns the reader, for chaining; the handler's parameter type is the event's payload
  type (a lambda's argument is inferred). Handlers may be plain functions or coroutine functions;
  an awaitable result is awaited before the next event. Several handlers of one event run in
  registration order. An event outside the reader's contract raises ``UsageError`` at registration.
* Late registration: the handler table is read live for each event, so a handler registered while
  ``consume()`` runs (even from another handler) receives the events after it.
* Unregistered events are skipped without parsing their data: no decode, no parse error.
* Parse errors (bad JSON or a payload of the wrong shape, ``PayloadError``) skip that event; the
  ``on_parse_error`` handlers get ``(event, raw, error)``, and the stream goes on.
* A handler's exception propagates out of ``consume()`` and stops the stream (the body is
  released); it is a consumer bug, not a transport issue (TRD D10).
* ``consume()`` is idempotent: every call returns the same awaitable, which may be awaited any
  number of times (by several tasks too); it runs the stream once and every await gets its
  outcome. It resolves at the end of the body; a body that ends without ``done``/``error`` resolves
  too (TRD: the caller decides what a missing terminal means).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from functools import partial
from typing import Any, Final, Generic, Self, TypeVar, final

import anyio

from .contract import BoundEvent, Contract
from .errors import PayloadError, UsageError
from .transport import SSEMessage, SSEReadable, SyncSSEReadable

__all__ = ["ParseErrorHandler", "StreamReader"]

C = TypeVar("C", bound=Contract)
T = TypeVar("T")

#: ``on_parse_error`` handlers get the event name, its raw data and the ``PayloadError``.
ParseErrorHandler = Callable[[str, str, PayloadError], object]

_NOT_STARTED: Final = 0
_RUNNING: Final = 1
_DONE: Final = 2


@final
class _Route:
    """The handlers of one event, and the event that decodes its data (once for all of them)."""

    __slots__ = ("decode", "handlers")

    def __init__(self, event: BoundEvent[Any, Any]) -> None:
        self.decode = event.decode
        # Replaced, never mutated: a handler added during dispatch waits for the next event.
        self.handlers: tuple[Callable[[Any], object], ...] = ()


@final
class _Consumption:
    """The awaitable ``consume()`` returns: runs the stream at the first await, shares the result."""

    __slots__ = ("_done", "_error", "_reader", "_state")

    def __init__(self, reader: StreamReader[Any]) -> None:
        self._reader = reader
        self._state = _NOT_STARTED
        self._error: BaseException | None = None
        self._done: anyio.Event | None = None

    def __await__(self) -> Generator[Any, None, None]:
        # A new coroutine per await, all sharing this state: a coroutine object can be awaited
        # once, while the TRD's promise can be awaited any number of times.
        return self._wait().__await__()

    async def _wait(self) -> None:
        if self._state == _NOT_STARTED:
            self._state = _RUNNING
            self._done = anyio.Event()
            try:
                await self._reader._run()  # pyright: ignore[reportPrivateUsage]
            except Exception as exc:
                self._error = exc
                raise
            except BaseException:
                # Cancelled (or interrupted) in the task that ran it: that task re-raises its own
                # cancellation; other awaiters learn that the stream was not read to its end.
                self._error = UsageError("consume() was cancelled in the task running it; the "
                                         "stream was not read to its end")
                raise
            finally:
                self._state = _DONE
                self._done.set()
            return
        if self._state == _RUNNING:
            assert self._done is not None
            await self._done.wait()
        if self._error is not None:
            raise self._error


class StreamReader(Generic[C]):
    """Reads the events of contract ``C`` from ``readable``; see the module docstring.

    Args:
        readable: the events (``create_sse_readable(...)``, or any iterable of objects with
            ``event`` and ``data`` attributes). An async one is read by ``consume()``, a plain one
            by ``consume_sync()``.
        contract: the contract class; ``on`` refuses events outside it.
    """

    __slots__ = ("_consumed_sync", "_consumption", "_contract", "_parse_error_handlers",
                 "_readable", "_routes")

    def __init__(self, readable: SSEReadable | SyncSSEReadable, contract: type[C]) -> None:
        self._readable = readable
        self._contract = contract
        self._routes: dict[str, _Route] = {}
        self._parse_error_handlers: list[ParseErrorHandler] = []
        self._consumption: _Consumption | None = None
        self._consumed_sync = False

    def on(self, event: BoundEvent[Any, T], handler: Callable[[T], object]) -> Self:
        """Call ``handler(payload)`` for each ``event``; returns the reader (chainable).

        ``handler`` may return an awaitable (an ``async def`` handler): it is awaited in order.
        Raises ``UsageError`` if ``event`` is not an event of the reader's contract.
        """
        name = event.name
        if self._contract.event_named(name) is not event:
            raise UsageError(f"event {name!r} of {event.contract.__qualname__} is not an event of "
                             f"{self._contract.__qualname__}; read it with a reader of a "
                             "contract that declares or inherits it")
        route = self._routes.get(name)
        if route is None:
            route = self._routes[name] = _Route(event)
        route.handlers = (*route.handlers, handler)
        return self

    def on_parse_error(self, handler: ParseErrorHandler) -> Self:
        """Call ``handler(event, raw, error)`` for each event whose data fails to decode."""
        self._parse_error_handlers.append(handler)
        return self

    def consume(self) -> Awaitable[None]:
        """Read the stream to its end, dispatching to the handlers. Every call returns the same
        awaitable. Raises what a handler raises, ``StreamDropError`` if the transport broke, and
        ``SSEDecodeError`` if the body broke a decoder limit."""
        if self._consumed_sync:
            raise UsageError("this reader was already consumed by consume_sync()")
        if self._consumption is None:
            if not isinstance(self._readable, SSEReadable):
                raise UsageError("this reader's readable is synchronous: use consume_sync()")
            self._consumption = _Consumption(self)
        return self._consumption

    def consume_sync(self) -> None:
        """``consume()`` for a synchronous readable (e.g. over an ``httpx.Client`` response).

        Handlers must be plain functions here: one that returns an awaitable raises ``UsageError``.
        Not idempotent like ``consume()``: a second call raises ``UsageError``.
        """
        if self._consumption is not None or self._consumed_sync:
            raise UsageError("this reader was already consumed")
        readable = self._readable
        if not isinstance(readable, SyncSSEReadable):
            raise UsageError("this reader's readable is asynchronous: use `await consume()`")
        self._consumed_sync = True
        routes = self._routes
        events = iter(readable)
        try:
            for item in events:
                route = routes.get(item.event)
                if route is None:
                    continue  # unregistered: not even parsed (TRD)
                try:
                    payload = route.decode(item.data)
                except PayloadError as exc:
                    for call in self._parse_failed_calls(item, exc):
                        _refuse_awaitable(item.event, call())
                    continue
                for handler in route.handlers:
                    result = handler(payload)
                    if result is not None:
                        _refuse_awaitable(item.event, result)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()

    # -- internals -------------------------------------------------------------------------------

    async def _run(self) -> None:
        readable = self._readable
        assert isinstance(readable, SSEReadable)
        routes = self._routes
        events: AsyncIterator[SSEMessage] = aiter(readable)
        try:
            async for item in events:
                route = routes.get(item.event)
                if route is None:
                    continue  # unregistered: not even parsed (TRD)
                try:
                    payload = route.decode(item.data)
                except PayloadError as exc:
                    await _await_each(self._parse_failed_calls(item, exc))
                    continue
                # Each handler runs (and, if async, finishes) before the next one starts.
                for handler in route.handlers:
                    result = handler(payload)
                    if result is not None and inspect.isawaitable(result):
                        await result
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()

    def _parse_failed_calls(self, item: SSEMessage, exc: PayloadError
                            ) -> list[Callable[[], object]]:
        event, raw = item.event, item.data
        return [partial(on_error, event, raw, exc) for on_error in self._parse_error_handlers]


async def _await_each(calls: list[Callable[[], object]]) -> None:
    for call in calls:
        result = call()
        if inspect.isawaitable(result):
            await result


def _refuse_awaitable(event: str, result: object) -> None:
    """Sync dispatch: a handler's awaitable result is an error (the handlers after it never run)."""
    if not inspect.isawaitable(result):
        return
    if inspect.iscoroutine(result):
        result.close()  # never awaited: close it rather than leak a "never awaited" warning
    raise UsageError(f"a handler of {event!r} returned an awaitable; async handlers need "
                     "`await reader.consume()`")
