"""The commands of issue 8: ``streamwire demo`` (end to end, resumed, says so) and ``streamwire tail``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from helpers.chaos_proxy import ChaosConfig, ChaosProxy, ServerThread
from helpers.processes import sigint_as_at_a_terminal
from streamwire.cli.demo import REPLY


def test_demo_resumes_the_reply_and_counts_the_replay() -> None:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "streamwire.cli", "demo"], capture_output=True,
                          text=True, timeout=60, check=False)
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    summary = re.search(r"^(\d+) chunks replayed after the cut; none lost, none repeated "
                        r"\((\d+) chunks in order, stream completed", out, re.MULTILINE)
    assert summary is not None, out
    replayed, total = int(summary[1]), int(summary[2])
    assert replayed > 0
    assert total == len(REPLY.split(" "))
    assert "cutting our own connection after 25 chunks" in out
    assert "re-attached with Last-Event-ID: 25" in out
    # The reply itself reads whole once the status lines are taken out.
    text = "".join(line for line in out.splitlines() if not line.startswith("  ["))
    assert text.startswith(REPLY), out
    assert elapsed < 20


def test_ctrl_c_stops_the_whole_demo_quietly_with_130() -> None:
    # a real SIGINT once the reply is streaming: the demo (not only its embedded server) stops,
    # its server shuts down the ordinary way, and nothing but its own note is printed
    proc = subprocess.Popen([sys.executable, "-m", "streamwire.cli", "demo", "--delay", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_at_a_terminal)
    assert proc.stdout is not None
    try:
        assert "POST /runs started run" in "".join(proc.stdout.readline() for _ in range(2))
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert "[interrupted]" in out
    assert err == ""


def test_demo_piped_into_head_stops_quietly() -> None:
    # `streamwire demo | head -n 1`: the reader goes away, the demo stops following and shuts
    # its server down the ordinary way (no traceback from it either)
    demo = subprocess.Popen([sys.executable, "-m", "streamwire.cli", "demo"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert demo.stdout is not None
    assert demo.stderr is not None
    head = subprocess.Popen(["head", "-n", "1"], stdin=demo.stdout, stdout=subprocess.PIPE)
    demo.stdout.close()
    try:
        shown, _ = head.communicate(timeout=30)
        err = demo.stderr.read().decode()
        assert demo.wait(30) == 1
    finally:
        for proc in (demo, head):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        demo.stderr.close()
    assert shown.decode().startswith("  [embedded server on 127.0.0.1:")
    assert err == ""


def test_demo_reports_bad_arguments() -> None:
    done = subprocess.run([sys.executable, "-m", "streamwire.cli", "demo", "--delay", "soon"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--delay" in done.stderr


# -- streamwire tail ---------------------------------------------------------------------------------


def _tail(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamwire.cli", "tail", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def live() -> Iterator[tuple[str, Any]]:
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    with ServerThread(create_app(MemoryLog(), allow_anonymous_writes=True)) as server:
        yield server.url, server


def _write(url: str, sid: str, n: int, end: dict[str, Any] | None) -> None:
    assert httpx.put(f"{url}/streams/{sid}").status_code < 300
    for start in range(0, n, 100):
        chunks = [{"step": 1, "chunk": {"n": i}} for i in range(start, min(n, start + 100))]
        assert httpx.post(f"{url}/streams/{sid}/chunks", json=chunks).status_code == 200
    if end is not None:
        kind = "end" if "status" in end else "fail"
        assert httpx.post(f"{url}/streams/{sid}/{kind}", json=end).status_code < 300


def test_tail_prints_a_wire_v2_stream_as_json_lines(live: tuple[str, Any]) -> None:
    url, _ = live
    _write(url, "t1", 5, {"status": "completed"})
    done = _tail(f"{url}/streams/t1/sse", "--json", "--cursor", "2")
    assert done.returncode == 0, done.stderr
    lines = _json_lines(done.stdout)
    assert lines == [
        {"kind": "chunk", "sequence": 3, "chunk": {"n": 2}},
        {"kind": "chunk", "sequence": 4, "chunk": {"n": 3}},
        {"kind": "chunk", "sequence": 5, "chunk": {"n": 4}},
        {"kind": "caught-up", "head": 5},
        {"kind": "end", "status": "completed"},
    ]


def test_tail_human_output_and_a_final_fail(live: tuple[str, Any]) -> None:
    url, _ = live
    _write(url, "t2", 2, {"error": "tool crashed", "recoverable": False,
                          "errorDetail": {"code": "TOOL"}})
    done = _tail(f"{url}/streams/t2/sse")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        'chunk #1 {"n":0}', 'chunk #2 {"n":1}', "caught-up head=2",
        'fail error="tool crashed" recoverable=false errorDetail={"code": "TOOL"}',
    ]


@pytest.mark.anyio
async def test_tail_reattaches_after_a_cut_and_prints_each_chunk_once(
        live: tuple[str, Any]) -> None:
    url, server = live
    _write(url, "t3", 300, {"status": "completed"})
    config = ChaosConfig(min_budget=3000, max_budget=3000, max_cuts=1)
    async with ChaosProxy(server.port, seed=7, config=config) as proxy:
        done = await anyio.run_process(
            [sys.executable, "-m", "streamwire.cli", "tail", "--json",
             f"http://127.0.0.1:{proxy.port}/streams/t3/sse"], check=False)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    assert proxy.cuts == 1
    assert "re-attaching from Last-Event-ID" in stderr
    assert "re-attached" in stderr
    sequences = [e["sequence"] for e in _json_lines(stdout) if e["kind"] == "chunk"]
    assert sequences == list(range(1, 301))


def test_tail_plain_sse_without_reconnect() -> None:
    from helpers.scripted import Reply, Scripted

    body = b"retry: 100\nevent: greeting\nid: a1\ndata: hello\n\ndata: {\"x\": 1}\n\n"
    with Scripted([Reply(body)]) as srv:
        done = _tail(srv.url, "--json", "--no-reconnect")
    assert done.returncode == 1
    assert _json_lines(done.stdout) == [
        {"kind": "event", "event": "greeting", "id": "a1", "data": "hello"},
        {"kind": "event", "event": "message", "id": "a1", "data": {"x": 1}},
    ]
    assert "not re-attaching (--no-reconnect)" in done.stderr


def test_tail_gives_up_after_max_attempts() -> None:
    from helpers.scripted import Reply, Scripted

    with Scripted([Reply(b"nope", status=503, content_type="text/plain")]) as srv:
        done = _tail(srv.url, "--max-attempts", "1")
    assert done.returncode == 1
    assert "HTTP 503" in done.stderr
    assert "gave up re-attaching" in done.stderr


def test_tail_retries_exactly_the_statuses_the_client_retries() -> None:
    from helpers.scripted import Reply, Scripted
    from streamwire.client._core import RETRY_STATUSES

    assert 425 in RETRY_STATUSES  # tail once had its own list, without it
    body = b'event: chunk\nid: 1\ndata: {"sequence":1,"chunk":1}\n\nevent: end\ndata: {"status":"completed"}\n\n'
    with Scripted([Reply(b"too early", status=425, content_type="text/plain"), Reply(body)]) as srv:
        done = _tail(srv.url, "--json")
    assert done.returncode == 0, done.stderr
    assert "HTTP 425" in done.stderr
    assert [e["kind"] for e in _json_lines(done.stdout)] == ["chunk", "end"]
