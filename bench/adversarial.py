"""An adversarial run against ``streamwire serve`` on memory, SQLite and Redis (127.0.0.1 only,
bounded: every loop and wait has a limit).

    python -m bench.adversarial [--backends memory,sqlite,redis]

Each backend gets a fresh ``streamwire serve`` process (Redis: a private ``redis-server`` on its
own port, so freezing and killing its connections disturbs nobody) and these attacks: auth,
hostile bodies, ids and cursors, state transitions, concurrent writers, 2,000 idle readers, 200
readers that never read, a burst of 3,000 connects over the per-stream cap, a client leaving
mid-replay of 100k chunks, SIGKILL + restart during a write burst, Redis frozen (SIGSTOP) and its
connections killed (CLIENT KILL) during appends, and SIGTERM with open readers.

It must find nothing: no 5xx for a client mistake, no acknowledged chunk lost, no chunk stored
twice by a retrying producer (retries carry the ``Producer-Id/-Epoch/-Seq`` headers), memory and
sockets bounded, caps exact. It prints the figures and every finding, and exits 1 on a finding.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from streamwire.client import AsyncProducer

TOKEN = "adversarial-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Report:
    """Figures and findings of one backend's run."""

    backend: str
    figures: dict[str, Any] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)

    def check(self, ok: bool, finding: str) -> None:
        if not ok:
            self.findings.append(finding)


class Server:
    """One ``streamwire serve`` process on a fixed port (so a restart keeps its address)."""

    def __init__(self, log: str, workdir: Path) -> None:
        self.log = log
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []

    def start(self) -> None:
        argv = [sys.executable, "-m", "streamwire.cli", "serve", "--port", str(self.port),
                "--token", TOKEN, "--log", self.log, "--send-timeout", "2", "--grace", "3",
                "--log-level", "warning"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=self.workdir)
        threading.Thread(target=self._collect, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.base}/openapi.json", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("streamwire serve did not start:\n" + "\n".join(self.lines))

    def _collect(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, limit: float = 10) -> tuple[int, float]:
        """SIGTERM; returns the exit code and the seconds it took."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(limit)
        return code, time.monotonic() - started

    def rss_mib(self) -> float:
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def sockets(self, peers: set[int] | None = None) -> int:
        """Server-side TCP sockets of its port (to ``peers`` local ports, if given)."""
        count = 0
        with open("/proc/net/tcp") as table:
            next(table)
            for line in table:
                local, remote, state = line.split()[1:4]
                if int(local.rsplit(":", 1)[1], 16) != self.port or state == "0A":
                    continue
                if peers is None or int(remote.rsplit(":", 1)[1], 16) in peers:
                    count += 1
        return count


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir)], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def command(self, *args: str) -> bytes:
        out = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True,
                             timeout=10, check=False)
        return out.stdout

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


class Producer:
    """One writer of the run: ``streamwire.client.AsyncProducer`` (Producer-Id/-Epoch/-Seq on
    every request, retried with the same seq after a lost answer, a 503 or a 504), on a client of
    its own that counts every answer it gets."""

    def __init__(self, client: httpx.AsyncClient, stream: str, name: str) -> None:
        self.stream, self.name = stream, name
        self.acked: list[tuple[int, int]] = []  # (sequence, i)
        self.statuses: dict[int, int] = {}

        async def count(response: httpx.Response) -> None:
            self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1

        self.client = httpx.AsyncClient(timeout=30, event_hooks={"response": [count]})
        self.inner = AsyncProducer(self.client, client.base_url, stream, token=TOKEN,
                                   keepalive_interval=None)

    @property
    def retries(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    async def send(self, route: str, body: Any, limit: float = 30.0) -> None:
        assert route == "end", route
        await self.inner.end(body["status"])

    async def append(self, first: int, count: int) -> None:
        chunks = [(0, {"w": self.name, "i": i}) for i in range(first, first + count)]
        sequences = await self.inner.append(chunks)
        self.acked += zip(sequences, range(first, first + count), strict=True)

    async def aclose(self) -> None:
        await self.client.aclose()


async def read_stream(base: str, stream: str, *, limit: float = 60.0) -> list[dict[str, Any]]:
    """Every chunk of a finished stream, re-attaching from the cursor after drops (bounded)."""
    chunks: list[dict[str, Any]] = []
    cursor = 0
    deadline = time.monotonic() + limit
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while time.monotonic() < deadline:
            try:
                async with client.stream("GET", f"/streams/{stream}/sse",
                                         params={"cursor": str(cursor)}) as resp:
                    if resp.status_code != 200:
                        await asyncio.sleep(0.2)
                        continue
                    event, data = "", ""
                    async for line in resp.aiter_lines():
                        if line.startswith("event: "):
                            event = line[7:]
                        elif line.startswith("data: "):
                            data = line[6:]
                        elif line == "" and event:
                            if event == "chunk":
                                frame = json.loads(data)
                                chunks.append(frame["chunk"])
                                cursor = frame["sequence"]
                            elif event in ("end", "fail", "truncated"):
                                return chunks
                            event = ""
            except httpx.TransportError:
                await asyncio.sleep(0.2)
    raise RuntimeError(f"{stream}: the stream did not end within {limit}s")


def check_once(report: Report, what: str, chunks: list[dict[str, Any]],
               producers: list[Producer]) -> None:
    """Every acknowledged chunk is there exactly once; nothing is there twice."""
    seen: dict[tuple[str, int], int] = {}
    for chunk in chunks:
        key = (chunk["w"], chunk["i"])
        seen[key] = seen.get(key, 0) + 1
    acked = {(p.name, i) for p in producers for _, i in p.acked}
    lost = acked - seen.keys()
    twice = sum(1 for n in seen.values() if n > 1)
    report.figures[f"{what}: acked / stored / lost / duplicated / retries"] = (
        f"{len(acked)} / {len(chunks)} / {len(lost)} / {twice} / "
        f"{sum(p.retries for p in producers)}")
    report.check(not lost, f"{what}: {len(lost)} acknowledged chunks lost")
    report.check(not twice, f"{what}: {twice} chunks stored more than once")


# ---- the attacks ------------------------------------------------------------------------------------

Attack = Callable[[Server, httpx.AsyncClient, Report], Awaitable[None]]


def no_5xx(report: Report, what: str, resp: httpx.Response, allowed: tuple[int, ...]) -> None:
    report.figures["requests checked"] = report.figures.get("requests checked", 0) + 1
    report.check(resp.status_code in allowed,
                 f"{what}: {resp.status_code} (expected {allowed}): {resp.text[:120]}")


async def attack_auth(srv: Server, client: httpx.AsyncClient, report: Report) -> None:
    await client.put("/streams/auth", headers=AUTH)
    for headers, allowed in (({}, (401,)), ({"Authorization": "Bearer"}, (401,)),
                             ({"Authorization": "Basic " + TOKEN}, (401,)),
                             ({"Authorization": "Bearer wrong"}, (403,)),
                             ({"Authorization": "Bearer " + TOKEN + "x"}, (403,)),
                             ({"Authorization": "Bearer " + TOKEN[:-1]}, (403,)),
                             ({"Authorization": "bearer  " + TOKEN}, (200,))):
        for route in ("chunks", "end", "fail", "cleanup", "reset", "reactivate"):
            resp = await client.post(f"/streams/auth/{route}", headers=headers, content=b"{}")
            ok = allowed if allowed != (200,) else (200, 409, 422)
            no_5xx(report, f"auth {headers} {route}", resp, ok)
    raw = b"Authorization: Bearer \xe9\xff\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    writer.write(b"PUT /streams/auth2 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n" + raw + b"\r\n")
    status = int((await reader.readline()).split()[1])
    writer.close()
    report.check(status == 403, f"auth: a non-ASCII token got {status}")


async def attack_hostile_input(srv: Server, client: httpx.AsyncClient, report: Report) -> None:
    await client.put("/streams/h", headers=AUTH)
    await client.post("/streams/h/chunks", headers=AUTH, json=[{"step": 0, "chunk": "one"}])
    deep = b"[" * 100_000 + b"]" * 100_000
    bodies = [b"", b"[", b"nul", b"\xff\xfe", b'[{"step": 0, "chunk": "\xff"}]',
              b'[{"step": 0, "chunk": "\\ud800"}]', b'[{"step": -1, "chunk": 1}]',
              b'[{"step": 9007199254740992, "chunk": 1}]', b'[{"step": 1e3, "chunk": 1}]',
              b'[{"step": 0, "chunk": ' + deep + b"}]", b'{"status": "completed", "output": '
              + deep + b"}", b'[{"step": 0}]', b"[" + b'{"step":0,"chunk":1},' * 10_001 + b"1]",
              b'{"status": "weird"}', b'{"error": 1, "recoverable": "x"}', b"x" * (17 << 20)]
    for body in bodies:
        for route in ("chunks", "end", "fail", "cleanup"):
            resp = await client.post(f"/streams/h/{route}", headers=AUTH, content=body)
            no_5xx(report, f"body {body[:30]!r} -> {route}", resp, (400, 413, 422))
    ids = ["alias%FF", "a%0D%0Ab", "nul%00", "x" * 300, "a%E2%80%AE", "%ED%A0%80", "..", "a%2Fb"]
    for stream_id in ids:
        for method, route in (("PUT", ""), ("GET", "/info"), ("GET", "/sse")):
            resp = await client.request(method, f"/streams/{stream_id}{route}", headers=AUTH)
            no_5xx(report, f"id {stream_id[:20]} {method}{route}", resp, (400, 404))
    for cursor in ("-1", "1.5", "9007199254740992", "99999999999999999999", "", " 1", "0x1"):
        resp = await client.get("/streams/h/sse", params={"cursor": cursor})
        no_5xx(report, f"cursor {cursor!r}", resp, (400,))
        if cursor.strip() != "1":  # a padded valid cursor is a valid Last-Event-ID
            resp = await client.get("/streams/h/sse", headers={"Last-Event-ID": cursor or "x"})
            no_5xx(report, f"Last-Event-ID {cursor!r}", resp, (400,))
    info = (await client.get("/streams/h/info")).json()
    report.check((info["head"], info["status"]) == (1, "active"),
                 f"hostile input changed the stream: {info}")


async def attack_transitions(srv: Server, client: httpx.AsyncClient, report: Report) -> None:
    post = client.post
    await client.put("/streams/t", headers=AUTH)
    steps: list[tuple[str, Any, tuple[int, ...]]] = [
        ("reactivate", None, (409,)), ("chunks", [{"step": 2, "chunk": 1}], (200,)),
        ("cleanup", {"step": 1}, (200,)), ("end", {"status": "completed"}, (200,)),
        ("end", {"status": "completed"}, (409,)), ("chunks", [{"step": 0, "chunk": 1}], (409,)),
        ("fail", {"error": "x", "recoverable": True}, (409,)), ("reactivate", None, (200,)),
        ("reset", None, (200,)), ("chunks", [{"step": 0, "chunk": 2}], (200,)),
        ("fail", {"error": "boom", "recoverable": False}, (200,)),
        ("cleanup", {"step": 0}, (200, 409)),
    ]
    for route, body, allowed in steps:
        resp = await post(f"/streams/t/{route}", headers=AUTH, json=body)
        no_5xx(report, f"transition {route}", resp, allowed)
    resp = await post("/streams/nope/chunks", headers=AUTH, json=[{"step": 0, "chunk": 1}])
    no_5xx(report, "append to an unknown stream", resp, (404,))


async def attack_concurrent_writers(srv: Server, client: httpx.AsyncClient,
                                    report: Report) -> None:
    await client.put("/streams/cw", headers=AUTH)
    producers = [Producer(client, "cw", f"w{k}") for k in range(10)]

    async def run(p: Producer) -> None:
        for i in range(0, 100, 2):
            await p.append(i, 2)

    await asyncio.gather(*(run(p) for p in producers))
    await client.post("/streams/cw/end", headers=AUTH, json={"status": "completed"})
    for p in producers:
        await p.aclose()
    sequences = sorted(s for p in producers for s, _ in p.acked)
    report.check(sequences == list(range(1, 1001)), "concurrent writers: sequences not 1..1000")
    check_once(report, "concurrent writers", await read_stream(srv.base, "cw"), producers)


async def open_raw(port: int, path: str, *, rcvbuf: int | None = None
                   ) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    line = await reader.readline()
    return int(line.split()[1]), reader, writer


async def attack_idle_readers(srv: Server, client: httpx.AsyncClient, report: Report) -> None:
    for k in range(20):
        await client.put(f"/streams/idle{k}", headers=AUTH)
    rss0 = srv.rss_mib()
    opened = await asyncio.gather(*(open_raw(srv.port, f"/streams/idle{k % 20}/sse")
                                    for k in range(2000)))
    report.check(all(status == 200 for status, _, _ in opened), "idle readers refused")
    await asyncio.sleep(1)
    cpu0, t0 = srv.cpu_seconds(), time.monotonic()
    await asyncio.sleep(5)
    cpu = (srv.cpu_seconds() - cpu0) / (time.monotonic() - t0)
    report.figures["2,000 idle readers: server CPU (% of a core), RSS growth (MiB)"] = (
        f"{cpu * 100:.1f} %, {srv.rss_mib() - rss0:.0f} MiB")
    report.check(cpu < 0.10, f"2,000 idle readers cost {cpu * 100:.0f} % of a core")
    for _, _, writer in opened:
        writer.close()


async def attack_never_read(srv: Server, client: httpx.AsyncClient, report: Report) -> None:
    await client.put("/streams/nr", headers=AUTH)
    await client.post("/streams/nr/chunks", headers=AUTH, json=[{"step": 0, "chunk": 0}])
    rss0 = srv.rss_mib()
    opened = await asyncio.gather(*(open_raw(srv.port, "/streams/nr/sse", rcvbuf=4096)
                                    for _ in range(200)))
    peers = {w.get_extra_info("sockname")[1] for _, _, w in opened}
    payload = "x" * 8192
    peak = 0.0
    deadline = time.monotonic() + 30
    while srv.sockets(peers) and time.monotonic() < deadline:
        await client.post("/streams/nr/chunks", headers=AUTH,
                          json=[{"step": 0, "chunk": payload}] * 32)
        peak = max(peak, srv.rss_mib() - rss0)
        await asyncio.sleep(0.05)
    left = srv.sockets(peers)
    report.figures["200 readers that never read: RSS peak growth, sockets left after eviction"] = (
        f"{peak:.0f} MiB, {left}")
    report.check(left == 0, f"never-read readers: {left} server sockets left after eviction")
    report.check(peak < 150, f"never-read readers: RSS grew by {peak:.0f} MiB")
    for _, _, writer in opened:
        writer.close()


async def attack_burst(srv: Server, client: httpx.AsyncClient, report: Report) -> None:
    await client.put("/streams/burst", headers=AUTH)
    results = await asyncio.gather(*(open_raw(srv.port, "/streams/burst/sse")
                                     for _ in range(3000)), return_exceptions=True)
    statuses: dict[str, int] = {}
    for result in results:
        key = type(result).__name__ if isinstance(result, BaseException) else str(result[0])
        statuses[key] = statuses.get(key, 0) + 1
    report.figures["3,000 connects on one stream (cap 1,000): answers"] = statuses
    report.check(statuses.get("200") == 1000, f"burst: {statuses.get('200')} admitted, cap 1,000")
    report.check(set(statuses) <= {"200", "429"}, f"burst: unexpected answers {statuses}")
    for result in results:
        if not isinstance(result, BaseException):
            result[2].close()


async def attack_leave_mid_replay(srv: Server, client: httpx.AsyncClient,
                                  report: Report) -> None:
    await client.put("/streams/big", headers=AUTH)
    for first in range(0, 100_000, 10_000):
        resp = await client.post("/streams/big/chunks", headers=AUTH,
                                 json=[{"step": 0, "chunk": i} for i in range(first, first + 10_000)])
        report.check(resp.status_code == 200, f"100k replay: append {resp.status_code}")
    _, reader, writer = await open_raw(srv.port, "/streams/big/sse")
    got = 0
    while got < 200_000:  # about 1,000 frames' worth of bytes, then leave
        got += len(await reader.read(65536))
    peer = writer.get_extra_info("sockname")[1]
    writer.transport.abort()
    await asyncio.sleep(0.5)
    cpu0 = srv.cpu_seconds()
    await asyncio.sleep(2)
    cpu = (srv.cpu_seconds() - cpu0) / 2
    report.figures["client left mid-replay of 100k chunks: server CPU after, its socket"] = (
        f"{cpu * 100:.1f} %, {srv.sockets({peer})}")
    report.check(cpu < 0.10, f"the replay went on after the client left ({cpu * 100:.0f} %)")
    report.check(srv.sockets({peer}) == 0, "the server kept the socket of a client that left")


async def attack_sigterm_with_readers(srv: Server, client: httpx.AsyncClient,
                                      report: Report) -> None:
    await client.put("/streams/term", headers=AUTH)
    opened = await asyncio.gather(*(open_raw(srv.port, "/streams/term/sse") for _ in range(50)))
    await asyncio.sleep(0.5)
    code, took = await asyncio.to_thread(srv.terminate)
    shutdown_frames = 0
    for _, reader, writer in opened:
        body = await asyncio.wait_for(reader.read(), 5)
        shutdown_frames += b"SERVER_SHUTDOWN" in body
        writer.close()
    report.figures["SIGTERM with 50 readers: exit code, seconds, fail frames"] = (
        f"{code}, {took:.1f} s, {shutdown_frames}/50")
    report.check(code == 0 and took < 5, f"SIGTERM: exit {code} after {took:.1f} s")
    report.check(shutdown_frames == 50, f"SIGTERM: {shutdown_frames}/50 readers got the fail")


def answers(producers: list[Producer]) -> dict[int, int]:
    """How often each status answered the producers' requests (retries included)."""
    total: dict[int, int] = {}
    for p in producers:
        for status, n in p.statuses.items():
            total[status] = total.get(status, 0) + n
    return dict(sorted(total.items()))


async def write_burst(client: httpx.AsyncClient, stream: str, producers: list[Producer],
                      batches: int, fault: Callable[[], Awaitable[None]]) -> None:
    """Producers append batches of 5 (at least ``batches``, and on until ``fault`` is over) while
    ``fault`` strikes, then the first one ends the stream."""
    over = asyncio.Event()

    async def run(p: Producer) -> None:
        b = 0
        while b < batches or not over.is_set():
            await p.append(b * 5, 5)
            b += 1
            await asyncio.sleep(0.01)

    async def strike() -> None:
        await asyncio.sleep(0.3)
        try:
            await fault()
        finally:
            over.set()

    try:
        await asyncio.gather(strike(), *(run(p) for p in producers))
        await producers[0].send("end", {"status": "completed"})
    finally:
        for p in producers:
            await p.aclose()


async def attack_restart(srv: Server, client: httpx.AsyncClient, report: Report) -> None:
    if srv.log == "memory":
        report.figures["SIGKILL + restart"] = "n/a (the memory log does not outlive its process)"
        return
    await client.put("/streams/rs", headers=AUTH)
    producers = [Producer(client, "rs", f"r{k}") for k in range(4)]

    async def kill_and_restart() -> None:
        await asyncio.to_thread(srv.kill)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(srv.start)

    await write_burst(client, "rs", producers, 60, kill_and_restart)
    statuses = answers(producers)
    report.figures["SIGKILL + restart: answers seen by the producers"] = statuses
    report.check(not any(400 <= s < 500 for s in statuses), f"restart: producers got {statuses}")
    check_once(report, "SIGKILL + restart", await read_stream(srv.base, "rs"), producers)


async def attack_redis_faults(srv: Server, client: httpx.AsyncClient, report: Report,
                              redis: PrivateRedis | None) -> None:
    if redis is None:
        return
    for name, fault in (("frozen", "stop"), ("CLIENT KILL", "kill")):
        stream = f"rf-{fault}"
        await client.put(f"/streams/{stream}", headers=AUTH)
        producers = [Producer(client, stream, f"{fault}{k}") for k in range(4)]

        async def strike(fault: str = fault) -> None:
            if fault == "stop":
                # past the log's command timeout (10 s): writes in flight get 504 unknown
                os.kill(redis.proc.pid, signal.SIGSTOP)
                await asyncio.sleep(11)
                os.kill(redis.proc.pid, signal.SIGCONT)
            else:
                for _ in range(20):
                    await asyncio.to_thread(redis.command, "CLIENT", "KILL", "TYPE", "normal")
                    await asyncio.sleep(0.05)

        await write_burst(client, stream, producers, 40, strike)
        report.figures[f"Redis {name}: answers seen by the producers"] = answers(producers)
        check_once(report, f"Redis {name}", await read_stream(srv.base, stream), producers)


ATTACKS: list[tuple[str, Attack]] = [
    ("auth", attack_auth),
    ("hostile bodies, ids, cursors", attack_hostile_input),
    ("state transitions", attack_transitions),
    ("concurrent writers", attack_concurrent_writers),
    ("2,000 idle readers", attack_idle_readers),
    ("200 readers that never read", attack_never_read),
    ("a burst over the caps", attack_burst),
    ("a client leaving mid-replay", attack_leave_mid_replay),
    ("SIGKILL + restart during a write burst", attack_restart),
]


async def run_backend(backend: str, workdir: Path) -> Report:
    report = Report(backend)
    redis = PrivateRedis(workdir) if backend == "redis" else None
    log = {"memory": "memory", "sqlite": f"sqlite:{workdir / 'streams.db'}"}.get(
        backend, redis.url if redis else "")
    srv = Server(log, workdir)
    try:
        await asyncio.to_thread(srv.start)
        async with httpx.AsyncClient(base_url=srv.base, timeout=30) as client:
            for name, attack in ATTACKS:
                started = time.monotonic()
                try:
                    await asyncio.wait_for(attack(srv, client, report), 180)
                except Exception as exc:  # a crashed attack is a finding, not the end of the run
                    report.findings.append(f"{name}: {type(exc).__name__}: {exc}")
                report.figures[f"seconds: {name}"] = round(time.monotonic() - started, 1)
            await attack_redis_faults(srv, client, report, redis)
            report.figures["server RSS at the end (MiB)"] = round(srv.rss_mib())
            await attack_sigterm_with_readers(srv, client, report)
        tracebacks = [line for line in srv.lines if re.search(r"Traceback|ERROR", line)]
        report.figures["server log lines with a traceback or ERROR"] = len(tracebacks)
        report.check(not tracebacks, f"server logged errors: {tracebacks[:3]}")
    finally:
        srv.kill()
        if redis is not None:
            redis.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="memory,sqlite,redis")
    args = parser.parse_args(argv)
    backends = args.backends.split(",")
    if "redis" in backends and shutil.which("redis-server") is None:
        print("redis-server is not installed: skipping redis", file=sys.stderr)
        backends.remove("redis")
    found = 0
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix="sw-adversarial-") as tmp:
            report = asyncio.run(run_backend(backend, Path(tmp)))
        print(f"\n## {backend}")
        for key, value in report.figures.items():
            print(f"- {key}: {value}")
        for finding in report.findings:
            print(f"- FINDING: {finding}")
        found += len(report.findings)
    print(f"\n{found} findings")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
