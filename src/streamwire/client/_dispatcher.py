"""The dispatcher (the seed's ``HttpRemoteAgentTransport``): start, follow, stop and recover runs
of a streamwire server's runs API over httpx (``_dispatcher_sync.py`` is generated from
``_dispatcher.py``); every decision is ``_dispatch_core``'s.

::

    async with httpx.AsyncClient() as client:
        dispatcher = AsyncDispatcher(client, BASE, decode=ChunkCodec(Chat).decode)
        run = await dispatcher.start("demo", {"prompt": "hi"})
        async for msg in run:
            ...  # typed events, each once, in order
        run.outcome  # RunOutcome: completed|stopped|retry|failed

Guarantees: a start (and a resume) is sent with an id the dispatcher chose, and when its answer is
lost the dispatcher asks ``/status`` for that id before deciding to send it again, so the agent
runs once. A drop re-attaches from the cursor (``Last-Event-ID``) with backoff; the terminal
frame maps through ``remote_terminal_outcome``; a recoverable ``fail``, a truncation or a drop
that re-attaching cannot settle is resolved through ``/status`` (``WORKER_LOST`` included).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar, overload

import httpx

from ..errors import StreamwireError
from ..frames import ChunkFrame
from ..runs import RunOutcome
from ._concurrency import asleep
from ._core import DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, RetryPolicy
from ._dispatch_core import (
    DEFAULT_RECOVER_TIMEOUT,
    DispatcherBase,
    Follow,
    error_for,
    now,
    retryable_error,
)

__all__ = ["AsyncDispatcher", "AsyncRun"]

T = TypeVar("T")


class AsyncRun(Generic[T]):
    """One run a dispatcher follows (``AsyncDispatcher.start``, ``resume``, ``follow``):
    ``async for item in run``, then ``outcome``."""

    def __init__(self, dispatcher: AsyncDispatcher[T], run_id: str, cursor: int = 0,
                 created: bool | None = None, *, confirm_paused: bool = False) -> None:
        self.dispatcher = dispatcher
        self.run_id = run_id
        #: True when this dispatcher's request created the run (None: not known, e.g. follow).
        self.created = created
        self._follow = dispatcher.follow_state(run_id, cursor, confirm_paused=confirm_paused)

    @property
    def cursor(self) -> int:
        """The last sequence delivered (re-attaches send it as ``Last-Event-ID``)."""
        return self._follow.cursor

    @property
    def outcome(self) -> RunOutcome | None:
        """How the run settled, once it did."""
        return self._follow.outcome

    @property
    def connections(self) -> int:
        """Connections opened to the run's stream so far."""
        return self._follow.connections

    def __aiter__(self) -> AsyncIterator[T]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[T]:
        d, f = self.dispatcher, self._follow
        url = d.url(self.run_id, "sse")
        while f.outcome is None:
            if f.delay:
                await asleep(f.delay)
                f.delay = 0.0
            if f.need_status:
                await self._recover()
                continue
            try:
                opened = d.client.stream("GET", url, headers={**d.headers, **f.begin()},
                                         timeout=d.timeout)
                async with opened as response:
                    if response.status_code != 200:
                        raise error_for(response.status_code, await response.aread(), self.run_id)
                    async for data in response.aiter_bytes():
                        for chunk in f.feed(data):
                            yield d.item(chunk)
                        if f.outcome is not None or f.need_status:
                            break
                    else:
                        for chunk in f.end_of_body():
                            yield d.item(chunk)
            except (httpx.TransportError, StreamwireError) as exc:
                if isinstance(exc, StreamwireError) and not exc.retryable:
                    raise
                f.failed(exc, now())

    async def _recover(self) -> None:
        f = self._follow
        try:
            body = await self.dispatcher.status(self.run_id)
        except (httpx.TransportError, StreamwireError) as exc:
            if isinstance(exc, StreamwireError) and not exc.retryable:
                raise
            f.status_unavailable(exc, now())
            return
        f.status_answer(body, now())

    async def result(self) -> RunOutcome:
        """Follow to the end (discarding the items); the outcome."""
        async for _ in self:
            pass
        assert self.outcome is not None
        return self.outcome

    async def stop(self) -> dict[str, Any]:
        """Stop the run (``POST /runs/{id}/stop``); its status once settled."""
        return await self.dispatcher.stop(self.run_id)


class AsyncDispatcher(DispatcherBase[T]):
    """Start, follow, stop and recover runs over an ``httpx.AsyncClient`` (not closed by it).

    Args:
        client: the httpx client; ``base_url``: the server (``http://host:port``).
        decode: turns each chunk into the item yielded (``ChunkCodec(Chat).decode``).
        headers: extra request headers (``Authorization: Bearer ...``).
        retry: re-attach and request retry policy (``RetryPolicy``).
        recover_timeout: seconds to keep asking ``/status`` while a broken run says running.
        poll_interval: seconds between those questions.
    """

    @overload
    def __init__(self: AsyncDispatcher[ChunkFrame], client: httpx.AsyncClient,
                 base_url: str | httpx.URL = "", *, decode: None = None,
                 headers: dict[str, str] | None = None, retry: RetryPolicy | None = None,
                 recover_timeout: float = DEFAULT_RECOVER_TIMEOUT, poll_interval: float = 0.25,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None: ...
    @overload
    def __init__(self, client: httpx.AsyncClient, base_url: str | httpx.URL = "", *,
                 decode: Callable[[ChunkFrame], T], headers: dict[str, str] | None = None,
                 retry: RetryPolicy | None = None,
                 recover_timeout: float = DEFAULT_RECOVER_TIMEOUT, poll_interval: float = 0.25,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None: ...
    def __init__(self, client: httpx.AsyncClient, base_url: str | httpx.URL = "", *,
                 decode: Callable[[ChunkFrame], T] | None = None,
                 headers: dict[str, str] | None = None, retry: RetryPolicy | None = None,
                 recover_timeout: float = DEFAULT_RECOVER_TIMEOUT, poll_interval: float = 0.25,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        super().__init__(base_url, decode, headers=headers, retry=retry,
                         recover_timeout=recover_timeout, poll_interval=poll_interval,
                         idle_timeout=idle_timeout, connect_timeout=connect_timeout)
        self.client = client

    async def start(
        self, agent: str, input: Any = None, *, run_id: str | None = None,
    ) -> AsyncRun[T]:
        """Start ``agent`` with ``input`` exactly once (as run ``run_id``, minted if None)."""
        run_id, body = self.start_body(agent, input, run_id)
        answer = await self._entry("start", self.url(None), body, run_id)
        return AsyncRun(self, run_id, 0, answer.get("created"))

    async def resume(
        self, run_id: str, input: Any = None, *, resume_id: str | None = None, cursor: int = 0,
    ) -> AsyncRun[T]:
        """Resume paused run ``run_id`` exactly once; follow it from ``cursor``."""
        body = self.resume_body(input, resume_id)
        answer = await self._entry("resume", self.url(run_id, "resume"), body, run_id)
        # Recovered through /status (its answer lost): the stream may still end with the pause
        # this resume ended, until the server reopens it; /status confirms an end{paused}.
        created = answer.get("created")
        return AsyncRun(self, run_id, cursor, created, confirm_paused=created is None)

    def follow(self, run_id: str, *, cursor: int = 0) -> AsyncRun[T]:
        """Follow a run started elsewhere, from ``cursor``."""
        return AsyncRun(self, run_id, cursor)

    async def status(self, run_id: str) -> dict[str, Any]:
        """``GET /runs/{id}/status`` (``RunNotFoundError`` for an unknown run)."""
        response = await self.client.get(
            self.url(run_id, "status"), headers=self.headers, timeout=self.timeout)
        if response.status_code != 200:
            raise error_for(response.status_code, response.content, run_id)
        answer: dict[str, Any] = response.json()
        return answer

    async def stop(self, run_id: str) -> dict[str, Any]:
        """``POST /runs/{id}/stop`` (idempotent, so retried on a lost answer); the status."""
        answer = await self._call("POST", self.url(run_id, "stop"), run_id)
        assert answer is not None
        return answer

    async def _entry(
        self, kind: str, url: str, body: dict[str, Any], run_id: str,
    ) -> dict[str, Any]:
        follow = self.follow_state(run_id, 0)
        while True:
            try:
                response = await self.client.post(
                    url, json=body, headers=self.headers, timeout=self.timeout)
                if response.status_code in (200, 201):
                    answer: dict[str, Any] = response.json()
                    return {**answer, "created": answer.get("resumed", response.status_code == 201)}
                raise error_for(response.status_code, response.content,
                                "start" if kind == "start" else run_id)
            except (httpx.TransportError, StreamwireError) as exc:
                if isinstance(exc, StreamwireError) and not exc.retryable:
                    raise
                lost = exc
            # The answer is lost: ask /status for the id we chose before sending again.
            status = await self._status_after_loss(run_id, follow)
            if self.settled_entry(kind, status):
                assert status is not None
                return {**status, "created": None}
            await asleep(follow.backoff.next_delay(retryable_error(lost), now(), None, 0))

    async def _status_after_loss(self, run_id: str, follow: Follow) -> dict[str, Any] | None:
        return await self._call(
            "GET", self.url(run_id, "status"), run_id, missing_ok=True, follow=follow)

    async def _call(
        self, method: str, url: str, run_id: str, *, missing_ok: bool = False,
        follow: Follow | None = None,
    ) -> dict[str, Any] | None:
        """A request the run allows to repeat, retried until it is answered (None: a 404 when
        ``missing_ok``); a final error answer raises its typed error."""
        follow = follow or self.follow_state(run_id, 0)
        while True:
            try:
                response = await self.client.request(
                    method, url, headers=self.headers, timeout=self.timeout)
                if response.status_code == 404 and missing_ok:
                    return None
                if response.status_code == 200:
                    answer: dict[str, Any] = response.json()
                    return answer
                raise error_for(response.status_code, response.content, run_id)
            except (httpx.TransportError, StreamwireError) as exc:
                if isinstance(exc, StreamwireError) and not exc.retryable:
                    raise
                await asleep(follow.backoff.next_delay(retryable_error(exc), now(), None, 0))
