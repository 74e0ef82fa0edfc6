"""Clients settle on stored terminals (issue 22, Deliver 5), over real uvicorn and sockets.

A run whose stream holds a recoverable ``fail{WRITER_GONE}`` (a lost writer's): the resumable
streams (async and sync), the chat replies and the dispatcher settle within seconds after at most
two connections, and ``streamwire tail`` prints the failure once and exits 1. A first recoverable
fail still re-attaches once; the same one again at the same cursor is stored (``RepeatedFail``).
And a resume whose answer is lost, while its stream still ends ``paused``, is recovered by the
dispatcher with exactly one resume and the resumed run's real outcome, and every chunk the resume
emitted, also when the run ended before the dispatcher's ``/status`` question.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from helpers.runs_agents import pauser
from helpers.runs_server import Backend, backend
from helpers.settle import WRITER_GONE, Handle, blocked, serving_runs, stored_fail_run
from streamwire.chat import Chat
from streamwire.client import (
    AsyncChatReply,
    AsyncDispatcher,
    AsyncResumableStream,
    AsyncRun,
    ChatReply,
    Dispatcher,
    ResumableStream,
    RetryPolicy,
)
from streamwire.client._dispatch_core import Follow
from streamwire.errors import StreamFailedError
from streamwire.frames import (
    ChunkCodec,
    ChunkFrame,
    EndFrame,
    FailFrame,
    RemoteOutcomeKind,
    RepeatedFail,
    encode_stream_frame,
)
from streamwire.log import StreamLog

__all__ = ["backend"]

LIMIT = 5.0


@pytest.fixture
def stored(backend: Backend) -> Any:
    with serving_runs(backend, [blocked, pauser], poll_interval=0.05, lease_time=3.0) as handle:
        run_id = f"r{uuid.uuid4().hex[:8]}"
        stored_fail_run(handle, run_id)
        yield handle, run_id


def _check_fail(exc: StreamFailedError) -> None:
    assert exc.recoverable
    assert not exc.retryable
    assert exc.error_detail == WRITER_GONE


# -- the resumable streams -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_async_stream_raises_the_stored_fail_after_two_attempts(
        stored: tuple[Handle, str]) -> None:
    handle, run_id = stored
    began = time.monotonic()

    async def read(stream: AsyncResumableStream[ChunkFrame]) -> None:
        async with stream:
            async for _ in stream:
                pass

    async with httpx.AsyncClient() as client:
        stream = AsyncResumableStream(client, f"{handle.base}/runs/{run_id}/sse")
        with pytest.raises(StreamFailedError) as info:
            await read(stream)
    took = time.monotonic() - began
    _check_fail(info.value)
    assert (stream.cursor, stream.stats.delivered) == (1, 1)  # each chunk once
    assert stream.stats.connections == 2
    assert took < LIMIT, f"settled after {took:.1f} s"


def test_the_sync_stream_raises_the_stored_fail_after_two_attempts(
        stored: tuple[Handle, str]) -> None:
    handle, run_id = stored
    began = time.monotonic()
    with httpx.Client() as client:
        stream = ResumableStream(client, f"{handle.base}/runs/{run_id}/sse")
        with pytest.raises(StreamFailedError) as info, stream:
            for _ in stream:
                pass
    took = time.monotonic() - began
    _check_fail(info.value)
    assert (stream.cursor, stream.stats.delivered) == (1, 1)
    assert stream.stats.connections == 2
    assert took < LIMIT, f"settled after {took:.1f} s"


# -- the chat replies ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_async_chat_reply_ends_with_the_stored_fail(stored: tuple[Handle, str]) -> None:
    handle, run_id = stored
    began = time.monotonic()
    async with (httpx.AsyncClient() as client,
                AsyncChatReply(client, f"{handle.base}/runs/{run_id}/sse") as reply):
        events = [(msg.name, msg.data) async for msg in reply.messages()]
    took = time.monotonic() - began
    assert events[0] == ("chunk", {"chunk": "a "})
    name, data = events[-1]
    assert name == "error", events
    assert data["message"] == "the stream's writer is gone", data
    assert reply.failure is not None
    _check_fail(reply.failure)
    assert reply._stream.stats.connections == 2
    assert took < LIMIT, f"settled after {took:.1f} s"


def test_the_sync_chat_reply_ends_with_the_stored_fail(stored: tuple[Handle, str]) -> None:
    handle, run_id = stored
    began = time.monotonic()
    with httpx.Client() as client, ChatReply(client, f"{handle.base}/runs/{run_id}/sse") as reply:
        events = [msg.name for msg in reply.messages()]
    took = time.monotonic() - began
    assert events[0] == "chunk"
    assert events[-1] == "error", events
    assert reply.failure is not None
    _check_fail(reply.failure)
    assert reply._stream.stats.connections == 2
    assert took < LIMIT, f"settled after {took:.1f} s"


# -- the dispatcher --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_dispatcher_settles_through_status(stored: tuple[Handle, str]) -> None:
    handle, run_id = stored
    began = time.monotonic()
    async with httpx.AsyncClient() as client:
        run = AsyncDispatcher(client, handle.base).follow(run_id)
        items = [item.sequence async for item in run]
    took = time.monotonic() - began
    assert items == [1]
    assert run.outcome is not None
    assert run.outcome.source == "status"
    assert run.outcome.kind is RemoteOutcomeKind.RETRY  # failed, recoverable
    assert run.outcome.error_detail == WRITER_GONE
    assert run.connections <= 2
    assert took < LIMIT, f"settled after {took:.1f} s"


def test_the_sync_dispatcher_settles_through_status(stored: tuple[Handle, str]) -> None:
    handle, run_id = stored
    began = time.monotonic()
    with httpx.Client() as client:
        outcome = Dispatcher(client, handle.base).follow(run_id).result()
    assert outcome.source == "status"
    assert outcome.error_detail == WRITER_GONE
    assert time.monotonic() - began < LIMIT


def _body(*frames: ChunkFrame | EndFrame | FailFrame) -> bytes:
    return b"".join(encode_stream_frame(f) for f in frames)


def test_a_follow_asks_status_not_the_stream_while_its_stored_fail_stands() -> None:
    # The stream holds a fail while /status still says running: once a re-attach answered the
    # same fail at the same cursor, the follow asks /status, not the stream, until the head moves.
    gone = FailFrame("the stream's writer is gone", True, WRITER_GONE)
    follow = Follow("r", 3, RetryPolicy(), recover_timeout=60, poll_interval=0.1)
    for connection in (1, 2):
        follow.begin()
        assert follow.feed(_body(gone)) == []
        assert follow.need_status
        assert follow.outcome is None
        follow.status_answer({"status": "running", "head": 3}, now=float(connection))
        assert follow.need_status is (connection == 2)  # the first fail re-attaches once
    follow.status_answer({"status": "running", "head": 3}, now=3.0)
    assert follow.need_status  # still the stored fail
    follow.status_answer({"status": "running", "head": 4}, now=4.0)
    assert not follow.need_status  # the stream moved on: read it
    follow.status_answer({"status": "failed", "recoverable": True, "errorDetail": WRITER_GONE,
                          "error": "gone"}, now=5.0)
    assert follow.outcome is not None
    assert follow.outcome.error_detail == WRITER_GONE


def test_repeated_fail_is_the_same_fail_at_the_same_cursor() -> None:
    rule = RepeatedFail()
    gone = FailFrame("gone", True, WRITER_GONE)
    assert not rule.seen(gone, 1)
    assert rule.seen(gone, 1)
    assert not rule.seen(gone, 2)  # a new chunk came in between
    assert not rule.seen(FailFrame("gone", True, {"code": "WORKER_LOST"}), 2)
    assert not rule.seen(FailFrame("fatal", False), 2)
    assert not rule.seen(FailFrame("fatal", False), 2)  # a final fail is not this rule's
    rule.seen(gone, 2)
    rule.forget()
    assert not rule.seen(gone, 2)



def test_a_status_that_ended_past_the_cursor_reads_the_stream_first() -> None:
    # A resume recovered through /status: the stream still ended paused at cursor 2, and by the
    # time /status is asked the resumed run has completed at head 4. Its chunks 3 and 4 are read
    # from the stream before the run settles; once per head (a stream that no longer has them
    # settles on the status's answer).
    follow = Follow("r", 2, RetryPolicy(), recover_timeout=60, poll_interval=0.1,
                    confirm_paused=True)
    follow.begin()
    assert follow.feed(_body(EndFrame(status="paused"))) == []
    assert follow.need_status
    assert follow.outcome is None
    completed = {"status": "completed", "head": 4, "output": "done"}
    follow.status_answer(completed, now=1.0)
    assert follow.outcome is None
    assert not follow.need_status
    assert follow.begin()["Last-Event-ID"] == "2"
    chunks = [ChunkFrame(sequence=n, chunk=msgspec.Raw(b'"x"')) for n in (3, 4)]
    assert follow.feed(_body(*chunks, EndFrame(status="completed", output="done"))) == chunks
    assert follow.outcome is not None
    assert follow.outcome.status == "completed"

    gone = Follow("r", 2, RetryPolicy(), recover_timeout=60, poll_interval=0.1)
    gone.status_answer(completed, now=1.0)
    assert gone.outcome is None  # read the stream first
    gone.status_answer(completed, now=2.0)  # it gave nothing past 2 (truncated): settle
    assert gone.outcome is not None
    assert gone.outcome.status == "completed"


# -- streamwire tail -------------------------------------------------------------------------------


def test_tail_prints_the_stored_fail_once_and_exits_1(stored: tuple[Handle, str]) -> None:
    handle, run_id = stored
    env = {k: v for k, v in os.environ.items() if k != "STREAMWIRE_TOKEN"}
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "streamwire.cli", "tail", f"{handle.base}/runs/{run_id}/sse",
         "--json"], capture_output=True, text=True, timeout=30, check=False, env=env)
    took = time.monotonic() - began
    assert done.returncode == 1, done.stderr
    kinds = [line.split('"kind": ')[1].split('"')[1] for line in done.stdout.splitlines()
             if '"kind": ' in line]
    assert kinds.count("fail") == 1, done.stdout
    assert kinds.count("chunk") == 1, done.stdout
    assert "returned the same failure with no new chunk" in done.stderr, done.stderr
    assert "gave up" not in done.stderr
    assert took < LIMIT + 2, f"tail took {took:.1f} s"  # the interpreter's start included


# -- a resume whose answer is lost ---------------------------------------------------------------


class _LoseResumeAnswer(httpx.AsyncBaseTransport):
    """Sends the first ``POST .../resume`` and gives up on its answer after ``after`` seconds
    (the request goes on at the server: its answer is lost, not the resume)."""

    def __init__(self, after: float) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.after = after
        self.pending: list[asyncio.Task[httpx.Response]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/resume") and not self.pending:
            self.pending.append(asyncio.ensure_future(self.inner.handle_async_request(request)))
            await asyncio.sleep(self.after)
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        for task in self.pending:
            response = await task
            await response.aclose()
        await self.inner.aclose()


class _StaleFirstRead(httpx.AsyncBaseTransport):
    """Answers the first ``GET .../sse`` with ``stale`` (the stream as it was before the resume,
    ``end{paused}``: a read that landed before the server reopened it); everything else goes to
    the server."""

    def __init__(self, stale: bytes) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.stale: bytes | None = stale

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/sse") and self.stale is not None:
            body, self.stale = self.stale, None
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=body, request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.anyio
async def test_a_recovered_resume_that_ended_before_its_status_was_asked_loses_no_chunk(
        backend: Backend) -> None:
    """The race the lost-resume test below can land in: the follow's read still sees the old
    ``end{paused}``, and by its ``/status`` question the resumed run has already completed. The
    chunks the resume emitted are read before the run settles."""
    with serving_runs(backend, [pauser], poll_interval=0.05) as handle:
        base, run_id = handle.base, f"p{uuid.uuid4().hex[:8]}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as plain:
            dispatcher = AsyncDispatcher(plain, base)
            started = await dispatcher.start("pauser", run_id=run_id)
            assert (await started.result()).status == "paused"
            stale = (await plain.get(f"/runs/{run_id}/sse",
                                     params={"cursor": started.cursor})).content
            assert b"event: end" in stale
            assert b"paused" in stale
            resumed = await dispatcher.resume(run_id, {"word": "x"}, cursor=started.cursor)
            assert (await resumed.result()).status == "completed"
        transport = _StaleFirstRead(stale)
        async with httpx.AsyncClient(transport=transport) as client:
            follower = AsyncDispatcher(client, base, decode=ChunkCodec(Chat).decode,
                                       poll_interval=0.1)
            run = AsyncRun(follower, run_id, started.cursor, None, confirm_paused=True)
            with anyio.fail_after(10):
                words = [msg.data["chunk"] async for msg in run if msg is not None]
            await transport.aclose()
        assert run.outcome is not None
        assert run.outcome.status == "completed"
        assert words == ["x ", "c"]
        assert transport.stale is None
        assert run.connections == 2


def _slow_reopen(seconds: float) -> Any:
    """Delay each stream reactivation: the resume's record says running while its stream still
    ends ``paused`` (the window a recovering dispatcher must not settle in)."""
    def wrap(log: StreamLog) -> None:
        reactivate = log.reactivate_stream

        async def slow(stream_id: str) -> None:
            await anyio.sleep(seconds)
            await reactivate(stream_id)
        log.reactivate_stream = slow  # type: ignore[method-assign]
    return wrap


@pytest.mark.anyio
async def test_a_lost_resume_is_recovered_once_with_the_resumed_outcome(backend: Backend) -> None:
    with serving_runs(backend, [pauser], wrap=_slow_reopen(1.0), poll_interval=0.05) as handle:
        base, run_id = handle.base, f"p{uuid.uuid4().hex[:8]}"
        async with httpx.AsyncClient() as plain:
            started = await AsyncDispatcher(plain, base).start("pauser", run_id=run_id)
            assert (await started.result()).status == "paused"
        transport = _LoseResumeAnswer(after=0.3)
        async with httpx.AsyncClient(transport=transport) as client:
            dispatcher = AsyncDispatcher(client, base, decode=ChunkCodec(Chat).decode,
                                         poll_interval=0.1)
            run = await dispatcher.resume(run_id, {"word": "x"}, cursor=started.cursor)
            assert run.created is None  # recovered through /status: the answer was lost
            words = [msg.data["chunk"] async for msg in run if msg is not None]
            await transport.aclose()
        assert run.outcome is not None
        assert run.outcome.status == "completed", run.outcome  # not the old end{paused}
        assert words == ["x ", "c"]
        assert handle.served.runs.invocations == 2  # the start and exactly one resume
        record = handle.call(lambda: handle.served.runs.get(run_id))
        assert len(record.resumes) == 1
