#!/usr/bin/env python3
"""Generate the sync client modules from the async ones, as httpcore does with unasync.

    python tools/unasync.py           write the sync modules
    python tools/unasync.py --check   write nothing; exit 1 naming each sync module that is not
                                      what its async module generates (``./dev test`` runs this)

The async client (``src/streamwire/client/_async.py`` and the others in ``PAIRS``) is the one
written by hand; each sync module is its text with the rewrites in ``SUBS`` applied, whole words
only, over code, comments and docstrings alike: ``async``/``await`` dropped, the async dunders and
``aname`` helpers renamed, ``AsyncX`` to ``X`` (``httpx.AsyncClient`` to ``httpx.Client``,
``AsyncResumableStream`` to ``ResumableStream``), and imports of an async module pointed at its
twin. What differs beyond names (a cancel scope against a thread, a task group against a daemon
thread) lives in ``client/_concurrency.py`` as pairs of names these rewrites map onto each other,
so an async module is written with its sync reading in mind: it uses only those for sleeping,
locking and waking, and its docstrings say "await" only where the sync twin may say it too.

Renaming can unsort an import line (``AsyncIterator, Callable`` becomes ``Iterator, Callable``),
so the result goes through ``ruff check --fix-only --select I`` (isort), then must parse with no
``async``/``await`` left in it. Needs ruff (the ``dev`` extra).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "src" / "streamwire" / "client"

#: Each hand-written async module of ``CLIENT`` and the sync module generated from it.
PAIRS: dict[str, str] = {
    "_async.py": "_sync.py",
    "_chat.py": "_chat_sync.py",
    "_dispatcher.py": "_dispatcher_sync.py",
    "_producer.py": "_producer_sync.py",
}

#: The rewrites, in order: (pattern, replacement), each pattern matched as whole words.
SUBS: list[tuple[str, str]] = [
    ("async def ", "def "),
    ("async with ", "with "),
    ("async for ", "for "),
    ("await ", ""),
    ("__aenter__", "__enter__"),
    ("__aexit__", "__exit__"),
    ("__aiter__", "__iter__"),
    ("__anext__", "__next__"),
    ("StopAsyncIteration", "StopIteration"),
    # builtins and httpx's response methods
    ("anext", "next"),
    ("aiter_bytes", "iter_bytes"),
    ("aread", "read"),
    ("aclose", "close"),
    # client/_concurrency.py's pairs (its classes are covered by AsyncX below)
    ("acall", "call"),
    ("asleep", "sleep"),
    ("aread_head", "read_head"),
    # AsyncX -> X: httpx.AsyncClient, AsyncIterator, AsyncResumableStream, _AsyncHook, ...
    (r"(_?)Async(?=[A-Z])", r"\1"),
    # an import of another async module imports its twin
    *((rf"from \.{Path(src).stem} import", f"from .{Path(dst).stem} import")
      for src, dst in PAIRS.items()),
]
_COMPILED = [(re.compile(rf"(?<!\w){pattern}" + (r"(?!\w)" if pattern[-1].isalnum() else "")), repl)
             for pattern, repl in SUBS]


def header(src: str) -> str:
    return (f"# Generated from {src} by tools/unasync.py; do not edit: edit {src} and run\n"
            f"# `python tools/unasync.py` (./dev test fails while this file is stale).\n")


def rewrite(text: str) -> str:
    """The async module ``text`` as sync code, before its imports are sorted."""
    for pattern, repl in _COMPILED:
        text = pattern.sub(repl, text)
    return text


def _ruff() -> list[str]:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    if found is None:
        sys.exit("tools/unasync.py needs ruff to sort imports: pip install -e '.[dev]'")
    return [found]


def sort_imports(text: str, path: Path) -> str:
    done = subprocess.run(
        [*_ruff(), "check", "--fix-only", "--quiet", "--select", "I", "--stdin-filename",
         str(path), "-"], input=text, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode:
        sys.exit(f"ruff could not sort the imports of {path}: {done.stderr.strip()}")
    return done.stdout


def check_sync(text: str, path: Path) -> None:
    """Fail when the generated text does not parse or still has async syntax in it."""
    tree = ast.parse(text, str(path))
    left = sorted({f"{type(node).__name__} at line {node.lineno}" for node in ast.walk(tree)
                   if isinstance(node, ast.AsyncFunctionDef | ast.AsyncFor | ast.AsyncWith
                                 | ast.Await)})
    if left:
        sys.exit(f"{path}: async code left after the rewrite: {', '.join(left)}")


def generate(src: str, dst: str) -> str:
    """The text of the sync module ``dst`` generated from the async module ``src``."""
    target = CLIENT / dst
    text = sort_imports(header(src) + rewrite((CLIENT / src).read_text()), target)
    check_sync(text, target)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a generated module is stale")
    args = parser.parse_args(argv)
    stale = []
    for src, dst in PAIRS.items():
        target = CLIENT / dst
        text = generate(src, dst)
        if target.exists() and target.read_text() == text:
            continue
        stale.append(target.relative_to(ROOT))
        if not args.check:
            target.write_text(text)
            print(f"wrote {target.relative_to(ROOT)} from {src}")
    if args.check and stale:
        names = ", ".join(str(p) for p in stale)
        print(f"stale generated modules: {names}; run `python tools/unasync.py` and commit them",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
