"""Every code block of the README runs as written, by the rule of tests/helpers/snippets.py (the
docs' blocks follow the same rule: tests/test_docs.py). The README is the front door: it keeps the
two commands, one durable stream and one agent on useChat, and links into the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.snippets import (
    ROOT,
    Block,
    blocks,
    check_command,
    problems,
    run_client,
    run_plain,
    shell_commands,
)

README = ROOT / "README.md"
#: The runnable blocks: plain ones and clients (a server block runs under its clients).
RUNNABLE = [b for b in blocks(README) if b.kind != "server"]
#: The front door stays short; the rest lives in docs/.
MAX_LINES = 250


def test_every_block_follows_the_rule() -> None:
    assert problems(README) == []
    assert len([b for b in RUNNABLE if b.kind == "client"]) >= 2
    for command in shell_commands([README]):
        check_command(command)


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert text.count("\n") <= MAX_LINES, f"README.md is over {MAX_LINES} lines: move it to docs/"
    assert "./dev demo" in text
    assert "./dev test" in text
    links = re.findall(r"\]\(((?:docs|examples)/[^)#]+|[A-Z]+\.md)", text)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        assert (ROOT / link).is_file(), f"README.md links to {link}, which does not exist"


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_readme_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    if block.kind == "client":
        run_client(block, tmp_path, monkeypatch)
    else:
        run_plain(block, tmp_path, monkeypatch)
        capsys.readouterr()
