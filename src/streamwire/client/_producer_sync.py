# Generated from _producer.py by tools/unasync.py; do not edit: edit _producer.py and run
# `python tools/unasync.py` (./dev test fails while this file is stale).
"""``Producer``: write a stream over the HTTP write API exactly once, from any process,
across server restarts and network faults (``_producer_sync.py`` is generated from
``_producer.py``).

::

    with Producer(client, "http://127.0.0.1:8000", "s1", token=TOKEN) as producer:
        producer.append([(0, {"text": "Hel"}), (0, {"text": "lo"})])  # -> [1, 2]
        producer.append_chunk(0, {"text": "!"})  # -> 3
        producer.end("completed")  # or .fail("tool crashed", error_detail={...})

Each call is one request (``POST /streams/{id}/chunks``, ``/end``, ``/fail``) carrying the
producer's id, epoch and next sequence (``Producer-Id``, ``Producer-Epoch``, ``Producer-Seq``); a
lost answer, a 5xx or an unreadable answer is retried with backoff and the same sequence, so the
server stores it once and answers with the original sequences (``_producer_core`` has the rules).
Calls of one producer run one at a time. While the producer is open and idle it sends ``POST
/streams/{id}/keepalive`` every ``keepalive_interval`` seconds, so the server keeps its writer
lease during a long tool call (None: never). A producer that restarts and takes the stream over
uses a higher ``epoch`` (from ``seq`` 0): the older instance is fenced (``ProducerEpochError``).

Failures of a keepalive are logged (``streamwire.client``) and otherwise left to the next write;
a server that answers a keepalive with 404 or 405 has no such route, and gets no more of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import httpx

from ..errors import StreamwireError
from ..frames import EndStatus
from ._concurrency import Keeper, Lock, sleep
from ._core import RetryPolicy
from ._producer_core import (
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_REQUEST_TIMEOUT,
    ProducerBase,
    ProducerCall,
)

__all__ = ["Producer"]


class Producer(ProducerBase):
    """The idempotent producer for ``httpx.Client``: open it as a context manager, which runs
    the keepalives in the background (the client is not closed by it).

    Args:
        client: the ``httpx.Client`` to send with.
        base_url: the server (``http://127.0.0.1:8000``), routes are ``streams/{id}/...`` below it.
        stream_id: the stream to write (created beforehand, e.g. ``PUT /streams/{id}``).
        producer_id: this producer's id (default: a random one).
        epoch: where this producer starts (a restarted producer: a higher epoch, seq 0).
        seq: the first sequence number of ``epoch``.
        retry: the backoff and caps for retries (default ``DEFAULT_PRODUCER_RETRY``).
        token: sent as ``Authorization: Bearer``; headers: extra request headers.
        keepalive_interval: seconds of idleness between keepalives (None: none).
        timeout: seconds for one request before it counts as lost (and is retried).

    Raises (from the calls): ``ProducerSequenceError`` and ``ProducerEpochError`` (final),
    ``ResponseStatusError`` (a refusal: nothing stored), ``RetriesExhaustedError``.
    """

    def __init__(self, client: httpx.Client, base_url: str | httpx.URL, stream_id: str, *,
                 producer_id: str | None = None, epoch: int = 0, seq: int = 0,
                 retry: RetryPolicy | None = None, token: str | None = None,
                 headers: Mapping[str, str] | None = None,
                 keepalive_interval: float | None = DEFAULT_KEEPALIVE_INTERVAL,
                 timeout: float = DEFAULT_REQUEST_TIMEOUT) -> None:
        super().__init__(base_url, stream_id, producer_id=producer_id, epoch=epoch, seq=seq,
                         retry=retry, token=token, headers=headers,
                         keepalive_interval=keepalive_interval, timeout=timeout)
        self._client = client
        self._lock = Lock()
        self._keeper = Keeper(f"streamwire keepalive {self.producer_id}")

    def __enter__(self) -> Producer:
        if self._keepalive_interval is not None:
            self._keeper.start(self._keepalives)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._keeper.stop()

    def append(self, chunks: Iterable[tuple[int, Any]]) -> list[int]:
        """Append ``(step, chunk)`` pairs (chunks: any JSON value) as one batch; return their
        sequences (the original ones if the batch had already been stored)."""
        return self._send(self.session.chunks(chunks))

    def append_chunk(self, step: int, chunk: Any) -> int:
        """Append one chunk; return its sequence."""
        sequences = self.append([(step, chunk)])
        return sequences[0]

    def end(
        self, status: EndStatus = "completed", *, output: Any = None, state: Any = None,
        usage: Mapping[str, Any] | None = None,
    ) -> None:
        """End the stream with ``status``."""
        self._send(self.session.end(status, output, state, usage))

    def fail(
        self, error: str, *, recoverable: bool = False,
        error_detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Fail the stream (``recoverable``: readers re-attach and wait for more)."""
        self._send(self.session.fail(error, recoverable, error_detail))

    def keepalive(self) -> None:
        """Renew the writer's lease now."""
        self._send(self.session.keepalive())

    def _send(self, call: ProducerCall) -> list[int]:
        with self._lock:
            while True:
                try:
                    response = self._client.send(self._request(self._client, call))
                except httpx.TransportError as exc:
                    error = self.session.lost(call, exc)
                else:
                    try:
                        return self._answer(call, response)
                    except StreamwireError as exc:
                        error = exc
                sleep(self._failed(call, error))

    def _keepalives(self) -> None:
        while self._keeper.running:
            wait = self._idle_for()
            if wait > 0:
                self._keeper.sleep(wait)
                continue
            try:
                self.keepalive()
            except StreamwireError as exc:
                if not self._keepalive_failed(exc):
                    return
