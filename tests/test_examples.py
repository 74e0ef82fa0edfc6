"""The apps in examples/ run as their docstrings say: each is served by real uvicorn on 127.0.0.1
or run as a script in a subprocess (real ``streamwire serve`` processes, a real Redis), bounded,
and its output checked. (examples/chat/ has tests of its own.)"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from conftest import REDIS_URL, require_redis
from helpers.chaos_proxy import ServerThread
from streamwire import ResponseStatusError, StreamReader, create_sse_readable
from streamwire.chat import Chat

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def load(path: Path) -> ModuleType:
    """Import an example app from its file, as ``uvicorn examples.<name>.app:app`` would."""
    spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(script: Path, *args: str, url: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMWIRE_URL": url,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=90, check=False)


@pytest.mark.parametrize("name", ["direct_chat", "durable_chat"])
def test_chat_backend_and_its_client(name: str) -> None:
    app = load(EXAMPLES / name / "app.py").app
    with ServerThread(app) as server:
        done = run(EXAMPLES / name / "client.py", "What", "is", "SSE?", url=server.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "You asked: What is SSE?" in done.stdout
    assert lines[-1] == ("[complete]" if name == "direct_chat" else "[completed]")


def test_direct_chat_answers_a_bad_question_with_a_typed_error() -> None:
    app = load(EXAMPLES / "direct_chat" / "app.py").app
    with (ServerThread(app) as server, httpx.Client() as client,
          client.stream("POST", f"{server.url}/chat", json={}) as response,
          pytest.raises(ResponseStatusError, match="HTTP 422") as info):
        StreamReader(create_sse_readable(response), Chat).consume_sync()
    assert info.value.status_code == 422


def test_durable_chat_refuses_http_writes() -> None:
    app = load(EXAMPLES / "durable_chat" / "app.py").app
    with ServerThread(app) as server:
        answer = httpx.put(f"{server.url}/streams/forged", timeout=10)
    assert answer.status_code == 403


def test_a_producer_in_another_process() -> None:
    done = run(EXAMPLES / "producer_process" / "run.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        "every chunk once and in order even across processes ", "[completed]"]
    assert "producer: wrote 9 chunks" in done.stderr


@pytest.mark.redis
def test_two_servers_on_one_redis() -> None:
    require_redis()
    done = run(EXAMPLES / "redis_two_servers" / "run.py", REDIS_URL)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    server_a, server_b = lines[0].split()[-1], lines[1].split()[-1]
    assert server_a != server_b
    assert lines[-2:] == ["written through server A and read through server B ", "[completed]"]
