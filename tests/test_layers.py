"""Each module imports only the layers below it; the sans-I/O core has no asyncio in it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "streamwire"

# Layer of each module (lower numbers are lower layers). Modules not listed are edges (top).
LAYERS: dict[str, int] = {
    "errors": 0,
    "sse": 1,
    "contract": 2,
    "chat": 2,
    "writer": 3,
    "reader": 3,
    "transport": 3,
    "frames": 4,
    "log": 5,
    "testing": 6,
}
EDGE = 9
SANS_IO = {"sse", "frames", "contract", "chat"}
ASYNC_LIBS = {"asyncio", "anyio", "trio", "httpx", "starlette", "uvicorn", "redis", "sqlite3"}


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
