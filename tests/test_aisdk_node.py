"""Interop with the real AI SDK: ``tests/node/chat.test.mjs`` (node's own test runner) drives the
``ai`` package's client code (``DefaultChatTransport``, ``readUIMessageStream``, ``AbstractChat``)
against ``streamwire serve --agent demo`` on 127.0.0.1: a full reply, D-4's ``/fail`` ending, a cut
reply reconnected through ``reconnectToStream`` and ``resumeStream``, and a stop mid-reply.

``ai`` is pinned in ``package-lock.json`` (v6: this machine's Node is 20) and installed by
``.ci/run`` with ``npm ci``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import require
from streamwire.runs.demo_agent import demo_reply

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "node-interop-token"
PROMPTS = ("hello interop", "please /fail", "cut me off", "stop me")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def demo_server() -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamwire.cli", "serve", "--agent", "demo", "--port", str(port),
         "--token", TOKEN], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamwire serve exited: {proc.stderr.read().decode()!r}"
                                   if proc.stderr else "streamwire serve exited")
            try:
                httpx.get(f"{url}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stderr:
            proc.stderr.close()


def test_the_ai_sdk_client_reads_replies_resumes_them_and_stops_them(demo_server: str) -> None:
    node = shutil.which("node")
    require(node is not None, "Node.js is not installed")
    require((ROOT / "node_modules" / "ai" / "package.json").exists(),
            "the ai package is not installed: run `npm ci` (.ci/run does)")
    assert node is not None
    expected = {}
    for prompt in PROMPTS:
        words = demo_reply(prompt)
        expected[prompt] = {"full": "".join(words), "half": "".join(words[:len(words) // 2])}
    env = {**os.environ, "STREAMWIRE_URL": demo_server, "STREAMWIRE_TOKEN": TOKEN,
           "STREAMWIRE_EXPECTED": json.dumps(expected)}
    done = subprocess.run([node, "--test", "--test-reporter=spec", "tests/node/"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "pass 4" in report, report
    assert "fail 0" in report, report
