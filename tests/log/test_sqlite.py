"""SQLiteLog beyond the contract suite: restarts, a writer process killed mid-stream, two
processes on one file, durability settings and bad paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from streamwire.errors import LogError, UsageError
from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame, FailFrame, StreamFrame
from streamwire.log.sqlite import SQLiteLog
from streamwire.testing import chunk_of, read_all, read_n

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

#: The writer's lease in these tests (seconds): a killed writer's stream fails this long after
#: its last append.
WRITER_TIMEOUT = 1.0

#: The writer process: creates stream "s", appends 30 chunks, says so, then appends one chunk
#: every few milliseconds until it is killed (or, with "end", ends the stream and exits).
WRITER = textwrap.dedent("""
    import sys, anyio
    from streamwire.log.sqlite import SQLiteLog

    async def main(path, mode, timeout):
        log = SQLiteLog(path, writer_timeout=float(timeout))
        await log.create_stream("s")
        for i in range(1, 31):
            await log.append("s", i // 10, b'{"n":%d}' % i)
        print("ready", flush=True)
        if mode == "end":
            await log.end_stream("s", "completed", output={"chunks": 30})
            await log.aclose()
            return
        i = 30
        while True:
            i += 1
            await log.append("s", i // 10, b'{"n":%d}' % i)
            await anyio.sleep(0.003)

    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
""")


def _start_writer(path: Path, mode: str,
                  timeout: float = WRITER_TIMEOUT) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), mode, str(timeout)],
                            text=True,
                            stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    proc.stdout.close()  # it says nothing more
    assert line.strip() == "ready", line
    return proc


def _chunks(frames: list[StreamFrame]) -> list[tuple[int, bytes]]:
    return [(f.sequence, bytes(f.chunk)) for f in frames if isinstance(f, ChunkFrame)]


async def test_a_killed_writer_process_fails_the_stream_recoverably(tmp_path: Path) -> None:
    """A reader attached while another process writes sees its chunks (cross-process poll);
    when that process is killed, the reader gets every committed chunk, then a recoverable fail;
    a reader re-attaching through a restarted log gets every chunk it lacked."""
    path = tmp_path / "log.db"
    proc = await anyio.to_thread.run_sync(_start_writer, path, "live")
    try:
        async with SQLiteLog(path, poll_interval=0.1) as log:
            frames = log.read("s", 0)
            got: list[StreamFrame] = []
            try:
                with anyio.fail_after(20):
                    while len(_chunks(got)) < 60:  # past the replay: live chunks from the writer
                        got.append(await anext(frames))
                    proc.send_signal(signal.SIGKILL)
                    await anyio.to_thread.run_sync(proc.wait)
                    got.extend([frame async for frame in frames])
            finally:
                await frames.aclose()  # type: ignore[attr-defined]
            info = await log.info("s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    chunks = _chunks(got)
    assert [seq for seq, _ in chunks] == list(range(1, info.head + 1))
    assert all(chunk == chunk_of(seq) for seq, chunk in chunks)
    assert sum(isinstance(f, CaughtUpFrame) for f in got) == 1
    last = got[-1]
    assert isinstance(last, FailFrame)
    assert last.recoverable
    assert last.error_detail == {"code": "WRITER_GONE"}
    assert (info.status, info.recoverable) == ("failed", True)

    # the "restarted server": a new log on the same file; a reader re-attaches from its cursor
    async with SQLiteLog(path) as restarted:
        again = await read_all(restarted, "s", 25)
    assert _chunks(again) == chunks[25:]
    assert again[-1] == last


async def test_a_stream_left_active_by_a_dead_process_is_failed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    proc = await anyio.to_thread.run_sync(_start_writer, path, "live")
    proc.send_signal(signal.SIGKILL)
    await anyio.to_thread.run_sync(proc.wait)
    await anyio.sleep(WRITER_TIMEOUT * 1.2)  # the dead writer's lease lapses
    async with SQLiteLog(path) as log:
        info = await log.info("s")  # the first call opens the file and fails the orphan
        assert (info.status, info.recoverable, info.error_detail) == (
            "failed", True, {"code": "WRITER_GONE"})
        frames = await read_all(log, "s", 0)
    assert [seq for seq, _ in _chunks(frames)] == list(range(1, info.head + 1))
    assert info.head >= 30
    assert isinstance(frames[-1], FailFrame)


async def test_a_finished_stream_survives_its_writer_process(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    proc = await anyio.to_thread.run_sync(_start_writer, path, "end")
    assert await anyio.to_thread.run_sync(proc.wait) == 0
    async with SQLiteLog(path) as log:
        frames = await read_all(log, "s", 10)
        info = await log.info("s")
    assert _chunks(frames) == [(n, chunk_of(n)) for n in range(11, 31)]
    assert frames[-2:] == [CaughtUpFrame(30), EndFrame("completed", output={"chunks": 30})]
    assert (info.status, info.output) == ("completed", {"chunks": 30})


async def test_a_restart_is_invisible_to_a_writer_that_comes_back_in_time(
        tmp_path: Path) -> None:
    """A stream belongs to its writer's lease, not to the process that served its last write: a
    writer process killed (SIGKILL) and replaced within writer_timeout carries on; one that never
    comes back leaves a stream that fails once the lease lapses."""
    path = tmp_path / "log.db"
    proc = await anyio.to_thread.run_sync(_start_writer, path, "live", 10.0)
    proc.send_signal(signal.SIGKILL)
    await anyio.to_thread.run_sync(proc.wait)
    async with SQLiteLog(path, writer_timeout=WRITER_TIMEOUT) as restarted:
        head = (await restarted.info("s")).head
        assert (await restarted.info("s")).status == "active"
        assert await restarted.append("s", 9, b"1") == head + 1  # the writer is back in time
        await restarted.keepalive("s")
    async with SQLiteLog(path, writer_timeout=WRITER_TIMEOUT) as log:
        assert (await log.info("s")).status == "active"
        await anyio.sleep(WRITER_TIMEOUT * 1.2)  # nobody writes any more
        info = await log.info("s")
        assert (info.status, info.recoverable, info.error_detail) == (
            "failed", True, {"code": "WRITER_GONE"})
        await log.reactivate_stream("s")  # a new writer takes the stream over
        assert await log.append("s", 0, b"2") == head + 2


async def test_closing_the_writing_log_leaves_the_stream_to_its_lease(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    async with SQLiteLog(path, writer_timeout=0.5) as first:
        await first.create_stream("s")
        await first.append("s", 0, b"1")
        await first.create_stream("done")
        await first.end_stream("done")
    async with SQLiteLog(path) as second:
        assert (await second.info("s")).status == "active"  # a server restart: nothing failed
        await anyio.sleep(0.6)
        info = await second.info("s")
        assert (info.status, info.recoverable, info.head) == ("failed", True, 1)
        assert (await second.info("done")).status == "completed"
        await second.reactivate_stream("s")  # a new writer takes the stream over
        assert await second.append("s", 0, b"2") == 2


async def test_two_open_logs_on_one_file_share_streams(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    async with SQLiteLog(path) as writer, SQLiteLog(path, poll_interval=0.05) as reader_log:
        await writer.create_stream("s")
        await writer.append("s", 0, b"1")
        assert (await reader_log.info("s")).status == "active"  # the writer is alive
        frames = reader_log.read("s", 0)
        try:
            assert await read_n(frames, 2) == [ChunkFrame(1, msgspec.Raw(b"1")), CaughtUpFrame(1)]
            await writer.append("s", 0, b"2")  # another log: seen within poll_interval
            assert await read_n(frames, 1) == [ChunkFrame(2, msgspec.Raw(b"2"))]
            rewound = await writer.cleanup_to_step("s", 0)
            assert await read_n(frames, 1) == [rewound]  # markers are rows: every log sees them
            await writer.end_stream("s")
            assert await read_n(frames, 1) == [EndFrame("completed")]
        finally:
            await frames.aclose()  # type: ignore[attr-defined]


async def test_another_connections_commits_wake_parked_readers_within_watch_interval(
        tmp_path: Path) -> None:
    """Another log on the file (as another process would) appends; the parked readers of this log
    see each chunk within ``watch_interval``, far below ``poll_interval`` (set to an hour here)."""
    path = tmp_path / "log.db"
    async with SQLiteLog(path) as writer, SQLiteLog(path, poll_interval=3600,
                                                    watch_interval=0.02) as reader_log:
        await writer.create_stream("s")
        readers = [reader_log.read("s", 0) for _ in range(3)]
        try:
            for frames in readers:
                assert await read_n(frames, 1) == [CaughtUpFrame(0)]
            delays = []

            async def take(frames: AsyncIterator[StreamFrame], got: list[list[StreamFrame]]) -> None:
                got.append(await read_n(frames, 1))

            for n in range(1, 6):
                got: list[list[StreamFrame]] = []
                with anyio.fail_after(5):
                    async with anyio.create_task_group() as tg:
                        for frames in readers:
                            tg.start_soon(take, frames, got)
                        await anyio.sleep(0.05)  # every reader parked
                        started = anyio.current_time()
                        await writer.append("s", 0, chunk_of(n))
                delays.append(anyio.current_time() - started)
                assert got == [[ChunkFrame(n, msgspec.Raw(chunk_of(n)))]] * 3
            assert max(delays) < 0.5, delays
        finally:
            for frames in readers:
                await frames.aclose()  # type: ignore[attr-defined]


async def test_two_logs_appending_to_one_stream_stay_gap_free(tmp_path: Path) -> None:
    """Each log caches the head it appends at; a commit by the other one invalidates it."""
    path = tmp_path / "log.db"
    async with SQLiteLog(path) as a, SQLiteLog(path) as b:
        await a.create_stream("s")
        got = [await (a if n % 3 else b).append("s", 0, chunk_of(n)) for n in range(1, 61)]
        got += await b.append_many("s", [(0, b"1"), (0, b"2")])
        got.append(await a.append("s", 0, b"3"))
        assert got == list(range(1, 64))
        await a.cleanup_to_step("s", 0)  # nothing removed, but b's cache must not matter
        assert await b.append("s", 1, b"4") == 64
        await b.end_stream("s")
        frames = await read_all(a, "s")
    assert [seq for seq, _ in _chunks(frames)] == list(range(1, 65))


async def test_big_chunks_are_paged_by_bytes(tmp_path: Path) -> None:
    async with SQLiteLog(tmp_path / "log.db") as log:
        await log.create_stream("s")
        big = b'"' + b"x" * (3 * 1024 * 1024) + b'"'
        for _ in range(3):
            await log.append("s", 0, big)
        await log.end_stream("s")
        frames = await read_all(log, "s")
    assert [len(chunk) for _, chunk in _chunks(frames)] == [len(big)] * 3


async def test_full_synchronous_mode_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    async with SQLiteLog(path, synchronous="FULL") as log:
        await log.create_stream("s")
        assert await log.append_many("s", [(0, chunk_of(n)) for n in range(1, 101)]) == list(
            range(1, 101))
        await log.end_stream("s", "paused", state={"resume": True})
    async with SQLiteLog(path) as log:
        frames = await read_all(log, "s", 0)
    assert len(_chunks(frames)) == 100
    assert frames[-1] == EndFrame("paused", state={"resume": True})


async def test_bad_arguments_and_paths(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="synchronous"):
        SQLiteLog(tmp_path / "x.db", synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="poll_interval"):
        SQLiteLog(tmp_path / "x.db", poll_interval=0)
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(UsageError, match="watch_interval"):
            SQLiteLog(tmp_path / "x.db", watch_interval=bad)
    with pytest.raises(UsageError, match="max_chunks_per_stream"):
        SQLiteLog(tmp_path / "x.db", max_chunks_per_stream=0)
    log = SQLiteLog(tmp_path / "missing-dir" / "x.db")
    with pytest.raises(LogError, match="cannot open"):
        await log.create_stream("s")
    with pytest.raises(LogError, match="cannot open"):
        await log.info("s")
    await log.aclose()
    with pytest.raises(LogError, match="closed"):
        await log.info("s")


async def test_many_tasks_appending_are_committed_together(tmp_path: Path) -> None:
    async with SQLiteLog(tmp_path / "log.db") as log:
        await log.create_stream("s")
        seqs: list[int] = []

        async def writer() -> None:
            seqs.extend([await log.append("s", 0, chunk_of(n)) for n in range(50)])

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(writer)
        assert sorted(seqs) == list(range(1, 1001))
        await log.end_stream("s")
        assert len(_chunks(await read_all(log, "s"))) == 1000


async def test_cancelled_calls_leave_no_gap_and_aclose_stops_the_worker(tmp_path: Path) -> None:
    log = SQLiteLog(tmp_path / "log.db")
    await log.create_stream("s")
    for n in range(20):  # cancel appends at random points: each is stored whole or not at all
        with anyio.move_on_after(0.0001 * n):
            await log.append("s", 0, chunk_of(n))
    head = (await log.info("s")).head
    await log.append("s", 0, b"0")
    await log.end_stream("s")
    frames = await read_all(log, "s")
    assert [seq for seq, _ in _chunks(frames)] == list(range(1, head + 2))
    thread = log._thread
    assert thread is not None
    assert thread.is_alive()
    await log.aclose()
    assert not thread.is_alive()


async def test_parked_readers_cost_no_sql(tmp_path: Path) -> None:
    """Idle readers cost nothing: parked on a live stream whose writer holds its lease, they run
    no SQL at all (other processes' commits are watched by one query per log, and the lease end
    is known); the first change wakes every one of them."""
    async with SQLiteLog(tmp_path / "log.db") as log:
        await log.create_stream("s")
        await log.append("s", 0, b"1")
        polls = 0
        poll = log._sql.poll

        def counting(*args: Any) -> Any:
            nonlocal polls
            polls += 1
            return poll(*args)

        log._sql.poll = counting  # type: ignore[method-assign]
        parked = 0
        all_parked = anyio.Event()
        got: list[list[int]] = []

        async def reader() -> None:
            nonlocal parked
            seqs: list[int] = []
            async for frame in log.read("s", 0):
                if isinstance(frame, ChunkFrame):
                    seqs.append(frame.sequence)
                    if frame.sequence == 2:
                        break
                if isinstance(frame, CaughtUpFrame):
                    parked += 1
                    if parked == 50:
                        all_parked.set()
            got.append(seqs)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for _ in range(50):
                    group.start_soon(reader)
                await all_parked.wait()
                await anyio.sleep(0.2)
                before = polls
                await anyio.sleep(2.5)  # longer than poll_interval (1 s): nobody looks
                assert polls == before
                await log.append("s", 0, b"2")
        assert got == [[1, 2]] * 50
        assert polls >= before + 50
