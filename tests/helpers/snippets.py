"""The one rule for the code blocks of the README and of docs/**/*.md: every block runs or is
checked by the tests.

Each ```python block is preceded by a marker that says how it runs:

* ``<!-- test -->``: executed in the test's process as it stands (it checks itself with
  ``assert``).
* ``<!-- test: server -->``: a module defining an ASGI ``app``; it is imported as written (in a
  temporary directory, with a fresh ``$STREAMWIRE_TOKEN``, or ``$STREAMWIRE_JWT_SECRET`` when the
  block or its client names that) and served by real uvicorn on 127.0.0.1 (a free port). The
  ``client`` blocks after it in the same file run against it.
* ``<!-- test: client; prints: WORDS -->``: a complete script, run in a subprocess with
  ``$STREAMWIRE_URL`` pointing at the server block before it (and the same secret); it must exit
  0 and print ``WORDS`` (whitespace-insensitive).
* ``<!-- NAME: run by tests/FILE.py ... -->``: another test runs it (that file must exist and look
  the block up by ``NAME``).

A block that builds an ``AsyncOpenAI`` or ``AsyncAnthropic`` client gets a placeholder API key (it
defines agents; nothing in it calls the provider). A block that uses ``RedisLog`` (or whose server
does) needs the tests' Redis: it skips without one
(fails in CI, as every Redis test does) and gets ``$STREAMWIRE_REDIS_URL`` and a fresh
``$STREAMWIRE_REDIS_PREFIX``, whose keys are deleted afterwards.

A Python block without a marker fails the tests. ``readme-test`` is accepted for ``test`` (the
README's older spelling). ```sh blocks: each ``streamwire COMMAND`` line names a command whose
``--help`` works. ```json blocks parse as JSON. Blocks in the other languages of ``LANGUAGES``
(browser code, proxy configuration) are shown, not run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import REDIS_URL, purge_redis_keys, require_redis
from helpers.chaos_proxy import ServerThread

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"

#: Every language a fenced block may have; python, sh and json are checked (above), the others
#: are shown only.
LANGUAGES = frozenset({"python", "sh", "json", "tsx", "nginx", "caddy", "text", "http"})

_MARKED = re.compile(r"<!-- (?:readme-)?test(?:: (server|client)(?:; prints: (.*?))?)? -->\n"
                     r"```python\n(.*?)```", re.S)
_FENCE = re.compile(r"^```(\S*)\n(.*?)^```", re.M | re.S)
_RUN_ELSEWHERE = re.compile(r"<!-- ([\w-]+): run by (tests/[\w/]+\.py)[^>]*-->\n```python\n", re.S)


@dataclass(frozen=True)
class Block:
    """One marked Python block: ``kind`` is "", "server" or "client"."""

    kind: str
    source: str
    prints: str
    path: Path
    line: int
    server: Block | None = None  # a client's server

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    """docs/**/*.md, in a stable order."""
    return sorted(DOCS.rglob("*.md"))


def blocks(path: Path) -> list[Block]:
    """The marked Python blocks of one Markdown file, each client tied to the server above it."""
    text = path.read_text()
    found: list[Block] = []
    server: Block | None = None
    for m in _MARKED.finditer(text):
        block = Block(m.group(1) or "", m.group(3), m.group(2) or "", path,
                      text.count("\n", 0, m.start(3)) + 1, server)
        if block.kind == "server":
            server = block
        found.append(block)
    return found


def problems(path: Path) -> list[str]:
    """What breaks the rule in one file: unmarked Python blocks, unknown languages, a missing
    runner, bad JSON, a client with no server."""
    text = path.read_text()
    name = path.relative_to(ROOT)
    found: list[str] = []
    for m in _FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group(1) not in LANGUAGES:
            found.append(f"{name}:{line}: a ```{m.group(1)} block; use one of {sorted(LANGUAGES)}")
        elif m.group(1) == "json":
            try:
                json.loads(m.group(2))
            except ValueError as exc:
                found.append(f"{name}:{line}: the json block does not parse: {exc}")
    elsewhere = _RUN_ELSEWHERE.findall(text)
    for block_name, test_file in elsewhere:
        runner = ROOT / test_file
        if not runner.is_file() or block_name not in runner.read_text():
            found.append(f"{name} says {test_file} runs its {block_name!r} block; it does not")
    marked = blocks(path)
    unmarked = text.count("```python\n") - len(marked) - len(elsewhere)
    if unmarked:
        found.append(f"{name}: {unmarked} ```python block(s) have no <!-- test ... --> marker on "
                     "the line before: mark each one (see tests/helpers/snippets.py)")
    found += [f"{b.id}: a client block needs a server block above it in the same file"
              for b in marked if b.kind == "client" and b.server is None]
    return found


def _uses(block: Block, word: str) -> bool:
    return any(word in b.source for b in (block, block.server) if b is not None)


@contextmanager
def block_env(block: Block, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The environment a block (and its server) runs in: a fresh ``$STREAMWIRE_TOKEN`` (or
    ``$STREAMWIRE_JWT_SECRET`` for a block that names it: ``serve`` takes one or the other), and
    for a Redis block the tests' Redis under a fresh prefix (purged afterwards)."""
    for key in ("STREAMWIRE_TOKEN", "STREAMWIRE_JWT_SECRET"):
        monkeypatch.delenv(key, raising=False)
    values = ({"STREAMWIRE_JWT_SECRET": secrets.token_urlsafe(32)}
              if _uses(block, "STREAMWIRE_JWT_SECRET")
              else {"STREAMWIRE_TOKEN": secrets.token_urlsafe(16)})
    redis = _uses(block, "RedisLog")
    if redis:
        require_redis()
        values["STREAMWIRE_REDIS_URL"] = REDIS_URL
        values["STREAMWIRE_REDIS_PREFIX"] = f"sw-docs-{secrets.token_hex(4)}:"
    # a provider block builds its SDK client (which wants a key) and defines agents: no call
    # reaches a provider, so a placeholder key does
    for sdk, key in (("AsyncOpenAI", "OPENAI_API_KEY"), ("AsyncAnthropic", "ANTHROPIC_API_KEY")):
        if _uses(block, sdk):
            values[key] = "sk-docs-placeholder"
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    try:
        yield values
    finally:
        if redis:
            purge_redis_keys(values["STREAMWIRE_REDIS_PREFIX"])


def run_plain(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Execute a plain block in this process, in the test's directory."""
    monkeypatch.chdir(tmp_path)
    with block_env(block, monkeypatch):
        exec(compile(block.source, str(block.path) + f":{block.line}", "exec"),
             {"__name__": "docs_example"})


def serve(block: Block) -> ServerThread:
    """A server block, imported as written, to serve with real uvicorn on 127.0.0.1."""
    namespace: dict[str, Any] = {"__name__": "docs_server"}
    exec(compile(block.source, f"{block.path}:{block.line}", "exec"), namespace)
    return ServerThread(namespace["app"])


def run_client(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve the client's server block, run the client in a subprocess against it, and check
    its exit status and output."""
    monkeypatch.chdir(tmp_path)  # a block's files (streams.db) land in the test's directory
    script = tmp_path / "client.py"
    script.write_text(block.source)
    assert block.server is not None
    with block_env(block, monkeypatch) as values, serve(block.server) as server:
        env = {**os.environ, **values, "STREAMWIRE_URL": server.url,
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                              os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert block.prints.split() == done.stdout.split(), done.stdout


def shell_commands(paths: Iterable[Path]) -> list[str]:
    """The ``streamwire`` subcommands the ```sh blocks of ``paths`` name."""
    text = "\n".join(m.group(2) for path in paths for m in _FENCE.finditer(path.read_text())
                     if m.group(1) == "sh")
    return sorted({line.split()[1] for line in re.findall(r"^streamwire \w+.*$", text, re.M)})


def check_command(command: str) -> None:
    """``streamwire COMMAND --help`` works and names the command."""
    done = subprocess.run([sys.executable, "-m", "streamwire.cli", command, "--help"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert f"streamwire {command}" in done.stdout, f"streamwire {command} --help"
