"""Every code block of docs/**/*.md runs as written or is checked, by the one rule of
tests/helpers/snippets.py (the README's blocks follow it too: tests/test_readme.py); the HTTP API
page is generated from the server's own OpenAPI document."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from helpers.snippets import (
    DOCS,
    ROOT,
    Block,
    blocks,
    check_command,
    doc_files,
    problems,
    run_client,
    run_plain,
    shell_commands,
)

FILES = doc_files()
BLOCKS = [b for path in FILES for b in blocks(path)]
PLAIN = [b for b in BLOCKS if b.kind == ""]
CLIENTS = [b for b in BLOCKS if b.kind == "client"]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(DOCS)) for p in FILES])
def test_every_block_follows_the_rule(path: Path) -> None:
    assert problems(path) == []


def test_the_docs_have_blocks_to_run() -> None:
    assert len(FILES) >= 20
    assert len(PLAIN) >= 3
    assert len(CLIENTS) >= 6


@pytest.mark.parametrize("block", PLAIN, ids=[b.id for b in PLAIN])
def test_docs_example_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    run_plain(block, tmp_path, monkeypatch)
    capsys.readouterr()


@pytest.mark.parametrize("block", CLIENTS, ids=[b.id for b in CLIENTS])
def test_docs_client_runs_against_its_server(block: Block, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run_client(block, tmp_path, monkeypatch)


@pytest.mark.parametrize("command", shell_commands(FILES))
def test_docs_streamwire_commands_exist(command: str) -> None:
    check_command(command)


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("openapi_hook", DOCS / "_hooks" / "openapi.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_http_page_renders_every_route_of_the_served_document() -> None:
    hook = _hook()
    document = hook.served_document()
    page = hook.render(document)
    for path, operations in document["paths"].items():
        for method in operations:
            if method != "parameters":
                assert f"`{method.upper()} {path}`" in page, (method, path)
    for name in document["components"]["schemas"]:
        assert f"`{name}`" in page
    assert hook.MARKER in (ROOT / "docs" / "reference" / "http.md").read_text()
