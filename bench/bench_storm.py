"""Re-attach storm: every reader comes back at once after a restart, a few chunks behind.

10 streams of ``HEAD`` chunks (~200 B each) are in the log when the server process starts; then
R readers connect as fast as the server answers (at most ``WINDOW`` waiting for their response
headers: under the kernel's listen queue, whose overflow would cost a connection a second),
reader ``i`` on stream ``i % 10`` at a cursor spread over the stream's last ``SPREAD`` chunks.
Candidates, each its own uvicorn process pinned to the first CPU (the client runs on the
others), started afresh for every round (a restart):

* ``raw broadcast`` -- the limit: the last chunks kept encoded in a list per stream; a reader gets
  the ones after its cursor joined into one ``send``, then joins the stream's broadcast list. It
  answers with the bytes streamwire answers with (its response headers, ``SSE_HEADERS``, and wire
  v2 frames, ``wire_frame``), so the comparison is of the servers;
* ``streamwire memory`` / ``streamwire redis`` -- ``create_app`` over ``MemoryLog`` (filled as the
  process starts) / ``RedisLog`` (filled before it starts: the data outlives the restart).

Reported (medians of rounds): the time from the first connect until every reader has every
chunk up to the head, the server's CPU seconds over that time, and the connections the kernel's
listen queue dropped (none, unless the window is too wide for ``net.core.somaxconn``). Every delivery is checked at
the client (each reader gets every chunk after its cursor exactly once, in order), and then each
reader must also get the next ``LIVE`` chunks the producers write, so every reader is proven
attached to its live stream. Traffic goes to 127.0.0.1 only; every run is bounded in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import selectors
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from bench._harness import machine_line, settle_as_serve, table
from bench.bench_fanout import (
    SSE_HEADERS,
    STREAMS,
    Receive,
    Scope,
    Send,
    _cpu_seconds,
    _free_port,
    _request,
    chunk_json,
    server_process,
    wire_frame,
)

HEAD = 200  # chunks per stream before the restart
SPREAD = 100  # cursors over the last 100 chunks
LIVE = 3  # live chunks every reader must get after the storm
RATE = 10  # live chunks per second per stream
READERS = 10_000
#: Readers the client keeps connected and waiting for their response headers: under the
#: kernel's listen queue (``net.core.somaxconn``, 4,096 by default), past which a connection's
#: SYN is dropped and sent again a second later -- a storm's time would count those seconds.
WINDOW = 2_000
KINDS = ("raw broadcast", "streamwire memory", "streamwire redis")
LIMIT = 120.0  # seconds for one storm
REDIS_URL = os.environ.get("STREAMWIRE_BENCH_REDIS", "redis://127.0.0.1:6379/0")


def cursor_of(i: int) -> int:
    return HEAD - (i * 37) % (SPREAD + 1)


async def _produce(publish: Callable[[int, int], Any]) -> None:
    for seq in range(HEAD + 1, HEAD + LIVE + 1):
        for k in range(STREAMS):
            await publish(k, seq)
        await asyncio.sleep(1 / RATE)


# ---- the servers (run in their own process) -------------------------------------------------------


def raw_app() -> Any:
    frames = [[wire_frame(s, chunk_json(k, s, 0)) for s in range(1, HEAD + 1)]
              for k in range(STREAMS)]
    subscribers: list[list[Send]] = [[] for _ in range(STREAMS)]

    async def publish(k: int, seq: int) -> None:
        frame = wire_frame(seq, chunk_json(k, seq, 0))
        frames[k].append(frame)
        message = {"type": "http.response.body", "body": frame, "more_body": True}
        for send in list(subscribers[k]):
            try:
                await send(message)
            except OSError:
                subscribers[k].remove(send)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or await _control(scope, send, publish):
            return
        k = int(scope["path"].rsplit("/", 2)[-2])
        cursor = int(scope["query_string"].split(b"=")[1])
        await send({"type": "http.response.start", "status": 200,
                    "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": b"".join(frames[k][cursor:]),
                    "more_body": True})
        subscribers[k].append(send)
        while (await receive())["type"] != "http.disconnect":
            pass
        with contextlib.suppress(ValueError):
            subscribers[k].remove(send)

    return app


async def _control(scope: Scope, send: Send, publish: Callable[[int, int], Any]) -> bool:
    path = scope["path"]
    if path == "/ctl/start":
        asyncio.get_running_loop().create_task(_produce(publish))
    elif path != "/ready":
        return False
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})
    return True


def streamwire_app(backend: str, prefix: str) -> Any:
    from streamwire.server import create_app

    if backend == "redis":
        from streamwire.log.redis import RedisLog

        log: Any = RedisLog(url=REDIS_URL, prefix=prefix)
    else:
        from streamwire.log.memory import MemoryLog

        log = MemoryLog()
    inner = create_app(log, allow_anonymous_writes=True, max_connections=50_000,
                       max_connections_per_stream=50_000)
    filled = backend == "redis"  # the data outlived the restart

    async def publish(k: int, seq: int) -> None:
        await log.append(f"f{k}", 0, chunk_json(k, seq, 0))

    settle_as_serve()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal filled
        if scope["type"] == "http" and not filled:
            filled = True
            await _fill(log)
        if scope["type"] == "http" and await _control(scope, send, publish):
            return
        await inner(scope, receive, send)

    return app


async def _fill(log: Any) -> None:
    for k in range(STREAMS):
        await log.create_stream(f"f{k}")
        await log.append_many(f"f{k}", [(0, chunk_json(k, s, 0)) for s in range(1, HEAD + 1)])


def serve(kind: str, port: int, prefix: str) -> None:
    import uvicorn

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    app = raw_app() if kind == "raw broadcast" else streamwire_app(kind.split()[1], prefix)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                backlog=16_384, timeout_keep_alive=3600)


# ---- the client -----------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "expect", "headers", "sock", "stream")

    def __init__(self, sock: socket.socket, stream: int, cursor: int) -> None:
        self.sock = sock
        self.stream = stream
        self.buf = b""
        self.headers = False
        self.expect = cursor + 1


class _Tally:
    def __init__(self) -> None:
        self.count = 0  # wrong deliveries
        self.first = ""
        self.answered = 0  # readers whose response headers came

    def add(self, what: str) -> None:
        self.count += 1
        self.first = self.first or what


def _read(reader: _Reader, errors: _Tally) -> bool:
    """Consume what the socket has; False when it closed."""
    try:
        data = reader.sock.recv(262_144)
    except BlockingIOError:
        return True
    if not data:
        return False
    buf = reader.buf + data if reader.buf else data
    if not reader.headers:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            reader.buf = buf
            return True
        if not buf.startswith(b"HTTP/1.1 200"):
            errors.add(buf[:120].decode(errors="replace"))
        reader.headers = True
        errors.answered += 1
        buf = buf[end + 4:]
    cut = buf.rfind(b"\n\n")
    if cut < 0:
        reader.buf = buf
        return True
    reader.buf = buf[cut + 2:]
    pos = 0
    while (start := buf.find(b"data: ", pos, cut)) >= 0:
        stop = buf.find(b"\n", start)
        pos = stop
        payload = msgspec.json.decode(buf[start + 6:stop])
        if "chunk" in payload and "sequence" in payload:  # wire v2: the chunk rides in a frame
            payload = payload["chunk"]
        if "s" not in payload:
            continue  # caught-up
        if payload["s"] != reader.expect or payload["k"] != reader.stream:
            errors.add(f"stream {reader.stream}: {payload['s']} != {reader.expect}")
        reader.expect = payload["s"] + 1
    return True


def _fill_redis(prefix: str) -> None:
    from streamwire.log.redis import RedisLog

    async def fill() -> None:
        log = RedisLog(url=REDIS_URL, prefix=prefix)
        try:
            await _fill(log)
        finally:
            await log.aclose()

    asyncio.run(fill())


def _purge_redis(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        for key in client.scan_iter(f"{prefix}:*", count=1000):
            client.delete(key)
    finally:
        client.close()


def run_one(kind: str, readers: int) -> dict[str, Any]:
    port = _free_port()
    prefix = f"bench-storm-{os.getpid()}-{port}"
    if kind == "streamwire redis":
        _fill_redis(prefix)
    sel = selectors.DefaultSelector()
    socks: list[_Reader] = []
    errors = _Tally()
    overflows = _listen_overflows()
    load = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        if kind == "streamwire redis":
            stack.callback(_purge_redis, prefix)
        proc = stack.enter_context(server_process("bench.bench_storm", [kind, str(port), prefix],
                                                  port, "/ready", timeout=5))
        stack.callback(sel.close)
        stack.callback(lambda: [r.sock.close() for r in socks])
        path = b"/streams/f%d/sse" if kind.startswith("streamwire") else b"/streams/%d/sse"
        t0 = time.monotonic()

        def take(timeout: float, what: str) -> None:
            """Read what arrived (waiting up to ``timeout``)."""
            if time.monotonic() - t0 > LIMIT:
                raise RuntimeError(f"{kind}: {what} took over {LIMIT:.0f} s")
            for key, _ in sel.select(timeout):
                if not _read(key.data, errors):
                    sel.unregister(key.fileobj)
                    errors.add("a reader was closed")

        def wait(until: int, what: str) -> None:
            while not all(r.headers and r.expect > until for r in socks):
                take(0.5, what)

        cpu0 = _cpu_seconds(proc.pid)
        t0 = time.monotonic()
        for i in range(readers):
            s = socket.socket()
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            r = _Reader(s, i % STREAMS, cursor_of(i))
            s.send(b"GET " + path % r.stream + b"?cursor=%d HTTP/1.1\r\nHost: x\r\n\r\n"
                   % (r.expect - 1))
            sel.register(s, selectors.EVENT_READ, r)
            socks.append(r)
            if i % 200 == 199:
                take(0, "the storm")
            while len(socks) - errors.answered >= WINDOW:  # as fast as the server answers
                take(0.5, "the storm")

        wait(HEAD, "the storm")
        attach = time.monotonic() - t0
        cpu = _cpu_seconds(proc.pid) - cpu0
        _request(port, "/ctl/start")
        wait(HEAD + LIVE, "the live chunks after it")
        return {"kind": kind, "attach": attach, "cpu": cpu, "errors": errors.count,
                "first_error": errors.first, "load": load,
                "overflows": _listen_overflows() - overflows}


def _listen_overflows() -> int:
    """The kernel's count of connections its listen queues dropped (``ListenOverflows``): each
    costs its client a SYN retransmitted a second later."""
    with contextlib.suppress(OSError, ValueError):
        lines = Path("/proc/net/netstat").read_text().splitlines()
        for names, values in zip(lines[::2], lines[1::2], strict=False):
            if names.startswith("TcpExt:"):
                return int(dict(zip(names.split(), values.split(), strict=True))["ListenOverflows"])
    return 0


def main(rounds: int, readers: int = READERS, kinds: tuple[str, ...] = KINDS) -> str:
    rounds = max(1, min(rounds, 7))  # a storm is ~10 s a candidate
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    failed: dict[str, str] = {}
    for r in range(rounds):
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:  # turns rotate each round
            if kind in failed:
                continue
            try:
                samples[kind].append(run_one(kind, readers))
            except Exception as exc:  # a candidate that cannot take the storm is a row
                failed[kind] = str(exc)
    med = {k: {f: statistics.median(s[f] for s in v) for f in ("attach", "cpu", "load")}
           for k, v in samples.items() if v}
    raw = samples.get("raw broadcast") or []

    def vs_limit(kind: str, field: str) -> float | None:
        """The median of the rounds' ratios to the limit's (each round's runs ran side by side)."""
        pairs = list(zip(samples[kind], raw, strict=False))
        return statistics.median(s[field] / r[field] for s, r in pairs) if pairs else None

    rows: list[list[object]] = []
    ratios: dict[str, float | None] = {}
    for kind in kinds:
        if kind in failed:
            rows.append([f"{readers:,}", kind, f"FAILED: {failed[kind]}", "-", "-", "-", "-", "-",
                         "-"])
            continue
        m, wrong = med[kind], sum(s["errors"] for s in samples[kind])
        ok = "ok" if not wrong else f"WRONG: {wrong} ({samples[kind][0]['first_error']})"
        attach, cpu = vs_limit(kind, "attach"), vs_limit(kind, "cpu")
        ratios[kind] = attach
        rows.append([f"{readers:,}", kind, ok, f"{m['attach']:.2f}",
                     "-" if attach is None else f"{attach:.2f}x", f"{m['cpu']:.2f}",
                     "-" if cpu is None else f"{cpu:.2f}x",
                     sum(s["overflows"] for s in samples[kind]), f"{m['load']:.2f}"])
    checks = [f"{k} storm attach {ratio:.2f}x the raw broadcast's (<= 1.5x): "
              f"{'yes' if ratio <= 1.5 else 'NO'}"
              for k in ("streamwire memory", "streamwire redis")
              if (ratio := ratios.get(k)) is not None]
    return "\n".join([
        "## Re-attach storm", "", machine_line(["uvicorn", "redis"]), "",
        f"{readers:,} readers at once over {STREAMS} streams of {HEAD} chunks (~200 B), cursors "
        f"spread over the last {SPREAD}, at most {WINDOW:,} waiting for their answer; a fresh "
        f"server process per storm (medians of {rounds} rounds; a ratio is the median of the "
        "rounds' ratios); server on one CPU, client on the other.", "",
        table("Readers re-attaching at once (every delivery checked, then live)",
              ["readers", "candidate", "deliveries", "all caught up s", "vs limit",
               "server CPU s", "vs limit", "listen drops", "load (1 min) before"], rows),
        "", "Issue #25's bars: " + ("; ".join(checks) if checks else "(candidates missing)"),
    ])


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        print(main(1, int(sys.argv[1]) if sys.argv[1:] else READERS))
