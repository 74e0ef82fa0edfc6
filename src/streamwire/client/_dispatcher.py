"""The dispatcher (the seed's ``HttpRemoteAgentTransport``): start, follow, stop and recover runs
of a streamwire server's runs API over httpx. ``AsyncDispatcher`` here, ``Dispatcher`` (sync) in
``_dispatcher_sync``; every decision is ``_dispatch_core``'s.

::

    async with httpx.AsyncClient() as client:
        dispatcher = AsyncDispatcher(client, "http://127.0.0.1:8000",
                                     decode=ChunkCodec(Chat).decode)
        run = await dispatcher.start("demo", {"prompt": "hi"})
        async for msg in run:                       # typed events, each once, in order
            ...
        run.outcome                                 # RunOutcome: completed|stopped|retry|failed

Guarantees: a start (and a resume) is sent with an id the dispatcher chose, and when its answer is
lost the dispatcher asks ``/status`` for that id before deciding to send it again, so the agent
runs once. A drop re-attaches from the cursor (``Last-Event-ID``) with backoff; the terminal
frame maps through ``remote_terminal_outcome``; a recoverable ``fail``, a truncation or a drop
that re-attaching cannot settle is resolved through ``/status`` (``WORKER_LOST`` included).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar, overload

import anyio
import httpx

from ..errors import StreamwireError
from ..frames import ChunkFrame
from ..runs import RunOutcome
from ._core import DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, RetryPolicy
from ._dispatch_core import DEFAULT_RECOVER_TIMEOUT, Follow, error_for, now

__all__ = ["AsyncDispatcher", "AsyncRun", "DispatcherBase", "retryable_error"]

T = TypeVar("T")


class DispatcherBase(Generic[T]):
    """What the async and sync dispatchers share: options, URLs, request bodies."""

    def __init__(self, base_url: str | httpx.URL, decode: Callable[[ChunkFrame], T] | None, *,
                 headers: dict[str, str] | None, retry: RetryPolicy | None,
                 recover_timeout: float, poll_interval: float, idle_timeout: float | None,
                 connect_timeout: float) -> None:
        self.base_url = str(base_url).rstrip("/")
        self.decode = decode
        self.headers = dict(headers or {})
        self.retry = retry or RetryPolicy()
        self.recover_timeout = recover_timeout
        self.poll_interval = poll_interval
        self.timeout = httpx.Timeout(connect_timeout, read=idle_timeout)

    def url(self, run_id: str | None, tail: str = "") -> str:
        return f"{self.base_url}/runs" + (f"/{run_id}/{tail}" if run_id else "")

    def item(self, chunk: ChunkFrame) -> T:
        if self.decode is None:
            return chunk  # type: ignore[return-value]  # T is ChunkFrame when decode is None
        return self.decode(chunk)

    def follow_state(self, run_id: str, cursor: int) -> Follow:
        return Follow(run_id, cursor, self.retry, self.recover_timeout, self.poll_interval)

    @staticmethod
    def start_body(agent: str, input: Any, run_id: str | None) -> tuple[str, dict[str, Any]]:
        run_id = run_id or uuid.uuid4().hex
        return run_id, {"agent": agent, "input": input, "runId": run_id}

    @staticmethod
    def resume_body(input: Any, resume_id: str | None) -> dict[str, Any]:
        return {"input": input, "resumeId": resume_id or uuid.uuid4().hex}

    @staticmethod
    def settled_entry(kind: str, status: dict[str, Any] | None) -> bool:
        """After a lost answer: did the start (resume) arrive, judging by ``/status``? A start
        did when the run exists; a resume when the run is no longer paused."""
        if status is None:
            return False
        return kind == "start" or status.get("status") != "paused"


class AsyncRun(Generic[T]):
    """One run followed by an ``AsyncDispatcher``: ``async for item in run``, then ``outcome``."""

    def __init__(self, dispatcher: AsyncDispatcher[T], run_id: str, cursor: int = 0,
                 created: bool | None = None) -> None:
        self.dispatcher = dispatcher
        self.run_id = run_id
        #: True when this dispatcher's request created the run (None: not known, e.g. follow).
        self.created = created
        self._follow = dispatcher.follow_state(run_id, cursor)

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
                await anyio.sleep(f.delay)
                f.delay = 0.0
            if f.need_status:
                await self._recover()
                continue
            try:
                async with d.client.stream("GET", url, headers={**d.headers, **f.begin()},
                                           timeout=d.timeout) as response:
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

    async def start(self, agent: str, input: Any = None, *, run_id: str | None = None
                    ) -> AsyncRun[T]:
        """Start ``agent`` with ``input`` exactly once (as run ``run_id``, minted if None)."""
        run_id, body = self.start_body(agent, input, run_id)
        answer = await self._entry("start", self.url(None), body, run_id)
        return AsyncRun(self, run_id, 0, answer.get("created"))

    async def resume(self, run_id: str, input: Any = None, *, resume_id: str | None = None,
                     cursor: int = 0) -> AsyncRun[T]:
        """Resume paused run ``run_id`` exactly once; follow it from ``cursor``."""
        answer = await self._entry("resume", self.url(run_id, "resume"),
                                   self.resume_body(input, resume_id), run_id)
        return AsyncRun(self, run_id, cursor, answer.get("created"))

    def follow(self, run_id: str, *, cursor: int = 0) -> AsyncRun[T]:
        """Follow a run started elsewhere, from ``cursor``."""
        return AsyncRun(self, run_id, cursor)

    async def status(self, run_id: str) -> dict[str, Any]:
        """``GET /runs/{id}/status`` (``RunNotFoundError`` for an unknown run)."""
        response = await self.client.get(self.url(run_id, "status"), headers=self.headers,
                                         timeout=self.timeout)
        if response.status_code != 200:
            raise error_for(response.status_code, response.content, run_id)
        answer: dict[str, Any] = response.json()
        return answer

    async def stop(self, run_id: str) -> dict[str, Any]:
        """``POST /runs/{id}/stop`` (idempotent, so retried on a lost answer); the status."""
        answer = await self._call("POST", self.url(run_id, "stop"), run_id)
        assert answer is not None
        return answer

    async def _entry(self, kind: str, url: str, body: dict[str, Any], run_id: str
                     ) -> dict[str, Any]:
        follow = self.follow_state(run_id, 0)
        while True:
            try:
                response = await self.client.post(url, json=body, headers=self.headers,
                                                  timeout=self.timeout)
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
            await anyio.sleep(follow.backoff.next_delay(retryable_error(lost), now(), None, 0))

    async def _status_after_loss(self, run_id: str, follow: Follow) -> dict[str, Any] | None:
        return await self._call("GET", self.url(run_id, "status"), run_id, missing_ok=True,
                                follow=follow)

    async def _call(self, method: str, url: str, run_id: str, *, missing_ok: bool = False,
              follow: Follow | None = None) -> dict[str, Any] | None:
        """A request the run allows to repeat, retried until it is answered (None: a 404 when
        ``missing_ok``); a final error answer raises its typed error."""
        follow = follow or self.follow_state(run_id, 0)
        while True:
            try:
                response = await self.client.request(method, url, headers=self.headers,
                                                     timeout=self.timeout)
                if response.status_code == 404 and missing_ok:
                    return None
                if response.status_code == 200:
                    answer: dict[str, Any] = response.json()
                    return answer
                raise error_for(response.status_code, response.content, run_id)
            except (httpx.TransportError, StreamwireError) as exc:
                if isinstance(exc, StreamwireError) and not exc.retryable:
                    raise
                await anyio.sleep(follow.backoff.next_delay(retryable_error(exc), now(), None, 0))


def retryable_error(exc: BaseException) -> StreamwireError:
    """``exc`` as a retryable streamwire error (the backoff's input)."""
    if isinstance(exc, StreamwireError):
        return exc
    error = StreamwireError(f"{type(exc).__name__}: {exc}", retryable=True)
    error.__cause__ = exc
    return error
