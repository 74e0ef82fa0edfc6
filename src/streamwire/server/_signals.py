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
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["chain_exit_signals"]

_EXIT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _noop() -> None:
    return None


def chain_exit_signals(callback: Callable[[], None]) -> Callable[[], None]:
    """Make SIGINT and SIGTERM call ``callback`` on the running asyncio loop before the handler
    already in place. Returns a function that undoes it. A no-op off the main thread, off asyncio,
    or where no handler is installed (the default action cannot be chained)."""
    if threading.current_thread() is not threading.main_thread():
        return _noop
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio: its own signal handling, nothing to chain onto
        return _noop
    undo: list[Callable[[], None]] = []
    for sig in _EXIT_SIGNALS:
        previous = signal.getsignal(sig)
        if callable(previous):
            undo.append(_chain(loop, sig, callback, previous))

    def undo_all() -> None:
        for step in undo:
            step()

    return undo_all


def _chain(loop: asyncio.AbstractEventLoop, sig: int, callback: Callable[[], None],
           previous: Callable[[int, FrameType | None], Any]) -> Callable[[], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        # A Python handler runs between two bytecodes of whatever the loop was doing: hand the
        # callback to the loop rather than touching its state from here.
        if not loop.is_closed():
            loop.call_soon_threadsafe(callback)
        previous(signum, frame)

    signal.signal(sig, handler)

    def undo() -> None:
        if signal.getsignal(sig) is handler:
            signal.signal(sig, previous)

    return undo
