"""``AsyncProducer`` and ``Producer``: write a stream over the HTTP write API exactly once, from any
process, across server restarts and network faults.

::

    async with AsyncProducer(client, "http://127.0.0.1:8000", "s1", token=TOKEN) as producer:
        await producer.append([(0, {"text": "Hel"}), (0, {"text": "lo"})])   # -> [1, 2]
        await producer.end("completed")

    with Producer(httpx.Client(), base_url, "s1", token=TOKEN) as producer:
        producer.append_chunk(0, {"text": "hi"})                             # -> 1
        producer.fail("tool crashed", error_detail={"code": "TOOL"})

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

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import httpx

from ..errors import ResponseStatusError, StreamwireError
from ..frames import EndStatus
from ._base import LOGGER
from ._core import RetryPolicy
from ._http import bearer_headers
from ._producer_core import (
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_PRODUCER_RETRY,
    DEFAULT_REQUEST_TIMEOUT,
    ProducerCall,
    ProducerSession,
)

__all__ = ["AsyncProducer", "Producer"]


class _ProducerBase:
    """What both producers share: the session, the request headers, the keepalive clock."""

    def __init__(self, base_url: str | httpx.URL, stream_id: str, *, producer_id: str | None,
                 epoch: int, seq: int, retry: RetryPolicy | None, token: str | None,
                 headers: Mapping[str, str] | None, keepalive_interval: float | None,
                 timeout: float) -> None:
        if keepalive_interval is not None and keepalive_interval <= 0:
            raise ValueError("keepalive_interval must be > 0 (or None for no keepalives)")
        self._base = httpx.URL(str(base_url).rstrip("/") + "/")
        self.session = ProducerSession(stream_id, producer_id or uuid.uuid4().hex, epoch, seq,
                                       retry or DEFAULT_PRODUCER_RETRY)
        self._headers = {**(headers or {}), **bearer_headers(token)}
        self._keepalive_interval = keepalive_interval
        self._timeout = timeout
        self._last_request = time.monotonic()

    @property
    def producer_id(self) -> str:
        """This producer's id (``Producer-Id``)."""
        return self.session.producer_id

    @property
    def epoch(self) -> int:
        return self.session.epoch

    @property
    def seq(self) -> int:
        """The sequence the next write request gets."""
        return self.session.seq

    def _request(self, client: httpx.Client | httpx.AsyncClient, call: ProducerCall
                 ) -> httpx.Request:
        self._last_request = time.monotonic()
        return client.build_request("POST", self._base.join(call.path), content=call.body,
                                    headers={**self._headers, **self.session.headers(call)},
                                    timeout=self._timeout)

    def _idle_for(self) -> float:
        """Seconds until a keepalive is due (<= 0: now)."""
        assert self._keepalive_interval is not None
        return self._last_request + self._keepalive_interval - time.monotonic()

    def _failed(self, call: ProducerCall, error: StreamwireError) -> float:
        """Seconds to wait before sending ``call`` again (said on the log), or raise: ``error``
        when it is final or ``call`` is a keepalive (the next one is due soon anyway),
        ``RetriesExhaustedError`` when the retries ran out."""
        if call.seq is None:
            raise error
        delay = self.session.retry_delay(call, error, time.monotonic())
        attempt = self.session.backoff.attempt
        LOGGER.log(logging.INFO if attempt == 1 else logging.WARNING,
                   "%s; sending it again in %.1fs (attempt %d)", error, delay, attempt)
        return delay

    def _keepalive_failed(self, exc: BaseException) -> bool:
        """Log a failed keepalive; False when keepalives should stop: the server has no such
        route (404/405; its writes renew the lease, or it keeps none), so asking again is noise."""
        self._last_request = time.monotonic()
        if isinstance(exc, ResponseStatusError) and exc.status_code in (404, 405):
            LOGGER.info("producer %r: the server does not serve keepalives (%s); not sending "
                        "more", self.producer_id, exc)
            return False
        LOGGER.warning("producer %r: keepalive failed: %s", self.producer_id, exc)
        return True


class AsyncProducer(_ProducerBase):
    """The idempotent producer for ``httpx.AsyncClient`` (use it as ``async with``, which runs
    the keepalives; the client is not closed by it).

    Args:
        client: the ``httpx.AsyncClient`` to send with.
        base_url: the server (``http://127.0.0.1:8000``), routes are ``streams/{id}/...`` below it.
        stream_id: the stream to write (created beforehand, e.g. ``PUT /streams/{id}``).
        producer_id: this producer's id (default: a random one).
        epoch, seq: where this producer starts (a restarted producer: a higher epoch, seq 0).
        retry: the backoff and caps for retries (default ``DEFAULT_PRODUCER_RETRY``).
        token: sent as ``Authorization: Bearer``; headers: extra request headers.
        keepalive_interval: seconds of idleness between keepalives (None: none).
        timeout: seconds for one request before it counts as lost (and is retried).

    Raises (from the calls): ``ProducerSequenceError`` and ``ProducerEpochError`` (final),
    ``ResponseStatusError`` (a refusal: nothing stored), ``RetriesExhaustedError``.
    """

    def __init__(self, client: httpx.AsyncClient, base_url: str | httpx.URL, stream_id: str, *,
                 producer_id: str | None = None, epoch: int = 0, seq: int = 0,
                 retry: RetryPolicy | None = None, token: str | None = None,
                 headers: Mapping[str, str] | None = None,
                 keepalive_interval: float | None = DEFAULT_KEEPALIVE_INTERVAL,
                 timeout: float = DEFAULT_REQUEST_TIMEOUT) -> None:
        super().__init__(base_url, stream_id, producer_id=producer_id, epoch=epoch, seq=seq,
                         retry=retry, token=token, headers=headers,
                         keepalive_interval=keepalive_interval, timeout=timeout)
        self._client = client
        self._lock = anyio.Lock()
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> AsyncProducer:
        if self._keepalive_interval is not None:
            self._group = anyio.create_task_group()
            await self._group.__aenter__()
            self._group.start_soon(self._keepalives)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        group, self._group = self._group, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)

    async def append(self, chunks: Iterable[tuple[int, Any]]) -> list[int]:
        """Append ``(step, chunk)`` pairs (chunks: any JSON value) as one batch; return their
        sequences (the original ones if the batch had already been stored)."""
        return await self._send(self.session.chunks(chunks))

    async def append_chunk(self, step: int, chunk: Any) -> int:
        """Append one chunk; return its sequence."""
        return (await self.append([(step, chunk)]))[0]

    async def end(self, status: EndStatus = "completed", *, output: Any = None, state: Any = None,
                  usage: Mapping[str, Any] | None = None) -> None:
        """End the stream with ``status``."""
        await self._send(self.session.end(status, output, state, usage))

    async def fail(self, error: str, *, recoverable: bool = False,
                   error_detail: Mapping[str, Any] | None = None) -> None:
        """Fail the stream (``recoverable``: readers re-attach and wait for more)."""
        await self._send(self.session.fail(error, recoverable, error_detail))

    async def keepalive(self) -> None:
        """Renew the writer's lease now."""
        await self._send(self.session.keepalive())

    async def _send(self, call: ProducerCall) -> list[int]:
        async with self._lock:
            while True:
                try:
                    response = await self._client.send(self._request(self._client, call))
                except httpx.TransportError as exc:
                    error = self.session.lost(call, exc)
                else:
                    try:
                        return self.session.answer(call, response.status_code, response.content,
                                                   response.headers.get("retry-after"))
                    except StreamwireError as exc:
                        error = exc
                await anyio.sleep(self._failed(call, error))

    async def _keepalives(self) -> None:
        while True:
            wait = self._idle_for()
            if wait > 0:
                await anyio.sleep(wait)
                continue
            try:
                await self.keepalive()
            except StreamwireError as exc:
                if not self._keepalive_failed(exc):
                    return


class Producer(_ProducerBase):
    """The sync twin of ``AsyncProducer`` over an ``httpx.Client`` (same arguments and calls);
    ``with Producer(...) as producer:`` runs the keepalives in a thread it stops on exit."""

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
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Producer:
        if self._keepalive_interval is not None:
            self._thread = threading.Thread(target=self._keepalives, daemon=True,
                                            name=f"streamwire keepalive {self.producer_id}")
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def append(self, chunks: Iterable[tuple[int, Any]]) -> list[int]:
        """See ``AsyncProducer.append``."""
        return self._send(self.session.chunks(chunks))

    def append_chunk(self, step: int, chunk: Any) -> int:
        """Append one chunk; return its sequence."""
        return self.append([(step, chunk)])[0]

    def end(self, status: EndStatus = "completed", *, output: Any = None, state: Any = None,
            usage: Mapping[str, Any] | None = None) -> None:
        """End the stream with ``status``."""
        self._send(self.session.end(status, output, state, usage))

    def fail(self, error: str, *, recoverable: bool = False,
             error_detail: Mapping[str, Any] | None = None) -> None:
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
                        return self.session.answer(call, response.status_code, response.content,
                                                   response.headers.get("retry-after"))
                    except StreamwireError as exc:
                        error = exc
                time.sleep(self._failed(call, error))

    def _keepalives(self) -> None:
        while not self._stop.is_set():
            wait = self._idle_for()
            if wait > 0:
                self._stop.wait(wait)
                continue
            try:
                self.keepalive()
            except StreamwireError as exc:
                if not self._keepalive_failed(exc):
                    return
