"""The ``StreamLog`` contract suite: every backend runs it, and so can yours.

Subclass ``StreamLogContract`` in a test module and provide a ``make_log`` fixture: an async
factory that takes the limit keywords a test needs (``max_chunks_per_stream``,
``max_bytes_per_stream``, ``max_chunk_size``, ``finished_ttl``, ``writer_timeout``; only those a
test sets are passed)
and returns a fresh, empty log; the fixture closes every log it made::

    class TestMyLog(StreamLogContract):
        @pytest.fixture
        async def make_log(self, anyio_backend: str) -> AsyncIterator[LogFactory]:
            logs: list[StreamLog] = []

            async def make(**limits: Any) -> StreamLog:
                logs.append(MyLog(**limits))
                return logs[-1]

            yield make
            for log in logs:
                await log.aclose()

The tests need pytest and the anyio pytest plugin (installed with anyio); the case that serves the
log over HTTP needs the server extra (Starlette, uvicorn, httpx) and runs on asyncio. Each test
runs under an ``anyio.fail_after`` guard, so a backend that loses a wake-up fails instead of hanging.

Rules checked (the wire v2 seed, ``../shared/seeds/000_e7e163321047a0a9.txt``, and the
``StreamLog`` protocol's docstrings): sequences from 1, gap-free also under concurrent appends and
across reset; replay -> ``caught-up{head}`` -> live -> exactly one terminal with the persisted
payload; cleanup, its marker and ``rewound`` delivered in place to attached readers only;
``truncated`` for a cursor below the floor while chunks of the current run were lost (a cleanup
marker, or retention trimming), never a silent gap; reset and reactivate; finished-stream expiry;
bad input -> typed errors, integers a JavaScript reader holds exactly (up to ``2**53 - 1``);
``list_streams`` (id order, the same on every backend; paging with ``after=``; deleted and
expired streams never listed; its limits);
writer leases (a writer silent for ``writer_timeout`` is gone: ``fail{WRITER_GONE}`` after every
stored chunk; appends and ``keepalive`` hold the lease); idempotent producers (a retried request stored once and answered with its original sequences, a
gap, a reordering and a zombie epoch refused with typed errors); and, served through the stream server on a real socket that is cut
mid-stream, a body that ends with no terminal frame is a drop for every reader, never an end.
"""

from __future__ import annotations

from typing import Final

try:
    import pytest
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('streamwire.testing needs pytest: pip install "streamwire[test]"') from exc

from ..log import StreamLog
from ._helpers import GUARD, LogFactory, chunk_of, read_all, read_n
from ._leases import LeaseContract
from ._limits import LimitsContract
from ._listing import ListingContract
from ._producers import ProducerContract
from ._rewind import RewindContract
from ._streams import StreamsContract
from ._wire import ServedLog, WireContract, serve_log

__all__ = [
    "GUARD",
    "LogFactory",
    "ServedLog",
    "StreamLogContract",
    "chunk_of",
    "read_all",
    "read_n",
    "serve_log",
]


class StreamLogContract(StreamsContract, RewindContract, LimitsContract, ProducerContract,
                        LeaseContract, ListingContract, WireContract):
    """The contract tests. A subclass provides the ``make_log`` fixture (see the module doc)."""

    pytestmark: Final = [pytest.mark.anyio]

    @pytest.fixture
    async def log(self, make_log: LogFactory) -> StreamLog:
        """A fresh log with default limits."""
        return await make_log()
