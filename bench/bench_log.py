"""The stream log: append throughput (single and batches of 100), replay of 10,000 chunks from
cursor 0 to ``caught-up``, and memory per retained chunk, per backend, beside the limit of its
medium in the same run: appending the same rows to a Python list (memory), raw ``sqlite3``
inserts of the same rows with the same durability setting (SQLite: WAL, synchronous=NORMAL, one
transaction per call, as each ``append`` is durable when it returns).

Done-when (issue 5): memory append >= 0.2x the list limit; SQLite append >= 0.3x raw inserts;
replay to caught-up at least as fast as appending the chunks.
"""

from __future__ import annotations

import gc
import random
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from bench._harness import machine_line, table
from streamwire.frames import CaughtUpFrame
from streamwire.log import StreamLog
from streamwire.log.memory import MemoryLog
from streamwire.log.sqlite import SQLiteLog

N = 10_000
BATCH = 100
WRITERS = 8  # concurrent appending tasks (one stream each), the server's usual shape

_TEXT = ("the of and to in is you that it he was for on are as with his they at be this have "
         "from or one had by word but not what all were we when your can said there use an "
         "each which she do how their if will up other about out many then them these so")
_WORDS = _TEXT.split(" ")


def _rows(seed: int = 0) -> list[tuple[int, bytes]]:
    """``(step, chunk)`` rows: LLM text deltas of 1-12 words, a step every 500 chunks."""
    rng = random.Random(seed)
    rows = []
    for i in range(N):
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 12)))
        rows.append((i // 500, b'{"type":"text-delta","delta":"%s"}' % text.encode()))
    return rows


def _median(values: list[float]) -> float:
    return statistics.median(values)


# -- the limits of each medium ------------------------------------------------------------------

def _list_single(rows: list[tuple[int, bytes]]) -> float:
    out: list[tuple[int, int, bytes]] = []
    start = time.perf_counter()
    for seq, (step, chunk) in enumerate(rows, 1):
        out.append((seq, step, chunk))
    return time.perf_counter() - start


def _list_batch(rows: list[tuple[int, bytes]]) -> float:
    out: list[tuple[int, int, bytes]] = []
    start = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        out.extend([(seq, step, chunk) for seq, (step, chunk) in enumerate(rows[i:i + BATCH], i)])
    return time.perf_counter() - start


def _raw_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS chunks (skey INTEGER NOT NULL, seq INTEGER NOT NULL, "
                 "step INTEGER NOT NULL, chunk BLOB NOT NULL, PRIMARY KEY (skey, seq)) "
                 "WITHOUT ROWID")
    return conn


def _raw_single(conn: sqlite3.Connection, key: int, rows: list[tuple[int, bytes]]) -> float:
    start = time.perf_counter()
    for seq, (step, chunk) in enumerate(rows, 1):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO chunks VALUES (?, ?, ?, ?)", (key, seq, step, chunk))
        conn.execute("COMMIT")
    return time.perf_counter() - start


def _raw_batch(conn: sqlite3.Connection, key: int, rows: list[tuple[int, bytes]]) -> float:
    start = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?)",
                         [(key, seq, step, chunk)
                          for seq, (step, chunk) in enumerate(rows[i:i + BATCH], i + 1)])
        conn.execute("COMMIT")
    return time.perf_counter() - start


# -- the log -------------------------------------------------------------------------------------

async def _single(log: StreamLog, sid: str, rows: list[tuple[int, bytes]]) -> float:
    await log.create_stream(sid)
    start = time.perf_counter()
    for step, chunk in rows:
        await log.append(sid, step, chunk)
    return time.perf_counter() - start


async def _concurrent(log: StreamLog, sid: str, rows: list[tuple[int, bytes]]) -> float:
    """The same rows appended one at a time by WRITERS tasks, each to its own stream."""
    part = len(rows) // WRITERS
    for k in range(WRITERS):
        await log.create_stream(f"{sid}-{k}")

    async def writer(k: int) -> None:
        for step, chunk in rows[k * part:(k + 1) * part]:
            await log.append(f"{sid}-{k}", step, chunk)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in range(WRITERS):
            tg.start_soon(writer, k)
    return time.perf_counter() - start


async def _batch(log: StreamLog, sid: str, rows: list[tuple[int, bytes]]) -> float:
    await log.create_stream(sid)
    start = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        await log.append_many(sid, rows[i:i + BATCH])
    return time.perf_counter() - start


async def _floors(rows: list[tuple[int, bytes]], path: Path) -> tuple[float, float]:
    """Seconds per call of the cheapest async call (a coroutine that only appends to a list),
    and of a no-op round trip to SQLiteLog's worker thread: what any single append pays."""
    out: list[tuple[int, int, bytes]] = []

    async def append(seq: int, step: int, chunk: bytes) -> int:
        out.append((seq, step, chunk))
        return seq

    start = time.perf_counter()
    for seq, (step, chunk) in enumerate(rows, 1):
        await append(seq, step, chunk)
    coroutine = (time.perf_counter() - start) / len(rows)
    log = SQLiteLog(path)
    await log.create_stream("hop")
    calls = len(rows) // 4
    start = time.perf_counter()
    for _ in range(calls):
        await log._call(_noop, write=False)  # the hop alone, measured through the real queue
    hop = (time.perf_counter() - start) / calls
    await log.aclose()
    return coroutine, hop


def _noop(conn: sqlite3.Connection) -> None:
    return None


async def _replay(log: StreamLog, sid: str) -> float:
    start = time.perf_counter()
    frames = log.read(sid, 0)
    count = 0
    async for frame in frames:
        if isinstance(frame, CaughtUpFrame):
            break
        count += 1
    elapsed = time.perf_counter() - start
    await frames.aclose()  # type: ignore[attr-defined]
    assert count == N, count
    return elapsed


async def _measure(make: Callable[[int], Awaitable[StreamLog]], rows: list[tuple[int, bytes]],
                   rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"single": [], "concurrent": [], "batch": [], "replay": []}
    for r in range(rounds + 1):  # round 0 warms up
        log = await make(r)
        try:
            single = await _single(log, f"s{r}", rows)
            concurrent = await _concurrent(log, f"c{r}", rows)
            batch = await _batch(log, f"b{r}", rows)
            replay = await _replay(log, f"s{r}")
        finally:
            await log.aclose()
        if r:
            for name, value in (("single", single), ("concurrent", concurrent),
                                ("batch", batch), ("replay", replay)):
                times[name].append(value)
    return {name: _median(values) for name, values in times.items()}


def _memory_per_chunk(rows: list[tuple[int, bytes]]) -> tuple[float, float]:
    """Bytes allocated per retained chunk beyond its payload: MemoryLog, and a list of tuples."""

    async def fill() -> MemoryLog:
        log = MemoryLog()
        await log.create_stream("m")
        for step, chunk in rows:
            await log.append("m", step, chunk)
        return log

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    log = anyio.run(fill)
    log_bytes = tracemalloc.get_traced_memory()[0] - before
    before = tracemalloc.get_traced_memory()[0]
    plain = [(seq, step, chunk) for seq, (step, chunk) in enumerate(rows, 1)]
    list_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del log, plain
    return log_bytes / N, list_bytes / N


def main(rounds: int) -> str:
    gc.collect()
    gc.disable()  # as in bench._harness.median_time: the collector's pauses are noise here
    try:
        return _main(max(1, rounds))
    finally:
        gc.enable()


def _main(rounds: int) -> str:
    rows = _rows()
    payload = sum(len(chunk) for _, chunk in rows) / N
    rate = N  # chunks per measurement

    list_single = _median([_list_single(rows) for _ in range(rounds)])
    list_batch = _median([_list_batch(rows) for _ in range(rounds)])

    async def make_memory(_: int) -> StreamLog:
        return MemoryLog()

    memory = anyio.run(_measure, make_memory, rows, rounds)

    with tempfile.TemporaryDirectory() as tmp:
        conn = _raw_db(Path(tmp) / "raw.db")
        raw_single = _median([_raw_single(conn, 2 * r, rows) for r in range(rounds)])
        raw_batch = _median([_raw_batch(conn, 2 * r + 1, rows) for r in range(rounds)])
        conn.close()

        async def make_sqlite(r: int) -> StreamLog:
            return SQLiteLog(Path(tmp) / f"log{r}.db")

        sqlite = anyio.run(_measure, make_sqlite, rows, rounds)
        floors = [anyio.run(_floors, rows, Path(tmp) / f"hop{r}.db") for r in range(rounds)]
        coroutine_floor = _median([f[0] for f in floors])
        hop_floor = _median([f[1] for f in floors])
        disk = (Path(tmp) / f"log{rounds}.db").stat().st_size
        wal = Path(tmp) / f"log{rounds}.db-wal"
        disk += wal.stat().st_size if wal.exists() else 0
    log_mem, list_mem = _memory_per_chunk(rows)

    def per_s(seconds: float) -> float:
        return rate / seconds

    out = [f"## Stream log ({N:,} chunks, {payload:.0f} B each on average)", "",
           machine_line(["msgspec", "anyio"]) + f", SQLite {sqlite3.sqlite_version}", ""]
    out.append(table("Append throughput (chunks/s) beside the medium's limit",
                     ["backend", "single", "limit (single)", "ratio", f"{WRITERS} tasks",
                      "ratio", f"batches of {BATCH}", f"limit ({BATCH})", "ratio"], [
        ["memory", per_s(memory["single"]), per_s(list_single), list_single / memory["single"],
         per_s(memory["concurrent"]), list_single / memory["concurrent"],
         per_s(memory["batch"]), per_s(list_batch), list_batch / memory["batch"]],
        ["sqlite", per_s(sqlite["single"]), per_s(raw_single), raw_single / sqlite["single"],
         per_s(sqlite["concurrent"]), raw_single / sqlite["concurrent"],
         per_s(sqlite["batch"]), per_s(raw_batch), raw_batch / sqlite["batch"]],
    ]))
    out.append("Limits: list = `list.append((seq, step, chunk))` in a loop / `list.extend` of a "
               f"batch's tuples; raw sqlite3 = one `BEGIN; INSERT; COMMIT` per row / one `executemany` "
               f"transaction per batch of {BATCH}, same table, WAL, synchronous=NORMAL.\n")
    out.append(table("Why single appends sit below the target: the per-call floor", [
        "what", "per call", "ceiling of the single-append ratio"], [
        ["await a coroutine that only appends to a list", f"{coroutine_floor * 1e9:.0f} ns",
         (list_single / N) / coroutine_floor],
        ["MemoryLog.append", f"{memory['single'] / N * 1e9:.0f} ns",
         list_single / memory["single"]],
        ["round trip to the SQLite worker thread (no SQL)", f"{hop_floor * 1e6:.1f} us",
         (raw_single / N) / hop_floor],
        ["SQLiteLog.append", f"{sqlite['single'] / N * 1e6:.1f} us",
         raw_single / sqlite["single"]],
    ]))
    out.append(table(f"Replay: a reader from cursor 0 over {N:,} chunks to caught-up", [
        "backend", "replay (chunks/s)", "single appends (chunks/s)", "replay / append",
        "replay / batch append"], [
        ["memory", per_s(memory["replay"]), per_s(memory["single"]),
         memory["single"] / memory["replay"], memory["batch"] / memory["replay"]],
        ["sqlite", per_s(sqlite["replay"]), per_s(sqlite["single"]),
         sqlite["single"] / sqlite["replay"], sqlite["batch"] / sqlite["replay"]],
    ]))
    out.append(table("Memory per retained chunk", ["what", "bytes per chunk"], [
        ["MemoryLog, beyond the payload (kept by reference)", log_mem],
        ["list of (seq, step, chunk) tuples, beyond the payload", list_mem],
        [f"SQLite file + WAL (payload {payload:.0f} B included)", disk / (3 * N)],
    ]))
    return "\n".join(out)


if __name__ == "__main__":
    print(main(3))
