"""Drain on SIGINT / SIGTERM before the ASGI server's own graceful shutdown begins.

Both servers we test wait for open responses before they tell the app anything: uvicorn sends
lifespan shutdown only after every connection closed, granian only after its workers stopped
serving. An SSE stream never closes by itself, so without help a signal leaves them waiting (or
killing) while readers get no terminal frame. ``chain_exit_signals`` runs a callback first, then
whatever handled the signal before, so the server's shutdown goes on as it would have.

It only uses the public ``signal`` API, and that covers both ways a server can own a signal:

* a Python-level handler (``signal.signal``; uvicorn's ``handle_exit``) is wrapped: ours calls
  the callback, then it;
* a handler installed with ``loop.add_signal_handler`` (granian's workers) needs nothing more.
  asyncio installs a no-op Python handler for that signal and learns of it through
  ``signal.set_wakeup_fd``, which the C-level handler writes to whatever Python handler is set; so
  wrapping the no-op leaves the loop's own handler running. Ours runs first, as soon as the main
  thread sees the signal, and hands the callback to the loop before the loop reads its wake-up
  byte.

``hold`` (optional) makes the first signal wait: the callback and the previous handler run only
once the coroutine ``hold()`` returns (the runs' drain: the server keeps listening, and answers
starts 503, while its runs finish). A second signal during the hold does not wait. Only a Python
handler can be held; the loop's own (granian) runs at once whatever ours does.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

__all__ = ["chain_exit_signals"]

_EXIT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _noop() -> None:
    return None


#: Stands for the hold's task between the signal and the loop starting it.
_PENDING: Any = object()


def chain_exit_signals(callback: Callable[[], None],
                       hold: Callable[[], Awaitable[None]] | None = None) -> Callable[[], None]:
    """Make SIGINT and SIGTERM call ``callback`` on the running asyncio loop before the handler
    already in place (after ``hold()`` on the first signal, when given: see the module). Returns
    a function that undoes it. A no-op off the main thread, off asyncio, or where no handler is
    installed (the default action cannot be chained)."""
    if threading.current_thread() is not threading.main_thread():
        return _noop
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio: its own signal handling, nothing to chain onto
        return _noop
    undo: list[Callable[[], None]] = []
    held = _Hold(hold)
    for sig in _EXIT_SIGNALS:
        previous = signal.getsignal(sig)
        if callable(previous):
            undo.append(_chain(loop, sig, callback, previous, held))

    def undo_all() -> None:
        for step in undo:
            step()

    return undo_all


class _Hold:
    """The first signal's wait (shared by both signals), and the task that waits."""

    __slots__ = ("hold", "released", "task")

    def __init__(self, hold: Callable[[], Awaitable[None]] | None) -> None:
        self.hold = hold
        self.task: asyncio.Task[None] | None = None
        #: A second signal went through while the hold waited: its end does nothing more.
        self.released = False

    def begin(self, loop: asyncio.AbstractEventLoop, then: Callable[[], None]) -> None:
        """On the loop: run ``hold()``, then ``then()`` (also when the hold fails)."""
        hold = self.hold
        assert hold is not None

        async def wait() -> None:
            try:
                await hold()
            finally:
                then()

        self.task = loop.create_task(wait())


def _chain(loop: asyncio.AbstractEventLoop, sig: int, callback: Callable[[], None],
           previous: Callable[[int, FrameType | None], Any], held: _Hold) -> Callable[[], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        # A Python handler runs between two bytecodes of whatever the loop was doing: hand the
        # callback to the loop rather than touching its state from here.
        if loop.is_closed():
            previous(signum, frame)
            return
        if held.hold is not None and held.task is None:
            held.task = _PENDING

            def then() -> None:
                if not held.released:
                    held.released = True
                    callback()
                    previous(signum, frame)

            loop.call_soon_threadsafe(held.begin, loop, then)
            return
        held.released = True
        loop.call_soon_threadsafe(callback)
        previous(signum, frame)

    signal.signal(sig, handler)

    def undo() -> None:
        if signal.getsignal(sig) is handler:
            signal.signal(sig, previous)

    return undo
