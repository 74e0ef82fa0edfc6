"""The ``streamwire.testing`` contract suite on every backend (``make_log`` is in conftest)."""

from __future__ import annotations

from streamwire.testing import StreamLogContract


class TestStreamLogContract(StreamLogContract):
    """Memory, SQLite and Redis: one suite."""
