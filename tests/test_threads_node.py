"""Threads through the real AI SDK client: ``tests/node/threads.test.mjs`` (node's own test runner,
the pinned ``ai`` package's ``AbstractChat`` and ``DefaultChatTransport``) against ``streamwire
serve --agent demo`` on memory, SQLite and Redis: the server's ``GET /api/chat/{id}/messages``
equals the SDK's own messages after a tool reply and a text reply, regenerate replaces the reply,
and a Chat started from the stored messages goes on with them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import anyio
import pytest

from conftest import REDIS_URL, purge_redis_keys, require, require_redis
from helpers.demo_server import TOKEN, DemoServer
from streamwire.aisdk._threads import UIMessageAssembler
from streamwire.sse import SSEDecoder
from test_aisdk_tools_node import approval_requested, denied, failed_mid_tool, two_steps

ROOT = Path(__file__).resolve().parent.parent


def _node() -> str:
    node = shutil.which("node")
    require(node is not None, "Node.js is not installed")
    require((ROOT / "node_modules" / "ai" / "package.json").exists(),
            "the ai package is not installed: run `npm ci` (.ci/run does)")
    assert node is not None
    return node


async def _write_folds(folder: Path) -> None:
    for name, make in [("two-steps", two_steps), ("approval", approval_requested),
                       ("denied", denied), ("failed", failed_mid_tool)]:
        body = await make()
        decoder = SSEDecoder()
        assembler = UIMessageAssembler()
        assembler.feed_all([json.loads(e.data) for e in decoder.feed(body) + decoder.flush()
                            if e.data != "[DONE]"])
        (folder / f"{name}.sse").write_bytes(body)
        (folder / f"{name}.json").write_text(json.dumps(assembler.message))


def test_the_servers_fold_of_tool_replies_equals_the_sdks(tmp_path: Path) -> None:
    """Approval requested, denied, a failure while the input streams: the stored message is the
    one readUIMessageStream ends with."""
    node = _node()
    anyio.run(_write_folds, tmp_path)
    env = {**os.environ, "STREAMWIRE_THREADS_FOLDS": str(tmp_path)}
    done = subprocess.run([node, "--test", "--test-reporter=spec",
                           "tests/node/threads.test.mjs"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "pass 1" in report, report
    assert "fail 0" in report, report


@pytest.mark.parametrize("log", ["memory", "sqlite", "redis"])
def test_the_ai_sdk_and_the_server_hold_the_same_thread(log: str, tmp_path: Path) -> None:
    node = _node()
    prefix = f"sw-threads-node-{uuid.uuid4().hex[:8]}"
    spec = {"memory": ["--log", "memory"], "sqlite": ["--log", f"sqlite:{tmp_path / 't.db'}"],
            "redis": ["--log", REDIS_URL, "--redis-prefix", prefix]}[log]
    if log == "redis":
        require_redis()
    server = DemoServer(*spec)
    server.start()
    try:
        env = {**os.environ, "STREAMWIRE_THREADS_URL": server.url, "STREAMWIRE_TOKEN": TOKEN}
        done = subprocess.run([node, "--test", "--test-reporter=spec",
                               "tests/node/threads.test.mjs"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180)
    finally:
        server.stop()
        if log == "redis":
            purge_redis_keys(prefix)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "pass 3" in report, report
    assert "fail 0" in report, report
