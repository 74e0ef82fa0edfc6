"""The resumable client against real sockets: a scripted raw HTTP server for exact misbehaviour
(bare closes mid-frame, malformed frames, stalls, error statuses) and the real stream server."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.scripted import Reply, Scripted
from streamwire.client import AsyncResumableStream, ResumableStream, RetryPolicy
from streamwire.client._core import ClientSession
from streamwire.errors import (
    MalformedFrameError,
    ResponseStatusError,
    RetriesExhaustedError,
    SSEDecodeError,
    StreamDropError,
    StreamFailedError,
    StreamTruncatedError,
)
from streamwire.frames import ChunkFrame, RewoundFrame
from streamwire.sse import encode_comment, encode_frame

FAST = RetryPolicy(backoff_initial=0.001, backoff_max=0.01, jitter=0.1)


# -- frames, written by hand so a test controls every byte ----------------------------------------


def chunk(seq: int, payload: Any = None) -> bytes:
    body = json.dumps({"sequence": seq, "chunk": payload if payload is not None else {"n": seq}})
    return encode_frame(body, event="chunk", id=str(seq))


def chunks(first: int, last: int) -> bytes:
    return b"".join(chunk(s) for s in range(first, last + 1))


def end(status: str = "completed", **extra: Any) -> bytes:
    return encode_frame(json.dumps({"status": status, **extra}), event="end")


def fail(error: str, recoverable: bool, detail: dict[str, Any] | None = None) -> bytes:
    data: dict[str, Any] = {"error": error, "recoverable": recoverable}
    if detail is not None:
        data["errorDetail"] = detail
    return encode_frame(json.dumps(data), event="fail")


def caught_up(head: int) -> bytes:
    return encode_frame(json.dumps({"head": head}), event="caught-up")


def truncated(floor: int) -> bytes:
    return encode_frame(json.dumps({"floor": floor, "errorDetail": {"code": "TRUNCATED"}}),
                        event="truncated")


def sequences(items: list[ChunkFrame]) -> list[int]:
    return [c.sequence for c in items]


async def read_all(url: str, *, got: list[Any] | None = None,
                   **kw: Any) -> tuple[list[Any], AsyncResumableStream[Any]]:
    """Read the stream at ``url`` to its end into ``got`` (kept when it raises)."""
    kw.setdefault("retry", FAST)
    got = [] if got is None else got
    async with httpx.AsyncClient() as client, AsyncResumableStream(client, url, **kw) as stream:
        with anyio.fail_after(20):
            async for item in stream:
                got.append(item)  # one by one: a raise keeps what came before it
    return got, stream


@contextlib.asynccontextmanager
async def opened(url: str, **kw: Any) -> AsyncIterator[AsyncResumableStream[Any]]:
    async with httpx.AsyncClient() as client, AsyncResumableStream(client, url, **kw) as stream:
        yield stream


# -- the sans-I/O session: any cuts, any splits, any overlap -> exactly once -----------------------


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_session_delivers_exactly_once_whatever_the_cuts(data: st.DataObject) -> None:
    total = 30
    session: ClientSession[ChunkFrame] = ClientSession(0, RetryPolicy(max_attempts=None))
    got: list[int] = []
    for _ in range(60):
        session.begin()
        cursor = session.cursor
        # The server may replay from before the cursor (an overlap the client must drop).
        start = max(1, cursor + 1 - data.draw(st.integers(0, 3), label="overlap"))
        body = chunks(start, total) + caught_up(total) + end()
        cut = data.draw(st.one_of(st.none(), st.integers(0, len(body) - 1)), label="cut")
        body = body if cut is None else body[:cut]
        pos = 0
        while pos < len(body):
            step = data.draw(st.integers(1, 64), label="piece")
            session.feed(body[pos:pos + step])
            pos += step
        session.end_of_body()
        while session.pending:
            item = session.pending.popleft()
            assert isinstance(item, ChunkFrame)
            session.hand_out(item)
            got.append(item.sequence)
        if session.finished:
            break
        error = session.take_error()
        # A cut mid-line flushes a partial last frame: malformed, not a drop; both re-attach.
        assert isinstance(error, StreamDropError | MalformedFrameError)
        assert session.reattach_delay(error, time.monotonic()) >= 0
    assert got == list(range(1, total + 1))
    assert session.end_frame is not None


# -- drops, dedup, order ---------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("chunked", [False, True], ids=["eof", "incomplete-chunked"])
async def test_bare_close_mid_frame_reattaches_from_cursor_exactly_once(chunked: bool) -> None:
    first = chunks(1, 5) + chunk(6)[:9]  # cut inside frame 6
    # The second server replays from before the cursor: duplicates must be dropped.
    second = chunks(3, 9) + caught_up(9) + chunks(10, 12) + end()
    with Scripted([Reply(first, chunked=chunked), Reply(second)]) as srv:
        got, stream = await read_all(srv.url)
    assert sequences(got) == list(range(1, 13))
    assert "last-event-id" not in srv.requests[0]
    assert srv.requests[1]["last-event-id"] == "5"
    assert stream.end_frame is not None
    assert stream.end_frame.status == "completed"
    assert stream.stats.reattaches == 1
    assert stream.stats.duplicates == 3
    assert stream.stats.replayed == 4  # 6..9 before caught-up on the re-attached connection
    assert isinstance(stream.last_error, StreamDropError)
    assert stream.last_error.cursor == 5


@pytest.mark.anyio
async def test_last_frame_without_blank_line_is_delivered_by_flush() -> None:
    body = chunks(1, 2) + end()[:-1]  # the end frame lacks its closing blank line
    with Scripted([Reply(body)]) as srv:
        got, stream = await read_all(srv.url)
    assert sequences(got) == [1, 2]
    assert stream.end_frame is not None
    assert stream.stats.connections == 1


@pytest.mark.anyio
async def test_malformed_frame_is_a_retryable_reattach_not_a_skip() -> None:
    bad = encode_frame('{"sequence": 3, "chunk": ', event="chunk", id="3")
    with Scripted([Reply(chunks(1, 2) + bad + chunks(4, 5)), Reply(chunks(3, 4) + end())]) as srv:
        got, stream = await read_all(srv.url)
    assert sequences(got) == [1, 2, 3, 4]
    assert srv.requests[1]["last-event-id"] == "2"
    assert type(stream.last_error).__name__ == "MalformedFrameError"


@pytest.mark.anyio
async def test_unknown_events_and_comments_are_ignored() -> None:
    body = (encode_comment("heartbeat") + chunk(1) + encode_frame("{}", event="error")
            + encode_frame("not json", event="future-thing") + chunk(2) + end())
    with Scripted([Reply(body)]) as srv:
        got, _ = await read_all(srv.url)
    assert sequences(got) == [1, 2]


@pytest.mark.anyio
async def test_silent_connection_is_a_drop_after_idle_timeout() -> None:
    body = chunks(1, 2)
    with Scripted([Reply(body, stall_after=len(body)), Reply(chunks(3, 3) + end())]) as srv:
        start = time.monotonic()
        got, stream = await read_all(srv.url, idle_timeout=0.3)
    assert sequences(got) == [1, 2, 3]
    assert 0.3 <= srv.times[1] - start < 5
    assert isinstance(stream.last_error, StreamDropError)
    assert "idle_timeout" in str(stream.last_error)


# -- terminal frames -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_recoverable_fail_reattaches_first() -> None:
    with Scripted([Reply(chunks(1, 2) + fail("server draining", True)),
                   Reply(chunks(3, 4) + end("paused"))]) as srv:
        got, stream = await read_all(srv.url)
    assert sequences(got) == [1, 2, 3, 4]
    assert srv.requests[1]["last-event-id"] == "2"
    assert stream.end_frame is not None
    assert stream.end_frame.status == "paused"


@pytest.mark.anyio
async def test_final_fail_raises_with_error_detail_after_the_chunks_before_it() -> None:
    detail = {"code": "MODEL_ERROR", "message": "overloaded"}
    got: list[ChunkFrame] = []
    with (Scripted([Reply(chunks(1, 3) + fail("model failed", False, detail))]) as srv,
          pytest.raises(StreamFailedError) as info):
        await read_all(srv.url, got=got)
    assert sequences(got) == [1, 2, 3]
    assert info.value.error == "model failed"
    assert info.value.error_detail == detail
    assert info.value.recoverable is False
    assert len(srv.requests) == 1


@pytest.mark.anyio
async def test_truncated_raises_with_floor() -> None:
    with Scripted([Reply(truncated(40))]) as srv, pytest.raises(StreamTruncatedError) as info:
        await read_all(srv.url, cursor=7)
    assert info.value.floor == 40
    assert info.value.error_detail == {"code": "TRUNCATED"}
    assert srv.requests[0]["last-event-id"] == "7"


@pytest.mark.anyio
async def test_truncated_hook_refetches_a_snapshot_and_resumes_after_it() -> None:
    floors: list[int] = []

    async def snapshot(floor: int) -> int:
        floors.append(floor)
        await anyio.lowlevel.checkpoint()
        return 40  # the snapshot covers everything up to sequence 40

    with Scripted([Reply(truncated(40)), Reply(chunks(41, 43) + end())]) as srv:
        got, stream = await read_all(srv.url, cursor=7, on_truncated=snapshot)
    assert floors == [40]
    assert srv.requests[1]["last-event-id"] == "40"
    assert sequences(got) == [41, 42, 43]
    assert stream.cursor == 43


@pytest.mark.anyio
async def test_rewound_goes_to_the_callback_in_stream_order() -> None:
    seen: list[tuple[str, int]] = []
    rewound = encode_frame(json.dumps({"atStep": 1, "atSequence": 3}), event="rewound")
    body = chunks(1, 3) + rewound + chunks(4, 5) + end()

    def on_rewound(frame: RewoundFrame) -> None:
        seen.append(("rewound", frame.at_step))

    with Scripted([Reply(body)]) as srv:
        async with opened(srv.url, on_rewound=on_rewound) as stream:
            async for c in stream:
                seen.append(("chunk", c.sequence))  # noqa: PERF401 (interleaved with the callback)
    assert seen == [("chunk", 1), ("chunk", 2), ("chunk", 3), ("rewound", 1), ("chunk", 4),
                    ("chunk", 5)]


def rewound(at_step: int, at_sequence: int, min_sequence: int | None = None) -> bytes:
    data: dict[str, int] = {"atStep": at_step, "atSequence": at_sequence}
    if min_sequence is not None:
        data["minSequence"] = min_sequence
    return encode_frame(json.dumps(data), event="rewound")


@pytest.mark.anyio
async def test_rewound_prunes_chunks_not_yet_handed_out() -> None:
    # 4 and 5 arrive in the same read as the rewound that removes them: the caller never sees them.
    body = chunks(1, 5) + rewound(1, 5, min_sequence=3) + chunks(6, 7) + end()
    seen: list[Any] = []
    with Scripted([Reply(body)]) as srv:
        async with opened(srv.url, on_rewound=seen.append) as stream:
            async for c in stream:
                seen.append(c.sequence)  # noqa: PERF401 (interleaved with the callback)
    assert seen == [1, 2, 3, RewoundFrame(at_step=1, at_sequence=5, min_sequence=3), 6, 7]
    assert stream.stats.pruned == 2
    assert stream.stats.delivered == 5


@pytest.mark.anyio
async def test_reader_behind_a_rewound_with_nothing_left_raises_truncated() -> None:
    # The cleanup ran at head 10 while this reader had 2: the next chunk jumps past the survivors.
    body = chunks(1, 2) + rewound(0, 10) + chunk(11) + end()
    got: list[ChunkFrame] = []
    with Scripted([Reply(body)]) as srv, pytest.raises(StreamTruncatedError) as info:
        await read_all(srv.url, got=got)
    assert sequences(got) == [1, 2]
    assert info.value.floor == 10


@pytest.mark.anyio
async def test_a_terminal_pre_empts_the_rewound_debt() -> None:
    body = chunks(1, 2) + rewound(0, 10) + end()
    with Scripted([Reply(body)]) as srv:
        got, stream = await read_all(srv.url)
    assert sequences(got) == [1, 2]
    assert stream.end_frame is not None


# -- HTTP answers, caps, backoff -------------------------------------------------------------------


@pytest.mark.anyio
async def test_503_with_retry_after_is_retried_and_404_is_not() -> None:
    with Scripted([Reply(b"busy", status=503, content_type="text/plain",
                         extra_headers={"retry-after": "0"}),
                   Reply(chunks(1, 1) + end())]) as srv:
        got, _ = await read_all(srv.url)
    assert sequences(got) == [1]
    with (Scripted([Reply(b'{"error":"no such stream"}', status=404,
                          content_type="application/json")]) as srv,
          pytest.raises(ResponseStatusError) as info):
        await read_all(srv.url)
    assert info.value.status_code == 404
    assert "no such stream" in str(info.value)
    assert len(srv.requests) == 1


@pytest.mark.anyio
async def test_not_sse_is_a_clear_error() -> None:
    with (Scripted([Reply(b"<html>", content_type="text/html")]) as srv,
          pytest.raises(ResponseStatusError, match="expected text/event-stream")):
        await read_all(srv.url)


@pytest.mark.anyio
async def test_not_sse_quotes_the_start_of_the_body_and_reads_no_more() -> None:
    page = b"<!doctype html><title>Sign in</title>" + b"x" * 1_000_000
    with (Scripted([Reply(page, content_type="text/html")]) as srv,
          pytest.raises(ResponseStatusError, match="this is not an event stream") as info):
        await read_all(srv.url)
    assert "text/html" in str(info.value)
    assert "<!doctype html><title>Sign in</title>xxx" in str(info.value)
    assert len(str(info.value)) < 600  # the start of the body, not all of it
    assert not info.value.retryable


@pytest.mark.anyio
async def test_max_attempts_gives_up_saying_what_happened() -> None:
    with Scripted([Reply(chunks(1, 1)), Reply(b"")]) as srv:
        got: list[ChunkFrame] = []
        with pytest.raises(RetriesExhaustedError) as info:
            await read_all(srv.url, retry=RetryPolicy(max_attempts=3, backoff_initial=0.001))
    err = info.value
    assert err.attempts == 3
    assert isinstance(err.last_error, StreamDropError)
    assert err.__cause__ is err.last_error
    assert "max_attempts=3" in str(err)
    assert "cursor 1" in str(err)
    assert len(srv.requests) == 4  # the first connection and three re-attaches
    assert got == []


@pytest.mark.anyio
async def test_max_elapsed_gives_up() -> None:
    policy = RetryPolicy(max_attempts=None, max_elapsed=0.3, backoff_initial=0.05,
                         backoff_max=0.05)
    with (Scripted([Reply(b"")]) as srv,
          pytest.raises(RetriesExhaustedError, match=r"max_elapsed=0\.3s") as info):
        await read_all(srv.url, retry=policy)
    assert info.value.elapsed >= 0.3


@pytest.mark.anyio
async def test_connection_refused_is_retried_then_reported() -> None:
    with Scripted([Reply(b"")]) as srv:
        url = srv.url
    with pytest.raises(RetriesExhaustedError) as info:
        await read_all(url, retry=RetryPolicy(max_attempts=2, backoff_initial=0.001))
    assert isinstance(info.value.last_error, StreamDropError)
    assert isinstance(info.value.last_error.__cause__, httpx.ConnectError)


@pytest.mark.anyio
async def test_the_client_says_what_it_does_while_retrying(
        caplog: pytest.LogCaptureFixture) -> None:
    with Scripted([Reply(b"")]) as srv:
        url = srv.url  # closed once the block ends: connections are refused
    caplog.set_level(logging.INFO, logger="streamwire.client")
    with pytest.raises(RetriesExhaustedError):
        await read_all(url, retry=RetryPolicy(max_attempts=2, backoff_initial=0.001))
    lines = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert [(name, level) for name, level, _ in lines] == [
        ("streamwire.client", logging.INFO), ("streamwire.client", logging.WARNING),
        ("streamwire.client", logging.WARNING)]
    first, second, gave_up = (message for _, _, message in lines)
    assert first.startswith(f"{url}: ")
    assert "Connection refused" in first or "ConnectError" in first
    assert "re-attaching from the start in " in first
    assert "(attempt 1 of 2)" in first
    assert "(attempt 2 of 2)" in second
    assert "gave up re-attaching" in gave_up


@pytest.mark.anyio
async def test_a_stream_that_keeps_failing_after_catching_up_backs_off_and_gives_up() -> None:
    # caught-up then a recoverable fail, on every connection: the delay doubles and the attempt
    # cap applies (a caught-up right before another failure is no progress). Each failure is a
    # new one (its writer differs): the same one again would be stored, and settle at once
    # (tests/test_client_settle.py).
    replies = [Reply(caught_up(0) + fail("writer gone", True,
                                         {"code": "WRITER_GONE", "writer": n}))
               for n in range(5)]
    policy = RetryPolicy(max_attempts=4, backoff_initial=0.05, backoff_max=10, jitter=0)
    with (Scripted(replies) as srv,
          pytest.raises(RetriesExhaustedError, match="max_attempts=4") as info):
        await read_all(srv.url, retry=policy)
    assert isinstance(info.value.last_error, StreamFailedError)
    gaps = [b - a for a, b in zip(srv.times, srv.times[1:], strict=False)]
    assert len(gaps) == 4
    assert gaps[3] >= 0.4  # 0.05, 0.1, 0.2, 0.4


@pytest.mark.anyio
async def test_server_retry_field_is_honoured_and_backoff_grows() -> None:
    with Scripted([Reply(b"retry: 200\n\n" + chunks(1, 1)), Reply(b""),
                   Reply(chunks(2, 2) + end())]) as srv:
        got, _ = await read_all(srv.url, retry=RetryPolicy(backoff_initial=0.001, jitter=0))
    assert sequences(got) == [1, 2]
    gap1 = srv.times[1] - srv.times[0]
    gap2 = srv.times[2] - srv.times[1]
    assert gap1 >= 0.2  # never sooner than the server asked
    assert gap2 >= 0.4  # a second failure without progress doubles it


@pytest.mark.anyio
async def test_decoder_limit_is_not_retried() -> None:
    with (Scripted([Reply(chunk(1, {"text": "x" * 5000}) + end())]) as srv,
          pytest.raises(SSEDecodeError) as info):
        await read_all(srv.url, max_line_size=1000)
    assert info.value.limit == "max_line_size"
    assert len(srv.requests) == 1


# -- typed items -----------------------------------------------------------------------------------


class Token(msgspec.Struct):
    text: str


@pytest.mark.anyio
async def test_decode_types_the_items() -> None:
    body = chunk(1, {"text": "Hel"}) + chunk(2, {"text": "lo"}) + end()

    def decode(c: ChunkFrame) -> Token:
        return msgspec.json.decode(c.chunk, type=Token)

    with Scripted([Reply(body)]) as srv:
        async with opened(srv.url, decode=decode) as stream:
            texts = [t.text async for t in stream]
    assert texts == ["Hel", "lo"]


# -- the caller's own abort ends quietly -----------------------------------------------------------


@pytest.mark.anyio
async def test_leaving_the_block_early_closes_quietly() -> None:
    body = chunks(1, 3)
    with Scripted([Reply(body, stall_after=len(body))]) as srv:
        with anyio.fail_after(5):
            async with opened(srv.url) as stream:
                async for c in stream:
                    if c.sequence == 2:
                        break
    assert stream.cursor == 2
    assert stream.last_error is None
    assert stream.stats.connections == 1


@pytest.mark.anyio
async def test_close_from_another_task_ends_iteration_quietly() -> None:
    body = chunks(1, 2)
    got: list[int] = []
    with Scripted([Reply(body, stall_after=len(body))]) as srv:
        async with opened(srv.url) as stream:

            async def closer() -> None:
                await anyio.sleep(0.2)
                stream.close()

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(closer)
                    got.extend([c.sequence async for c in stream])
    assert got == [1, 2]
    assert stream.last_error is None


@pytest.mark.anyio
async def test_cancelling_the_reader_is_not_a_drop() -> None:
    body = chunks(1, 1)
    with Scripted([Reply(body, stall_after=len(body))]) as srv:
        async with opened(srv.url) as stream:
            with anyio.move_on_after(0.3) as scope:
                async for _ in stream:
                    pass
    assert scope.cancelled_caught
    assert stream.stats.connections == 1
    assert stream.last_error is None


def test_a_stream_is_read_once() -> None:
    with (httpx.Client() as client, ResumableStream(client, "http://127.0.0.1:1/") as stream,
          pytest.raises(RuntimeError, match="read once")):
        stream.__enter__()


# -- the sync twin ---------------------------------------------------------------------------------


def test_sync_stream_reattaches_and_ends() -> None:
    first = chunks(1, 4) + chunk(5)[:20]
    with (Scripted([Reply(first, chunked=True), Reply(chunks(2, 6) + end("interrupted"))]) as srv,
          httpx.Client() as client, ResumableStream(client, srv.url, retry=FAST) as stream):
        got = [c.sequence for c in stream]
    assert got == [1, 2, 3, 4, 5, 6]
    assert srv.requests[1]["last-event-id"] == "4"
    assert stream.end_frame is not None
    assert stream.end_frame.status == "interrupted"


def test_sync_fail_and_truncated_hook() -> None:
    got: list[int] = []
    with (Scripted([Reply(truncated(10)), Reply(chunks(11, 11) + fail("boom", False))]) as srv,
          httpx.Client() as client,
          ResumableStream(client, srv.url, retry=FAST, on_truncated=lambda floor: floor) as stream,
          pytest.raises(StreamFailedError, match="boom")):
        got.extend(c.sequence for c in stream)
    assert got == [11]


def test_sync_close_from_another_thread() -> None:
    body = chunks(1, 2)
    with (Scripted([Reply(body, stall_after=len(body))]) as srv, httpx.Client() as client,
          ResumableStream(client, srv.url, retry=FAST) as stream):
        timer = threading.Timer(0.3, stream.close)
        timer.start()
        start = time.monotonic()
        got = [c.sequence for c in stream]
        timer.join()
    assert got == [1, 2]
    assert time.monotonic() - start < 5


class _ClosesTheReaderOnRelease(httpx.AsyncByteStream, httpx.SyncByteStream):
    """A refused answer's body whose release closes the reader: a ``close()`` from another task
    or thread landing while the reader lets go of a failed connection."""

    def __init__(self, reader: list[AsyncResumableStream[Any] | ResumableStream[Any]]) -> None:
        self._reader = reader

    #: Longer than the start of a refused body a reader reads (it never reaches the end).
    BODY = (b"gone " * 100, b"still gone")

    def __iter__(self) -> Iterator[bytes]:
        yield from self.BODY

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.BODY:
            yield part

    def close(self) -> None:
        self._reader[0].close()

    async def aclose(self) -> None:
        self._reader[0].close()


@pytest.mark.parametrize("status", [404, 503])
@pytest.mark.anyio
async def test_a_close_wins_over_the_failure_it_lands_on_in_both_twins(status: int) -> None:
    """The twins once differed here (only the sync one checked ``_closed`` before ``_failed``):
    a caller's close is quiet, so it must not become a re-attach (503) or an error (404)."""
    reader: list[AsyncResumableStream[Any] | ResumableStream[Any]] = []
    waits: list[float] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": "text/plain"},
                              stream=_ClosesTheReaderOnRelease(reader))

    transport = httpx.MockTransport(refuse)
    async with httpx.AsyncClient(transport=transport) as client:
        stream = AsyncResumableStream(client, "http://test/s", retry=FAST,
                                      on_reattach=lambda error, wait: waits.append(wait))
        reader.append(stream)
        async with stream:
            assert [c async for c in stream] == []
    with httpx.Client(transport=transport) as client:
        sync = ResumableStream(client, "http://test/s", retry=FAST,
                               on_reattach=lambda error, wait: waits.append(wait))
        reader[0] = sync
        with sync:
            assert list(sync) == []
    assert waits == []
    for done in (stream, sync):
        assert done.last_error is None
        assert done.stats.reattaches == 0
        assert done.stats.connections == 1


# -- the real stream server ------------------------------------------------------------------------


def _server_app() -> tuple[Any, Any]:
    pytest.importorskip("streamwire.server")
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    log = MemoryLog()
    return log, create_app(log, allow_anonymous_writes=True)


@pytest.fixture
def live() -> Iterator[tuple[Any, str]]:
    from helpers.chaos_proxy import ServerThread

    log, app = _server_app()
    with ServerThread(app) as server:
        yield log, server.url


def _post(url: str, path: str, body: Any, method: str = "POST") -> httpx.Response:
    response = httpx.request(method, url + path, json=body, timeout=10)
    assert response.status_code < 300, response.text
    return response


def _write(url: str, sid: str, texts: list[str], step: int = 1) -> None:
    _post(url, f"/streams/{sid}/chunks", [{"step": step, "chunk": {"text": t}} for t in texts])


@pytest.mark.anyio
async def test_real_server_reader_attached_before_first_chunk_gets_everything(
        live: tuple[Any, str]) -> None:
    _, url = live
    _post(url, "/streams/r1", {}, method="PUT")

    async def writer() -> None:
        for i in range(0, 30, 3):
            await anyio.to_thread.run_sync(_write, url, "r1", [f"t{i + j}" for j in range(3)])
            await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(_post, url, "/streams/r1/end", {"status": "completed"})

    texts: list[str] = []
    async with httpx.AsyncClient() as client, anyio.create_task_group() as tg:
        tg.start_soon(writer)
        async with AsyncResumableStream(client, f"{url}/streams/r1/sse", retry=FAST,
                                        decode=_text) as stream:
            with anyio.fail_after(20):
                texts.extend([t async for t in stream])
    assert texts == [f"t{i}" for i in range(30)]
    assert stream.end_frame is not None
    assert stream.end_frame.status == "completed"


def _text(c: ChunkFrame) -> str:
    value: dict[str, str] = msgspec.json.decode(c.chunk)
    return value["text"]


@pytest.mark.anyio
async def test_real_server_cursor_and_truncated_after_cleanup(live: tuple[Any, str]) -> None:
    _, url = live
    _post(url, "/streams/r2", {}, method="PUT")
    _write(url, "r2", ["a", "b", "c"])
    # A cleanup to step 0 removes every chunk: a reader at cursor 1 is below the floor (3).
    _post(url, "/streams/r2/cleanup", {"step": 0})
    floors: list[int] = []

    async def snapshot(floor: int) -> int:
        floors.append(floor)
        await anyio.to_thread.run_sync(_write, url, "r2", ["d"])
        await anyio.to_thread.run_sync(_post, url, "/streams/r2/end", {"status": "completed"})
        return floor  # the snapshot covers everything up to the floor

    got, stream = await read_all(f"{url}/streams/r2/sse", cursor=1, decode=_text,
                                 on_truncated=snapshot)
    assert floors == [3]
    assert got == ["d"]
    assert stream.cursor == 4
    assert stream.end_frame is not None


@pytest.mark.anyio
async def test_real_server_chat_contract_typed_chunks(live: tuple[Any, str]) -> None:
    from streamwire.chat import Chat
    from streamwire.contract import is_event
    from streamwire.frames import ChunkCodec

    _, url = live
    _post(url, "/streams/r4", {}, method="PUT")
    _post(url, "/streams/r4/chunks", [
        {"step": 1, "chunk": {"event": "chunk", "data": {"chunk": "Hel"}}},
        {"step": 1, "chunk": {"event": "title", "data": {"title": "Greeting"}}},
        {"step": 1, "chunk": {"event": "not-in-contract", "data": 1}},
        {"step": 1, "chunk": {"event": "chunk", "data": {"chunk": "lo"}}},
    ])
    _post(url, "/streams/r4/end", {"status": "completed"})
    texts: list[str] = []
    titles: list[str] = []
    unknown = 0
    async with opened(f"{url}/streams/r4/sse", decode=ChunkCodec(Chat).decode) as stream:
        async for msg in stream:
            if msg is None:
                unknown += 1
            elif is_event(msg, Chat.chunk):
                texts.append(msg.data["chunk"])
            elif is_event(msg, Chat.title):
                titles.append(msg.data["title"])
    assert texts == ["Hel", "lo"]
    assert titles == ["Greeting"]
    assert unknown == 1


@pytest.mark.anyio
async def test_real_server_cleanup_while_attached_reaches_on_rewound(
        live: tuple[Any, str]) -> None:
    _, url = live
    _post(url, "/streams/r5", {}, method="PUT")
    _write(url, "r5", ["a", "b"], step=1)
    _write(url, "r5", ["c"], step=2)
    events: list[Any] = []
    caught_up = anyio.Event()
    rewound_seen = anyio.Event()

    def on_rewound(frame: RewoundFrame) -> None:
        events.append(frame)
        rewound_seen.set()

    async def writer() -> None:
        await caught_up.wait()
        await anyio.to_thread.run_sync(_post, url, "/streams/r5/cleanup", {"step": 1})
        await rewound_seen.wait()
        await anyio.to_thread.run_sync(_write, url, "r5", ["d"], 2)
        await anyio.to_thread.run_sync(_post, url, "/streams/r5/end", {"status": "completed"})

    with anyio.fail_after(20):
        async with (anyio.create_task_group() as tg,
                    opened(f"{url}/streams/r5/sse", decode=_text, on_rewound=on_rewound,
                           retry=FAST) as stream):
            tg.start_soon(writer)
            async for text in stream:
                events.append(text)
                if text == "c":
                    caught_up.set()
    assert events[:3] == ["a", "b", "c"]
    assert isinstance(events[3], RewoundFrame)
    assert events[3].at_step == 1
    assert events[4:] == ["d"]


@pytest.mark.anyio
async def test_heartbeats_keep_a_quiet_stream_alive_and_silence_does_not() -> None:
    from helpers.chaos_proxy import ServerThread
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    log = MemoryLog()
    app = create_app(log, heartbeat_interval=0.1, allow_anonymous_writes=True)
    with ServerThread(app) as server:
        url = server.url
        _post(url, "/streams/q", {}, method="PUT")
        _write(url, "q", ["a"])

        async def later() -> None:
            await anyio.sleep(1.2)  # quiet, but for the heartbeats, for well over idle_timeout
            await anyio.to_thread.run_sync(_write, url, "q", ["b"])
            await anyio.to_thread.run_sync(_post, url, "/streams/q/end", {"status": "completed"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(later)
            got, stream = await read_all(f"{url}/streams/q/sse", decode=_text, idle_timeout=0.4)
    assert got == ["a", "b"]
    assert stream.stats.connections == 1


def test_real_server_sync_reader(live: tuple[Any, str]) -> None:
    _, url = live
    _post(url, "/streams/r3", {}, method="PUT")
    _write(url, "r3", [str(i) for i in range(50)])
    _post(url, "/streams/r3/fail", {"error": "tool crashed", "recoverable": False,
                                     "errorDetail": {"code": "TOOL"}})
    got: list[str] = []
    with (httpx.Client() as client,
          ResumableStream(client, f"{url}/streams/r3/sse", decode=_text) as stream,
          pytest.raises(StreamFailedError) as info):
        got.extend(stream)
    assert got == [str(i) for i in range(50)]
    assert info.value.error_detail == {"code": "TOOL"}


