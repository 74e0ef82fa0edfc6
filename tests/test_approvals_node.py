"""Approvals through the real AI SDK client: ``tests/node/approvals.test.mjs`` (node's own test
runner, the pinned ``ai`` package's ``AbstractChat`` with ``addToolApprovalResponse`` and
``lastAssistantMessageIsCompleteWithApprovalResponses``) against ``streamwire serve --agent demo``
on memory, SQLite and Redis: ``/approve`` pauses with the request, approved and denied answers
resume the same run in the same message, a reload answers from the stored thread, a forged
approval is refused, and a repeated answer resumes nothing twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.demo_server import TOKEN
from test_threads_node import LOGS, demo_serving, run_node


@pytest.mark.parametrize("log", LOGS)
def test_approvals_through_the_ai_sdk(log: str, tmp_path: Path) -> None:
    with demo_serving(log, tmp_path, "--token", TOKEN) as url:
        run_node("tests/node/approvals.test.mjs",
                 {"STREAMWIRE_APPROVALS_URL": url, "STREAMWIRE_TOKEN": TOKEN}, passed=3,
                 logs=tmp_path)
