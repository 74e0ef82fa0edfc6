"""Interop with the real AI SDK: ``tests/node/chat.test.mjs`` (node's own test runner) drives the
``ai`` package's client code (``DefaultChatTransport``, ``readUIMessageStream``, ``AbstractChat``)
against ``streamwire serve --agent demo`` on 127.0.0.1: a full reply, D-4's ``/fail`` ending, a cut
reply reconnected through ``reconnectToStream`` and ``resumeStream``, and a stop mid-reply; and
(``tests/node/drop_scenario.mjs``) D-4's no-terminal case: the server killed mid-reply, the SDK's
stream fails instead of finishing, and after a restart the reply ends with its error.

``ai`` is pinned in ``package-lock.json`` (v6: this machine's Node is 20) and installed by
``.ci/run`` with ``npm ci``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require
from helpers.demo_server import TOKEN, DemoServer
from streamwire.runs.demo_agent import demo_reply

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ("hello interop", "please /fail", "cut me off", "stop me")


@pytest.fixture
def demo_server() -> Iterator[str]:
    server = DemoServer()
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _node() -> str:
    node = shutil.which("node")
    require(node is not None, "Node.js is not installed")
    require((ROOT / "node_modules" / "ai" / "package.json").exists(),
            "the ai package is not installed: run `npm ci` (.ci/run does)")
    assert node is not None
    return node


def test_the_ai_sdk_client_reads_replies_resumes_them_and_stops_them(demo_server: str) -> None:
    node = _node()
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


def test_d4_no_terminal_through_the_ai_sdk_then_the_reply_ends_with_its_error(
        tmp_path: Path) -> None:
    """SIGKILL of the server mid-reply: the AI SDK's stream fails (no finish chunk, never a clean
    end). The server comes back on the same SQLite file; the SDK's reconnectToStream gets the
    reply again, now ended by D-4's error and finish{error} (its writer died with the server)."""
    node = _node()
    server = DemoServer("--log", f"sqlite:{tmp_path / 'chat.db'}", "--run-lease", "120")
    server.start()
    env = {**os.environ, "STREAMWIRE_URL": server.url, "STREAMWIRE_TOKEN": TOKEN}
    problems = ""
    try:
        with subprocess.Popen([node, "tests/node/drop_scenario.mjs"], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as script:
            assert script.stdin is not None
            assert script.stdout is not None
            try:
                assert script.stdout.readline().strip() == "CUT"
                server.kill()
                first = json.loads(script.stdout.readline() or "{}")
                server.start()
                script.stdin.write("GO\n")
                script.stdin.flush()
                second = json.loads(script.stdout.readline() or "{}")
                assert script.wait(60) == 0
            finally:
                if script.poll() is None:
                    script.kill()
                problems = script.stderr.read() if script.stderr else ""
    finally:
        server.stop()
    assert first["phase"] == 1, problems
    assert "terminated" in first["failure"] or "fetch" in first["failure"], first
    assert second["ending"][-2]["type"] == "error"
    assert second["ending"][-1] == {"type": "finish", "finishReason": "error"}
    words = demo_reply("the server dies")
    assert second["text"], "the text written before the crash is replayed"
    assert "".join(words).startswith(second["text"])
    assert len(second["text"]) < len("".join(words))
    assert second["errors"] == [f"Error: {second['ending'][-2]['errorText']}"]
