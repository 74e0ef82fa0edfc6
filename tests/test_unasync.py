"""The sync client is generated from the async one by ``tools/unasync.py``: the generated modules
are current (``./dev test`` checks it too), a stale one is caught, and the rewrite maps the async
names onto the sync ones."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "unasync.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_sync_modules_are_current() -> None:
    done = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_each_generated_module_says_so() -> None:
    unasync = _tool()
    for src, dst in unasync.PAIRS.items():
        text = (unasync.CLIENT / dst).read_text()
        assert text.startswith(unasync.header(src)), dst


def test_a_stale_or_missing_module_fails_the_check(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    unasync = _tool()
    real, client = unasync.CLIENT, tmp_path / "client"
    shutil.copytree(real, client)
    monkeypatch.setattr(unasync, "CLIENT", client)
    monkeypatch.setattr(unasync, "ROOT", tmp_path)
    assert unasync.main(["--check"]) == 0
    generated = list(unasync.PAIRS.values())
    edited, missing = generated[0], generated[-1]
    (client / edited).write_text((client / edited).read_text() + "# a hand edit\n")
    (client / missing).unlink()
    assert unasync.main(["--check"]) == 1
    stale = ", ".join(f"client/{name}" for name in dict.fromkeys([edited, missing]))
    assert f"stale generated modules: {stale};" in capsys.readouterr().err
    assert unasync.main([]) == 0  # rewrites them
    assert unasync.main(["--check"]) == 0
    for name in generated:
        assert (client / name).read_text() == (real / name).read_text()


@pytest.mark.parametrize(("source", "generated"), [
    ("async def f(self) -> AsyncIterator[T]:", "def f(self) -> Iterator[T]:"),
    ("async with self._lock:", "with self._lock:"),
    ("async for data in response.aiter_bytes():", "for data in response.iter_bytes():"),
    ("body = await response.aread()", "body = response.read()"),
    ("await self._stream.aclose()", "self._stream.close()"),
    ("data = await anext(body)", "data = next(body)"),
    ("except StopAsyncIteration:", "except StopIteration:"),
    ("async def __aenter__(self) -> AsyncChatReply:", "def __enter__(self) -> ChatReply:"),
    ("client: httpx.AsyncClient", "client: httpx.Client"),
    ("on_rewound: AsyncHook[RewoundFrame, object]", "on_rewound: Hook[RewoundFrame, object]"),
    ("await acall(self._on_rewound, item)", "call(self._on_rewound, item)"),
    ("await asleep(f.delay)", "sleep(f.delay)"),
    ("from ._async import AsyncResumableStream", "from ._sync import ResumableStream"),
    ("from ._chat_core import message", "from ._chat_core import message"),  # not a twin
    # whole words only
    ("self.acall_count = reading_async_parts", "self.acall_count = reading_async_parts"),
])
def test_the_rewrite(source: str, generated: str) -> None:
    assert _tool().rewrite(source) == generated
