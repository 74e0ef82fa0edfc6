"""Approvals through the real AI SDK client: ``tests/node/approvals.test.mjs`` (node's own test
runner, the pinned ``ai`` package's ``AbstractChat`` with ``addToolApprovalResponse`` and
``lastAssistantMessageIsCompleteWithApprovalResponses``) against ``streamwire serve --agent demo``
on memory, SQLite and Redis: ``/approve`` pauses with the request, approved and denied answers
resume the same run in the same message, a reload answers from the stored thread, and a repeated
answer resumes nothing twice."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import REDIS_URL, purge_redis_keys, require_redis
from helpers.demo_server import TOKEN, DemoServer
from test_threads_node import ROOT, _node


@pytest.mark.parametrize("log", ["memory", "sqlite", "redis"])
def test_approvals_through_the_ai_sdk(log: str, tmp_path: Path) -> None:
    node = _node()
    prefix = f"sw-approvals-node-{uuid.uuid4().hex[:8]}"
    spec = {"memory": ["--log", "memory"], "sqlite": ["--log", f"sqlite:{tmp_path / 'a.db'}"],
            "redis": ["--log", REDIS_URL, "--redis-prefix", prefix]}[log]
    if log == "redis":
        require_redis()
    server = DemoServer(*spec)
    server.start()
    try:
        env = {**os.environ, "STREAMWIRE_APPROVALS_URL": server.url, "STREAMWIRE_TOKEN": TOKEN}
        done = subprocess.run([node, "--test", "--test-reporter=spec",
                               "tests/node/approvals.test.mjs"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=180)
    finally:
        server.stop()
        if log == "redis":
            purge_redis_keys(prefix)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "pass 3" in report, report
    assert "fail 0" in report, report
