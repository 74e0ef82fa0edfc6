"""``streamwire tail`` (and the CLI around it) as a user meets it: the real command in a subprocess
against a real server on 127.0.0.1 (uvicorn with a memory log, or the scripted server for exact
misbehaviour), real signals, a real pseudo-terminal for the progress line."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helpers.chaos_proxy import ServerThread
from helpers.processes import sigint_as_at_a_terminal
from helpers.scripted import Reply, Scripted

CLI = [sys.executable, "-m", "streamwire.cli"]
TOKEN = "s3cret-token"


def run(*args: str, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "STREAMWIRE_TOKEN"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, env={**environ, **(env or {})})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


@pytest.fixture
def live() -> Iterator[str]:
    from streamwire.log.memory import MemoryLog
    from streamwire.server import create_app

    with ServerThread(create_app(MemoryLog(), allow_anonymous_writes=True)) as server:
        yield server.url


@pytest.fixture
def protected() -> Iterator[str]:
    from streamwire.log.memory import MemoryLog
    from streamwire.server import bearer_token, create_app

    app = create_app(MemoryLog(), authorize=bearer_token(TOKEN, protect_reads=True))
    with ServerThread(app) as server:
        yield server.url


def write(url: str, sid: str, n: int, *, end: bool = True,
          headers: dict[str, str] | None = None) -> None:
    assert httpx.put(f"{url}/streams/{sid}", headers=headers).status_code < 300
    with httpx.Client(headers=headers, timeout=30) as client:
        for start in range(0, n, 1000):
            chunks = [{"step": 1, "chunk": i} for i in range(start, min(n, start + 1000))]
            assert client.post(f"{url}/streams/{sid}/chunks", json=chunks).status_code == 200
        if end:
            assert client.post(f"{url}/streams/{sid}/end",
                               json={"status": "completed"}).status_code < 300


def sse(event: str, data: Any, id: str | None = None) -> bytes:
    head = f"event: {event}\n" + (f"id: {id}\n" if id else "")
    return f"{head}data: {json.dumps(data)}\n\n".encode()


# -- arguments ---------------------------------------------------------------------------------------


def test_a_url_without_a_scheme_is_refused_at_once() -> None:
    start = time.monotonic()
    done = run("tail", "127.0.0.1:8000/streams/x/sse")
    assert done.returncode == 2
    assert "must start with http:// or https://" in done.stderr
    assert "did you mean http://127.0.0.1:8000/streams/x/sse?" in done.stderr
    assert time.monotonic() - start < 10  # no retrying for ever


def test_version_and_help_texts_without_source_markup() -> None:
    from streamwire import __version__

    done = run("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"streamwire {__version__}")
    for args in (["--help"], ["serve", "--help"], ["tail", "--help"], ["demo", "--help"]):
        shown = run(*args)
        assert shown.returncode == 0, shown.stderr
        assert "``" not in shown.stdout, args
    assert "--token" in run("tail", "--help").stdout


# -- what the server answers -------------------------------------------------------------------------


def test_an_html_page_is_not_an_event_stream() -> None:
    page = b"<!doctype html><html><head><title>Welcome</title></head>" + b"<p>x</p>" * 500
    with Scripted([Reply(page, content_type="text/html; charset=utf-8")]) as srv:
        done = run("tail", srv.url)
    assert done.returncode == 1
    assert "this is not an event stream" in done.stderr
    assert "text/html" in done.stderr
    assert "<!doctype html><html><head><title>Welcome" in done.stderr
    assert len(srv.requests) == 1  # not retried
    assert "Traceback" not in done.stderr


def test_a_closed_port_is_retried_then_reported_with_the_options_to_raise() -> None:
    done = run("tail", f"http://127.0.0.1:{closed_port()}/streams/x/sse", "--max-attempts", "2")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any("cannot connect to 127.0.0.1" in line and "attempt 1 of 2" in line
               for line in lines), done.stderr
    assert any("attempt 2 of 2" in line for line in lines), done.stderr
    assert "gave up re-attaching" in done.stderr
    assert "--max-attempts=2" in done.stderr
    assert "RetryPolicy" not in done.stderr


def test_max_elapsed_gives_up_after_the_seconds_given() -> None:
    done = run("tail", f"http://127.0.0.1:{closed_port()}/streams/x/sse", "--max-attempts", "0",
               "--max-elapsed", "2")
    assert done.returncode == 1
    assert "--max-elapsed=2s" in done.stderr


def test_a_recoverable_fail_backs_off_and_says_why_it_keeps_failing() -> None:
    # Each connection catches up, then fails (recoverable): the delay must grow, not start over.
    # Each failure is a new one (its writer differs, but the last): the same one again would be
    # stored and settle at once (tests/test_client_settle.py).
    def body(n: int) -> bytes:
        detail = {"code": "WRITER_GONE"} if n == 4 else {"code": "WRITER_GONE", "writer": n}
        return b"retry: 100\n\n" + sse("caught-up", {"head": 0}) + sse(
            "fail", {"error": "writer gone", "recoverable": True, "errorDetail": detail})
    with Scripted([Reply(body(n)) for n in range(5)]) as srv:
        done = run("tail", srv.url, "--max-attempts", "4", timeout=30)
    assert done.returncode == 1, done.stderr
    gaps = [b - a for a, b in zip(srv.times, srv.times[1:], strict=False)]
    assert len(gaps) == 4
    assert gaps[3] >= 0.8 > gaps[0]  # 0.1 s doubling: 0.1, 0.2, 0.4, 0.8 (+ jitter)
    assert "the stream failed (recoverable): writer gone {'code': 'WRITER_GONE'}" in done.stderr
    assert "failed 4 times in a row without a new chunk" in done.stderr
    assert "gave up re-attaching" in done.stderr


# -- authorization -----------------------------------------------------------------------------------


def test_token_from_the_option_or_the_environment_is_sent_as_a_bearer(protected: str) -> None:
    write(protected, "p", 2, headers={"Authorization": f"Bearer {TOKEN}"})
    url = f"{protected}/streams/p/sse"
    refused = run("tail", url, "--max-attempts", "1")
    assert refused.returncode == 1
    assert "HTTP 401" in refused.stderr
    for done in (run("tail", url, "--json", "--token", TOKEN),
                 run("tail", url, "--json", env={"STREAMWIRE_TOKEN": TOKEN})):
        assert done.returncode == 0, done.stderr
        assert [json.loads(line)["kind"] for line in done.stdout.splitlines()] == [
            "chunk", "chunk", "caught-up", "end"]
    bad = run("tail", url, "--token", "jeton-\u00e9t\u00e9")
    assert bad.returncode == 2
    assert "printable ASCII" in bad.stderr


# -- Ctrl-C --------------------------------------------------------------------------------------------


def interrupted(argv: list[str], ready: str, *, on: str = "stdout") -> subprocess.CompletedProcess[str]:
    """Start ``argv``, wait for ``ready`` on ``on``, send a real SIGINT, collect the rest."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_at_a_terminal)
    stream = proc.stdout if on == "stdout" else proc.stderr
    assert stream is not None
    seen = ""
    deadline = time.monotonic() + 30
    while ready not in seen:
        assert time.monotonic() < deadline, seen
        seen += stream.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=15)
    if on == "stdout":
        out = seen + out
    else:
        err = seen + err
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_ctrl_c_exits_quietly_with_130(live: str) -> None:
    write(live, "open", 1, end=False)  # stays open: tail waits for more
    reading = interrupted([*CLI, "tail", f"{live}/streams/open/sse"], "caught-up")
    assert reading.returncode == 130
    assert "Traceback" not in reading.stderr
    assert "KeyboardInterrupt" not in reading.stderr
    # asleep between two attempts
    waiting = interrupted([*CLI, "tail", f"http://127.0.0.1:{closed_port()}/x/sse"],
                          "re-attaching", on="stderr")
    assert waiting.returncode == 130
    assert "Traceback" not in waiting.stderr
    serving = interrupted([*CLI, "serve", "--port", "0", "--token", TOKEN], "running on",
                          on="stderr")
    assert serving.returncode == 130, serving.stderr
    assert "Traceback" not in serving.stderr


# -- a reader that goes away ----------------------------------------------------------------------------


def test_piped_into_head_it_ends_quietly_when_head_has_enough(live: str) -> None:
    # `streamwire tail URL | head -n 2`, a real pipe: once head exits, the next write hits a
    # closed pipe, and tail ends at once without a traceback (as the Python docs recommend)
    write(live, "many", 5_000)
    tail = subprocess.Popen([*CLI, "tail", f"{live}/streams/many/sse"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert tail.stdout is not None
    assert tail.stderr is not None
    head = subprocess.Popen(["head", "-n", "2"], stdin=tail.stdout, stdout=subprocess.PIPE)
    tail.stdout.close()  # head holds the read end alone: its exit closes the pipe
    try:
        shown, _ = head.communicate(timeout=30)
        err = tail.stderr.read().decode()
        assert tail.wait(30) == 1
    finally:
        for proc in (tail, head):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        tail.stderr.close()
    assert shown.decode().splitlines() == ["chunk #1 0", "chunk #2 1"]
    assert err == ""


# -- progress on a long replay -------------------------------------------------------------------------


def test_long_replay_shows_progress_on_a_terminal_and_plain_lines_when_piped(live: str) -> None:
    write(live, "long", 100_000)  # a replay long enough to take over 0.25 s
    url = f"{live}/streams/long/sse"
    # stderr is a terminal: one progress line, redrawn in place
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([*CLI, "tail", "--json", url], stdout=subprocess.DEVNULL,
                                stderr=slave)
        os.close(slave)
        seen = bytearray()
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, bytes(seen)
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            seen += data
        assert proc.wait(30) == 0
    finally:
        os.close(master)
    shown = seen.decode()
    assert "\r\x1b[Kstreamwire tail: replaying: " in shown, shown
    assert " / 100,000 chunks (" in shown
    assert "replayed 100,000 chunks; live from head 100,000" in shown
    # stderr is a pipe: no terminal codes, whole lines only
    piped = run("tail", "--json", url)
    assert piped.returncode == 0
    assert "\r" not in piped.stderr
    assert "\x1b" not in piped.stderr
    assert "streamwire tail: replaying: " in piped.stderr
    assert "replayed 100,000 chunks; live from head 100,000" in piped.stderr
    assert len(piped.stdout.splitlines()) == 100_002
