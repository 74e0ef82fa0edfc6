"""An agent module for the ``serve --workers`` tests that imports in the parent but not in a
worker process when ``WORKERS_TEST_FAIL_IN_WORKER`` is set: a worker that fails before it serves."""

from __future__ import annotations

import os
import sys

from streamwire.chat import Chat
from streamwire.runs import Completed, RunContext

if os.environ.get("WORKERS_TEST_FAIL_IN_WORKER") and sys.argv[0].endswith("_workers.py"):
    raise RuntimeError("this module refuses to load in a worker (the test asked)")


async def hello(run: RunContext[Chat]) -> Completed:
    """One chunk."""
    await run.emit(Chat.chunk({"chunk": "hello"}))
    return Completed(output="ok")
