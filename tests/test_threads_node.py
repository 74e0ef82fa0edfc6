"""Threads through the real AI SDK client: ``tests/node/threads.test.mjs`` (node's own test runner,
the pinned ``ai`` package's ``AbstractChat`` and ``DefaultChatTransport``) against ``streamwire
serve --agent demo`` on memory, SQLite and Redis: the server's ``GET /api/chat/{id}/messages``
equals the SDK's own messages after a tool reply and a text reply, regenerate replaces the reply,
and a Chat started from the stored messages goes on with them. ``multitask.test.mjs``: a message
while a reply runs, under each ``--chat-multitask`` policy; ``users.test.mjs``: two JWT users
(``--jwt-secret``), each thread its creator's alone on every route."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from conftest import REDIS_URL, purge_redis_keys, require, require_redis
from helpers.demo_server import TOKEN
from helpers.runs_server import SRC, TESTS, free_port, serve_cli
from streamwire.aisdk._threads import UIMessageAssembler
from streamwire.server._chat import MULTITASK
from streamwire.sse import SSEDecoder
from test_aisdk_tools_node import approval_requested, denied, failed_mid_tool, two_steps

ROOT = Path(__file__).resolve().parent.parent
LOGS = ["memory", "sqlite", "redis"]
JWT_SECRET = "node-users-" + "s" * 32


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
    anyio.run(_write_folds, tmp_path)
    run_node("tests/node/threads.test.mjs", {"STREAMWIRE_THREADS_FOLDS": str(tmp_path)}, passed=1)


@contextlib.contextmanager
def demo_serving(log: str, tmp_path: Path, *flags: str, name: str = "demo") -> Iterator[str]:
    """``streamwire serve --agent demo FLAGS`` on a ``log`` of its own (``memory``, ``sqlite``:
    ``tmp_path/<name>.db``, ``redis``: a fresh key prefix, purged after): its base URL. What it
    says on stderr goes to ``tmp_path/<name>.log``."""
    if log == "redis":
        require_redis()
    prefix = f"sw-node-{name}-{uuid.uuid4().hex[:8]}"
    spec = {"memory": ["--log", "memory"], "sqlite": ["--log", f"sqlite:{tmp_path / name}.db"],
            "redis": ["--log", REDIS_URL, "--redis-prefix", prefix]}[log]
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}"}
    for key in ("STREAMWIRE_TOKEN", "STREAMWIRE_JWT_SECRET"):  # the flags say who may write
        env.pop(key, None)
    port = free_port()
    try:
        with (tmp_path / f"{name}.log").open("wb") as stderr, serve_cli(
                "--agent", "demo", "--log-level", "warning", *spec, *flags, port=port, env=env,
                stderr=stderr):
            yield f"http://127.0.0.1:{port}"
    finally:
        if log == "redis":
            purge_redis_keys(prefix)


def run_node(script: str, env: dict[str, str], *, passed: int, timeout: float = 180,
             logs: Path | None = None) -> None:
    """``node --test script`` with ``env`` added: every one of its ``passed`` tests passes (its
    report, with each test's time, is printed; a failure's adds the servers' ``logs/*.log``)."""
    node = _node()
    started = time.monotonic()
    done = subprocess.run([node, "--test", "--test-reporter=spec", script], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)
    report = done.stdout + done.stderr
    print(f"{script}: {time.monotonic() - started:.1f} s\n{report}")
    if done.returncode and logs is not None:
        report += "".join(f"\n{log.name}:\n{log.read_text()}" for log in logs.glob("*.log"))
    assert done.returncode == 0, report
    assert f"pass {passed}" in report, report
    assert "fail 0" in report, report


@pytest.mark.parametrize("log", LOGS)
def test_the_ai_sdk_and_the_server_hold_the_same_thread(log: str, tmp_path: Path) -> None:
    with demo_serving(log, tmp_path, "--token", TOKEN) as url:
        run_node("tests/node/threads.test.mjs",
                 {"STREAMWIRE_THREADS_URL": url, "STREAMWIRE_TOKEN": TOKEN}, passed=3,
                 logs=tmp_path)


@pytest.mark.parametrize("log", LOGS)
def test_a_message_while_a_reply_runs_follows_the_chat_multitask_policy(log: str,
                                                                        tmp_path: Path) -> None:
    """``tests/node/multitask.test.mjs``: reject (the SDK gets the 409), interrupt (the first
    reply ends stopped), enqueue (the second reply after the first), one server each, at once."""
    with contextlib.ExitStack() as servers:
        urls = {policy: servers.enter_context(demo_serving(
                    log, tmp_path, "--token", TOKEN, "--chat-multitask", policy, name=policy))
                for policy in MULTITASK}
        run_node("tests/node/multitask.test.mjs",
                 {"STREAMWIRE_MULTITASK": json.dumps(urls), "STREAMWIRE_TOKEN": TOKEN}, passed=3,
                 logs=tmp_path)


def _token(sub: str) -> str:
    """A JWT for user ``sub``, minted by ``streamwire token`` as a user of the server would."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-m", "streamwire.cli", "token", "--sub", sub,
                           "--secret", JWT_SECRET], env=env, capture_output=True, text=True,
                          timeout=30, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize("log", LOGS)
def test_a_users_thread_is_theirs_alone_through_the_ai_sdk(log: str, tmp_path: Path) -> None:
    """``tests/node/users.test.mjs`` against ``serve --jwt-secret``: user B (and an anonymous
    caller) gets what a missing chat answers on every route of user A's thread."""
    with demo_serving(log, tmp_path, "--jwt-secret", JWT_SECRET) as url:
        run_node("tests/node/users.test.mjs",
                 {"STREAMWIRE_USERS_URL": url, "STREAMWIRE_TOKEN_A": _token("alice"),
                  "STREAMWIRE_TOKEN_B": _token("bob")}, passed=2, logs=tmp_path)
