"""Fan-out: many live readers of a few streams, one server process on one CPU.

R readers over S streams (1,000 on one stream, 1,000 over 10, 10,000 over 10); each stream
gets 10 chunks/s of about 200 bytes from a producer inside the server process. Every delivery is
checked at the client (each reader gets every chunk of its stream exactly once, in order) before
any figure is reported. Candidates, each its own uvicorn process pinned to the first CPU (the
client runs on the others):

* ``raw broadcast`` -- the limit: each frame encoded once and sent to every reader's ASGI ``send``
  from the producer's task;
* ``streamwire memory`` / ``streamwire redis`` -- ``create_app`` over ``MemoryLog`` / ``RedisLog``,
  the producer appends to the log; started as ``streamwire serve`` starts it (``settle_heap``:
  ``gc.freeze()`` and a young threshold of 10,000 once start-up is done);
* ``sse-starlette + queue`` -- what users write: ``EventSourceResponse`` over a generator reading
  an ``asyncio.Queue`` per subscriber, the producer puts each event into every queue.

Reported: server CPU microseconds per delivered event (``/proc/<pid>/task/*/schedstat``, in
nanoseconds, over the steady window; the median of interleaved rounds, each candidate a fresh
process per round), delivery latency p50/p99 (the chunk carries the ``time.monotonic_ns()`` at which the
producers' schedule made it due, the same instant for every candidate whatever order its tasks
run in; CLOCK_MONOTONIC is shared by processes), KiB of server RSS per attached idle reader, the time to
attach every reader, the latency of a small request (``/info``) during delivery, the event loop, and
the server's garbage-collector counts during delivery.

The client is a non-blocking raw-socket reader driven by ``selectors`` (no asyncio, no HTTP
library): it finds ``data:`` lines in the (chunked) body, decodes their JSON with msgspec, and
checks the sequence. Traffic goes to 127.0.0.1 only, and every run is bounded in time.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import msgspec

from bench._harness import machine_line, settle_as_serve, table

ROOT = Path(__file__).resolve().parent.parent
STREAMS = 10
RATE = 10  # chunks per second per stream
PAD = "x" * 150  # brings each chunk to about 200 bytes
#: (readers, streams) measured: the issue's bar names 1,000 readers on one stream
CONFIGS = ((1_000, 1), (1_000, STREAMS), (10_000, STREAMS))
STEADY_SECONDS = 6.0
WARMUP_SECONDS = 2.0
KINDS = ("raw broadcast", "streamwire memory", "streamwire redis", "sse-starlette + queue")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def chunk_json(stream: int, seq: int, due_ns: int) -> bytes:
    return b'{"k":%d,"s":%d,"t":%d,"p":"%s"}' % (stream, seq, due_ns, PAD.encode())


#: The response headers streamwire's stream route answers with: the raw limits answer the same.
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


def wire_frame(seq: int, chunk: bytes) -> bytes:
    """A chunk as wire v2 puts it on the wire (what streamwire writes): the raw limits write the
    same bytes, so the comparison is of the servers, not of the frames' sizes."""
    return b'event: chunk\nid: %d\ndata: {"sequence":%d,"chunk":%s}\n\n' % (seq, seq, chunk)


# ---- the servers (run in their own process) -------------------------------------------------------


class _Control:
    """What every candidate shares: ``/ctl/start`` starts the producers, ``/ctl/gc`` reports the
    collector's counts, ``/info`` answers a small request. ``publish(stream, seq, due_ns)`` is
    the candidate's own way to hand a chunk to its readers; ``due_ns`` is when the chunk was due
    (the producers' schedule), the instant its delivery latency is measured from."""

    def __init__(self, publish: Callable[[int, int, int], Awaitable[None]], streams: int) -> None:
        self.publish = publish
        self.streams = streams
        self.tasks: list[Any] = []
        self.gc_start = [0, 0, 0]

    async def produce(self, stream: int) -> None:
        import asyncio

        seq = 0
        start = time.monotonic()
        start_ns = time.monotonic_ns()
        while True:
            seq += 1
            await self.publish(stream, seq, start_ns + (seq - 1) * 1_000_000_000 // RATE)
            delay = start + seq / RATE - time.monotonic()
            await asyncio.sleep(max(delay, 0))

    async def handle(self, scope: Scope, send: Send) -> bool:
        import asyncio

        path = scope["path"]
        if path == "/ctl/start":
            gc.collect()
            self.gc_start = [s["collections"] for s in gc.get_stats()]
            self.tasks = [asyncio.get_running_loop().create_task(self.produce(k))
                          for k in range(self.streams)]
            body = b"started"
        elif path == "/ctl/gc":
            counts = [s["collections"] - c for s, c in zip(gc.get_stats(), self.gc_start,
                                                            strict=True)]
            loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
            body = msgspec.json.encode({"gc": counts, "loop": loop, "frozen": gc.get_freeze_count()})
        elif path == "/info":
            body = b'{"ok":true}'
        else:
            return False
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})
        return True


def raw_app(streams: int) -> Any:
    subscribers: list[list[Send]] = [[] for _ in range(streams)]

    async def publish(stream: int, seq: int, due_ns: int) -> None:
        frame = wire_frame(seq, chunk_json(stream, seq, due_ns))
        message = {"type": "http.response.body", "body": frame, "more_body": True}
        for send in list(subscribers[stream]):
            try:
                await send(message)
            except OSError:
                subscribers[stream].remove(send)

    ctl = _Control(publish, streams)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or await ctl.handle(scope, send):
            return
        stream = int(scope["path"].rsplit("/", 2)[-2])
        await send({"type": "http.response.start", "status": 200,
                    "headers": SSE_HEADERS})
        subscribers[stream].append(send)
        while (await receive())["type"] != "http.disconnect":
            pass
        with contextlib.suppress(ValueError):
            subscribers[stream].remove(send)

    return app


def sse_starlette_app(streams: int) -> Any:
    import asyncio

    from sse_starlette.sse import EventSourceResponse, ServerSentEvent
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.routing import Route

    queues: list[set[asyncio.Queue[ServerSentEvent]]] = [set() for _ in range(streams)]

    async def publish(stream: int, seq: int, due_ns: int) -> None:
        event = ServerSentEvent(data=chunk_json(stream, seq, due_ns).decode(), event="chunk",
                                id=str(seq))
        for queue in queues[stream]:
            queue.put_nowait(event)

    ctl = _Control(publish, streams)

    async def sse(request: Request) -> EventSourceResponse:
        stream = int(request.path_params["k"])
        queue: asyncio.Queue[ServerSentEvent] = asyncio.Queue()
        queues[stream].add(queue)

        async def events() -> Any:
            try:
                while True:
                    yield await queue.get()
            finally:
                queues[stream].discard(queue)

        return EventSourceResponse(events(), ping=3600)

    inner = Starlette(routes=[Route("/streams/{k}/sse", sse)])

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and await ctl.handle(scope, send):
            return
        await inner(scope, receive, send)

    return app


def streamwire_app(backend: str, streams: int) -> Any:
    from streamwire.server import create_app

    if backend == "redis":
        from streamwire.log.redis import RedisLog

        log: Any = RedisLog(url=os.environ.get("STREAMWIRE_BENCH_REDIS", "redis://127.0.0.1:6379/0"),
                            prefix=f"bench-fanout-{os.getpid()}")
    else:
        from streamwire.log.memory import MemoryLog

        log = MemoryLog()
    options: dict[str, Any] = {"max_connections": 50_000, "max_connections_per_stream": 50_000}
    try:
        inner = create_app(log, allow_anonymous_writes=True, **options)  # type: ignore[call-arg]
    except TypeError:  # before create_app became secure by default
        inner = create_app(log, **options)

    async def publish(stream: int, seq: int, due_ns: int) -> None:
        await log.append(f"f{stream}", 0, chunk_json(stream, seq, due_ns))

    settle_as_serve()

    ctl = _Control(publish, streams)
    created = False

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal created
        if scope["type"] == "http" and not created:
            created = True
            for k in range(streams):
                await log.create_stream(f"f{k}")
        if scope["type"] == "http" and scope["path"] != "/info" and await ctl.handle(scope, send):
            return
        if scope["type"] == "http" and scope["path"] == "/info":
            scope = {**scope, "path": "/streams/f0/info", "raw_path": b"/streams/f0/info"}
        await inner(scope, receive, send)

    return app


def serve(kind: str, port: int, streams: int) -> None:
    import uvicorn

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    factory: dict[str, Callable[[], Any]] = {
        "raw broadcast": lambda: raw_app(streams),
        "streamwire memory": lambda: streamwire_app("memory", streams),
        "streamwire redis": lambda: streamwire_app("redis", streams),
        "sse-starlette + queue": lambda: sse_starlette_app(streams),
    }
    uvicorn.run(factory[kind](), host="127.0.0.1", port=port, log_level="warning",
                access_log=False, backlog=16_384, timeout_keep_alive=3600)


# ---- the client -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpus() -> tuple[set[int], set[int]] | None:
    cpus = sorted(os.sched_getaffinity(0))
    return ({cpus[0]}, set(cpus[1:])) if len(cpus) >= 2 else None


def _cpu_seconds(pid: int) -> float:
    """The process's CPU time so far, to the nanosecond (``/proc/<pid>/stat`` counts 10 ms
    ticks: a few percent of a 6 s window at 10,000 deliveries a second)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a thread ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _request(port: int, path: str, timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
        parts = []
        while chunk := s.recv(65536):
            parts.append(chunk)
    answer = b"".join(parts)
    return answer.split(b"\r\n\r\n", 1)[1]


class _Reader:
    __slots__ = ("buf", "expect", "headers", "sock", "stream")

    def __init__(self, sock: socket.socket, stream: int) -> None:
        self.sock = sock
        self.stream = stream
        self.buf = b""
        self.headers = False
        self.expect = 0  # the first seq seen sets it: a reader attaches mid-stream


class Verdict(msgspec.Struct):
    delivered: int = 0
    errors: int = 0
    first_error: str = ""


def _read(reader: _Reader, latencies: list[int], verdict: Verdict, record: bool) -> bool:
    """Consume what the socket has; False when it closed."""
    try:
        data = reader.sock.recv(262_144)
    except BlockingIOError:
        return True
    if not data:
        return False
    now = time.monotonic_ns()
    buf = reader.buf + data if reader.buf else data
    if not reader.headers:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            reader.buf = buf
            return True
        if not buf.startswith(b"HTTP/1.1 200"):
            verdict.errors += 1
            verdict.first_error = verdict.first_error or buf[:120].decode(errors="replace")
        reader.headers = True
        buf = buf[end + 4:]
    # the end of the last complete frame (LF or CRLF lines: sse-starlette writes CRLF)
    cut = max(buf.rfind(b"\n\n"), buf.rfind(b"\n\r\n"))
    if cut < 0:
        reader.buf = buf
        return True
    rest = buf.find(b"\n", cut + 1) + 1
    reader.buf = buf[rest:]
    pos = 0
    decode = msgspec.json.decode
    while (start := buf.find(b"data: ", pos, cut)) >= 0:
        stop = buf.find(b"\n", start)
        pos = stop
        payload = decode(buf[start + 6:stop])
        if "chunk" in payload and "sequence" in payload:  # wire v2: the chunk rides in a frame
            payload = payload["chunk"]
        if "s" not in payload:
            continue  # caught-up and other markers
        seq = payload["s"]
        if (reader.expect and seq != reader.expect) or payload["k"] != reader.stream:
            verdict.errors += 1
            verdict.first_error = verdict.first_error or f"stream {reader.stream}: {seq} != {reader.expect}"
        reader.expect = seq + 1
        verdict.delivered += 1
        if record:
            latencies.append(now - payload["t"])
    return True


@contextlib.contextmanager
def server_process(module: str, args: list[str], port: int, ready: str,
                   timeout: float) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m MODULE serve ARGS`` of this checkout in a process of its own, pinned to one
    CPU and this process to the other (``_cpus``), once ``GET ready`` answers; SIGINT at exit
    (SIGKILL after 15 s)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    original = os.sched_getaffinity(0)
    proc = subprocess.Popen([sys.executable, "-m", module, "serve", *args], cwd=ROOT, env=env)
    try:
        split = _cpus()
        if split is not None:
            os.sched_setaffinity(proc.pid, split[0])
            os.sched_setaffinity(0, split[1])
        deadline = time.monotonic() + 20
        while True:
            try:
                _request(port, ready, timeout=timeout)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield proc
    finally:
        # the next server is split from every CPU again (a child started while this process
        # is pinned would share its CPU with the client)
        os.sched_setaffinity(0, original)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_one(kind: str, readers: int, streams: int = STREAMS) -> dict[str, Any]:
    port = _free_port()
    sel = selectors.DefaultSelector()
    socks: list[_Reader] = []
    with contextlib.ExitStack() as stack:
        proc = stack.enter_context(server_process("bench.bench_fanout", [kind, str(port), str(streams)], port,
                                                  "/info", timeout=1))
        stack.callback(sel.close)
        stack.callback(lambda: [r.sock.close() for r in socks])
        rss0 = _rss_kib(proc.pid)
        verdict = Verdict()
        latencies: list[int] = []
        t0 = time.monotonic()
        for i in range(readers):
            s = socket.socket()
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            r = _Reader(s, i % streams)
            s.send(b"GET /streams/%s%d/sse HTTP/1.1\r\nHost: x\r\n\r\n"
                   % (b"f" if kind.startswith("streamwire") else b"", r.stream))
            sel.register(s, selectors.EVENT_READ, r)
            socks.append(r)
            if i % 200 == 199:  # keep the accept queue short
                for key, _ in sel.select(0):
                    _read(key.data, latencies, verdict, False)
        while not all(r.headers for r in socks):
            if time.monotonic() - t0 > 120:
                raise RuntimeError(f"{kind}: attaching {readers} readers took over 120 s")
            for key, _ in sel.select(0.5):
                _read(key.data, latencies, verdict, False)
        attach = time.monotonic() - t0
        time.sleep(0.5)
        rss1 = _rss_kib(proc.pid)
        _request(port, "/ctl/start")
        t_start = time.monotonic()
        info_ms: list[float] = []
        next_info = t_start + WARMUP_SECONDS
        cpu0 = None
        delivered0 = 0
        while True:
            now = time.monotonic()
            record = now - t_start >= WARMUP_SECONDS
            if record and cpu0 is None:
                cpu0, delivered0, w0 = _cpu_seconds(proc.pid), verdict.delivered, now
            if now - t_start >= WARMUP_SECONDS + STEADY_SECONDS:
                break
            for key, _ in sel.select(0.05):
                if not _read(key.data, latencies, verdict, record):
                    sel.unregister(key.fileobj)
                    verdict.errors += 1
                    verdict.first_error = verdict.first_error or "a reader was closed"
            if record and now >= next_info:
                t = time.perf_counter()
                _request(port, "/info")
                info_ms.append((time.perf_counter() - t) * 1000)
                next_info = now + 0.25
        assert cpu0 is not None
        cpu = _cpu_seconds(proc.pid) - cpu0
        delivered = verdict.delivered - delivered0
        expected = readers * RATE * (time.monotonic() - w0)
        gcinfo = msgspec.json.decode(_request(port, "/ctl/gc"))
        lat = sorted(latencies)
        return {
            "kind": kind, "readers": readers, "errors": verdict.errors,
            "first_error": verdict.first_error,
            "cpu_us": cpu / delivered * 1e6 if delivered else float("nan"),
            "share": delivered / expected if expected else 0.0,
            "p50": lat[len(lat) // 2] / 1e6 if lat else float("nan"),
            "p99": lat[int(len(lat) * 0.99)] / 1e6 if lat else float("nan"),
            "kib": (rss1 - rss0) / readers, "attach": attach,
            "info_p50": statistics.median(info_ms) if info_ms else float("nan"),
            "info_max": max(info_ms) if info_ms else float("nan"),
            "loop": gcinfo["loop"], "gc": gcinfo["gc"],
        }


def main(rounds: int, configs: tuple[tuple[int, int], ...] = CONFIGS,
         kinds: tuple[str, ...] = KINDS) -> str:
    """Every candidate on every (readers, streams) configuration, ``rounds`` times, the candidates
    interleaved within each round, in reverse every other round (a fresh server process each
    time); a row is the median of its rounds, its ratio the median of the rounds' ratios to the limit's run in the same round."""
    rounds = max(1, rounds)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    rows = []
    checks: list[str] = []
    for n, streams in configs:
        seen: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
        failed: dict[str, str] = {}
        for round_ in range(rounds):
            # every other round in reverse: whatever running first or last does cancels out
            for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                if kind in failed:
                    continue
                try:
                    seen[kind].append(run_one(kind, n, streams))
                except Exception as exc:  # a candidate that cannot take the load is a row
                    failed[kind] = str(exc)
        results = {kind: _median_row(runs, seen.get("raw broadcast", []))
                   for kind, runs in seen.items() if runs and kind not in failed}
        where = f"{n:,} on {streams}"
        for kind, exc in failed.items():
            rows.append([where, kind, f"FAILED: {exc}"] + ["-"] * 9)
        for kind, r in results.items():
            ok = "ok" if r["errors"] == 0 else f"WRONG: {r['errors']} ({r['first_error']})"
            ratio = f"{r['ratio']:.2f}x" if r["ratio"] == r["ratio"] else "-"
            rows.append([where, kind, ok, f"{r['share']:.0%}", f"{r['cpu_us']:.1f}", ratio,
                         f"{r['p50']:.1f} / {r['p99']:.1f}", f"{r['kib']:.1f}",
                         f"{r['attach']:.2f}", f"{r['info_p50']:.1f} / {r['info_max']:.1f}",
                         r["loop"], "/".join(map(str, r["gc"]))])
        checks += _checks(n, streams, results)
    return "\n".join([
        "## Fan-out", "", machine_line(["uvicorn", "sse-starlette", "redis"]), "",
        f"{RATE} chunks/s of ~200 B per stream; warm-up {WARMUP_SECONDS:.0f} s, steady window "
        f"{STEADY_SECONDS:.0f} s; server on one CPU, client on the other; median of {rounds} "
        "round(s), candidates interleaved.", "",
        table("Readers on streams (every delivery checked)",
              ["readers on streams", "candidate", "deliveries", "delivered/expected",
               "CPU us/event", "vs limit", "p50 / p99 ms", "KiB/reader", "attach s",
               "/info p50 / max ms", "loop", "gc gen0/1/2"], rows),
        "", "Bars: " + ("; ".join(checks) if checks else "(candidates missing)"),
    ])


def _median_row(runs: list[dict[str, Any]], limits: list[dict[str, Any]]) -> dict[str, Any]:
    """One candidate's rounds as one row: medians, errors summed, the median ratio of its CPU
    per event to the limit's in the same round (NaN without the limit)."""
    row = dict(runs[len(runs) // 2])
    for key in ("cpu_us", "share", "p50", "p99", "kib", "attach", "info_p50", "info_max"):
        row[key] = statistics.median(r[key] for r in runs)
    row["errors"] = sum(r["errors"] for r in runs)
    row["first_error"] = next((r["first_error"] for r in runs if r["first_error"]), "")
    ratios = [r["cpu_us"] / lim["cpu_us"] for r, lim in zip(runs, limits, strict=False)]
    row["ratio"] = statistics.median(ratios) if ratios else float("nan")
    return row


def _checks(n: int, streams: int, by: dict[str, dict[str, Any]]) -> list[str]:
    """The bars for ``n`` readers on ``streams`` streams, from this run's rows: issue #25's
    (1,000 readers on one stream: CPU per event <= 1.1x the limit, on every backend), and
    issue #17's on 10 streams."""
    limit, memory, redis = (by.get(k) for k in ("raw broadcast", "streamwire memory",
                                                "streamwire redis"))
    out: list[str] = []
    if limit is None or memory is None:
        return out
    if streams == 1:
        for name, r in (("memory", memory), ("Redis", redis)):
            if r is not None:
                ok = "yes" if r["ratio"] <= 1.1 else "NO"
                out.append(f"{n:,} on one stream: {name} CPU {r['ratio']:.2f}x the limit "
                           f"(<= 1.1x): {ok}")
        return out
    bar = 1.5 if n >= 10_000 else 1.3
    cpu = memory["ratio"]
    out.append(f"{n:,} memory CPU {cpu:.2f}x the limit (<= {bar}x): {'yes' if cpu <= bar else 'NO'}")
    if n >= 10_000:
        if limit["p99"] > 100:
            p99 = memory["p99"] / limit["p99"]
            out.append(f"{n:,} the limit's own p99 is {limit['p99']:.0f} ms (> 100 ms on one core); "
                       f"memory p99 {p99:.2f}x it (<= 1.5x): {'yes' if p99 <= 1.5 else 'NO'}")
        else:
            ok = memory["p99"] <= 100
            out.append(f"{n:,} memory p99 {memory['p99']:.0f} ms (<= 100): {'yes' if ok else 'NO'}")
    if redis is not None:
        red = redis["cpu_us"] / memory["cpu_us"]  # medians of the same rounds
        out.append(f"{n:,} Redis CPU {red:.2f}x memory (<= 1.3x): {'yes' if red <= 1.3 else 'NO'}")
    kib = max(r["kib"] for r in (memory, redis) if r is not None)
    out.append(f"{n:,} KiB per idle reader <= 16: {'yes' if kib <= 16 else 'NO'} ({kib:.1f})")
    wrong = [k for k, r in by.items() if r["errors"]]
    out.append(f"{n:,} every delivery verified: {'yes' if not wrong else 'NO: ' + ', '.join(wrong)}")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:  # python -m bench.bench_fanout [READERS:STREAMS ...]
        print(main(1, tuple((int(a), int(b)) for a, b in (c.split(":") for c in sys.argv[1:]))
                   or CONFIGS))
