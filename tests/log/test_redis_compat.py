"""``streamwire._compat.redis``: the one module that uses redis-py below its client API refuses a
redis-py it was not checked against, or one that lacks what it uses, at import, naming the
version (instead of failing later, mid-stream)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("redis")


def _import_error(setup: str) -> str:
    code = (f"{setup}\n"
            "try:\n    import streamwire.log.redis\n"
            "except ImportError as e:\n    print(e)\nelse:\n    print('imported')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout


def test_the_installed_redis_py_fits() -> None:
    assert _import_error("") == "imported\n"


def test_an_unchecked_major_version_is_refused_at_import() -> None:
    out = _import_error("import redis; redis.__version__ = '99.0.1'")
    assert "does not fit redis-py 99.0.1" in out
    assert "checked with redis-py 5 to 8" in out
    assert 'pip install "redis>=5,<9"' in out


def test_a_missing_internal_method_is_named_at_import() -> None:
    out = _import_error("from redis.asyncio.connection import AbstractConnection\n"
                        "del AbstractConnection.send_packed_command")
    assert "does not fit redis-py" in out
    assert "Connection.send_packed_command" in out


def test_only_the_compat_module_and_the_redis_room_import_redis() -> None:
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "streamwire"
    importers = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                       if any(line.startswith(("import redis", "from redis"))
                              for line in p.read_text().splitlines()))
    assert all(p.startswith(("log/redis/", "_compat/redis.py")) for p in importers), importers
    # a redis-py connection's private writer (not an object's own ``self._writer``), and the
    # connection's and pool's internal methods: nowhere but in a _compat module (where
    # _compat/h11.py reads h11's own ``Connection._writer``, version-checked)
    private = re.compile(r"(?<!self)\._writer\b|[\"']_writer[\"']|\.make_connection\(|"
                         r"\.read_response\(|\.send_packed_command\(|\.pack_command\(")
    reaching = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                      if p.parent.name != "_compat"
                      if private.search(p.read_text()))
    assert reaching == [], reaching
