"""Every Python block of the README runs as written.

Each ```python block is preceded by a marker that says how it runs:

* ``<!-- readme-test -->``: executed in this process as it stands (it checks itself with ``assert``).
* ``<!-- readme-test: server -->``: a module defining an ASGI ``app``; it is imported as written
  (in a temporary directory, with ``$STREAMWIRE_TOKEN`` set) and served by real uvicorn on
  127.0.0.1 (a free port). The ``client`` blocks after it run against it.
* ``<!-- readme-test: client; prints: WORDS -->``: a complete script, run in a subprocess with
  ``$STREAMWIRE_URL`` pointing at the server block before it; it must exit 0 and print ``WORDS``
  (whitespace-insensitive).

A block that another test runs says so: ``<!-- NAME: run by tests/FILE.py ... -->`` (that file must
exist and look the block up by ``NAME``). A Python block without a marker fails
``test_every_python_block_is_tested``: add one. The ``streamwire``
shell commands that are cheap to run (``--help`` of each one named) are checked too.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.chaos_proxy import ServerThread

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEXT = README.read_text()

_MARKED = re.compile(r"<!-- readme-test(?:: (server|client)(?:; prints: (.*?))?)? -->\n"
                     r"```python\n(.*?)```", re.S)
_ANY_PYTHON = re.compile(r"^```python\n", re.M)
_RUN_ELSEWHERE = re.compile(r"<!-- ([\w-]+): run by (tests/[\w/]+\.py)[^>]*-->\n```python\n", re.S)


@dataclass(frozen=True)
class Block:
    kind: str  # "", "server" or "client"
    source: str
    prints: str
    line: int
    server: Block | None = None  # a client's server


def _blocks() -> list[Block]:
    found: list[Block] = []
    server: Block | None = None
    for m in _MARKED.finditer(TEXT):
        block = Block(m.group(1) or "", m.group(3), m.group(2) or "",
                      TEXT.count("\n", 0, m.start(3)) + 1, server)
        if block.kind == "server":
            server = block
        found.append(block)
    return found


BLOCKS = _blocks()
PLAIN = [b for b in BLOCKS if b.kind == ""]
CLIENTS = [b for b in BLOCKS if b.kind == "client"]


def test_every_python_block_is_tested() -> None:
    elsewhere = _RUN_ELSEWHERE.findall(TEXT)
    for name, test_file in elsewhere:
        runner = ROOT / test_file
        assert runner.is_file(), f"README says {test_file} runs its {name!r} block; it is missing"
        assert name in runner.read_text(), f"{test_file} does not look up the {name!r} block"
    unmarked = len(_ANY_PYTHON.findall(TEXT)) - len(BLOCKS) - len(elsewhere)
    assert unmarked == 0, (
        f"{unmarked} ```python block(s) of README.md have no <!-- readme-test ... --> marker on "
        "the line before: mark each one (see tests/test_readme.py) so that it runs in the tests")
    assert len(PLAIN) >= 2
    assert len(CLIENTS) >= 2
    assert all(b.server is not None for b in CLIENTS), "a client block needs a server block above"


@pytest.mark.parametrize("block", PLAIN, ids=[f"line{b.line}" for b in PLAIN])
def test_readme_example_runs(block: Block, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block.source, f"{README}:{block.line}", "exec"), {"__name__": "readme_example"})
    capsys.readouterr()


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    value = secrets.token_urlsafe(16)
    monkeypatch.setenv("STREAMWIRE_TOKEN", value)
    return value


def serve(block: Block) -> ServerThread:
    """A server block, imported as written, to serve with real uvicorn on 127.0.0.1."""
    namespace: dict[str, Any] = {"__name__": "readme_server"}
    exec(compile(block.source, f"{README}:{block.line}", "exec"), namespace)
    return ServerThread(namespace["app"])


@pytest.mark.parametrize("block", CLIENTS, ids=[f"line{b.line}" for b in CLIENTS])
def test_readme_client_runs_against_its_server(block: Block, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    token = secrets.token_urlsafe(16)
    monkeypatch.setenv("STREAMWIRE_TOKEN", token)
    monkeypatch.chdir(tmp_path)  # a block's files (streams.db) land in the test's directory
    script = tmp_path / "client.py"
    script.write_text(block.source)
    assert block.server is not None
    with serve(block.server) as server:
        done = _run([sys.executable, str(script)], server.url, token, tmp_path)
    assert done.returncode == 0, done.stderr
    assert block.prints.split() == done.stdout.split(), done.stdout


def _run(cmd: list[str], url: str, token: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMWIRE_URL": url, "STREAMWIRE_TOKEN": token,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


SHELL_COMMANDS = sorted({line.split()[1] for line in re.findall(
    r"^streamwire \w+.*$", "\n".join(re.findall(r"```sh\n(.*?)```", TEXT, re.S)), re.M)})


@pytest.mark.parametrize("command", SHELL_COMMANDS)
def test_readme_streamwire_commands_exist(command: str) -> None:
    done = subprocess.run([sys.executable, "-m", "streamwire.cli", command, "--help"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert f"streamwire {command}" in done.stdout, shlex.join([command, "--help"])
