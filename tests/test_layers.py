"""Each module imports only the layers below it; the sans-I/O core has no asyncio in it; the
typed-stream layer imports no web framework; ``import streamwire`` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "streamwire"

# Layer of each module (lower numbers are lower layers). Modules not listed are edges (top).
LAYERS: dict[str, int] = {
    "errors": 0,
    "_compat": 0,
    "_public": 0,
    "_settings": 0,
    "sse": 1,
    "contract": 2,
    "chat": 2,
    "writer": 3,
    "reader": 3,
    "transport": 3,
    "frames": 4,
    "log": 5,
    "runs": 6,
    "aisdk": 7,
    "providers": 7,
    "server": 8,
    "client": 8,
    "testing": 8,
}
EDGE = 9
SANS_IO = {"sse", "frames", "contract", "chat", "transport", "aisdk"}
ASYNC_LIBS = {"asyncio", "anyio", "trio", "httpx", "starlette", "uvicorn", "redis", "sqlite3"}
#: The typed-stream layer (and everything below it) runs under any web stack: it imports none.
WEB_LIBS = {"httpx", "starlette", "uvicorn", "granian", "fastapi", "redis"}
#: The two edges are independent of each other: a server does not need the client, nor the reverse.
SIBLING_EDGES = {"server": "client", "client": "server"}


def _layer(module: str) -> int:
    return LAYERS.get(module.split(".")[0], EDGE)


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py" or p.parent != SRC)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC).parts[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package)[: len(package) - (node.level - 1)] if node.level > 1 else list(package)
                target = ".".join([*base, node.module or ""]).strip(".")
                found.add("streamwire." + target if target else "streamwire")
            elif node.module:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_lower_layers(path: Path) -> None:
    rel = path.relative_to(SRC).with_suffix("")
    name = ".".join(rel.parts).removesuffix(".__init__")
    own = _layer(name)
    for imported in _imports(path):
        if imported.startswith("streamwire."):
            target = imported.removeprefix("streamwire.")
            if target.split(".")[0] == name.split(".")[0]:
                continue  # same package (e.g. log.memory importing log)
            assert _layer(target) <= own, f"{name} (layer {own}) imports {target} ({_layer(target)})"
        if name.split(".")[0] in SANS_IO:
            assert imported.split(".")[0] not in ASYNC_LIBS, f"sans-I/O {name} imports {imported}"
        if own <= LAYERS["transport"] and not name.startswith("_compat."):
            # (a _compat module is the one place its library's private API is used)
            assert imported.split(".")[0] not in WEB_LIBS, f"{name} imports {imported}"
        sibling = SIBLING_EDGES.get(name.split(".")[0])
        if sibling is not None:
            assert not imported.startswith(f"streamwire.{sibling}"), f"{name} imports {imported}"


def test_the_tree_shows_the_layers() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert {"server", "client", "log", "frames", "cli"} <= packages
    flat = {p.stem for p in SRC.glob("*.py")}
    assert not {m for m in flat if m.startswith(("_server", "_client"))}, "edges live in packages"
    assert {"server", "client", "tail", "cli", "demo", "run_command"}.isdisjoint(flat)


HEAVY = ("httpx", "starlette", "uvicorn", "anyio", "redis", "granian", "fastapi")


@pytest.mark.parametrize("statement", ["import streamwire.sse", "import streamwire",
                                       "import streamwire.frames", "import streamwire.writer",
                                       "from streamwire.cli import main"])
def test_importing_the_core_loads_no_web_stack(statement: str) -> None:
    code = (f"import sys; {statement}; "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "", f"{statement} loads {done.stdout.strip()}"


def test_heavy_names_load_on_first_use() -> None:
    code = ("import sys, streamwire; assert 'starlette' not in sys.modules; "
            "app = streamwire.create_app; print(app.__module__, 'starlette' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["streamwire.server", "True"]
