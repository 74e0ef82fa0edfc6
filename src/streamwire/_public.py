"""``publish``: make a package's exports report the package as their module (httpx does this), so
reprs, tracebacks and docs read ``streamwire.server.StreamApp``, not a private module's name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, cast, is_typeddict

import msgspec


def publish(namespace: dict[str, Any], names: Iterable[str]) -> None:
    """Set ``__module__`` of each class and function in ``names`` to the namespace's module.

    msgspec Structs and TypedDicts keep theirs: msgspec resolves their (string) annotations in
    the namespace of ``__module__``, which must stay the module that defines them.
    """
    module = namespace["__name__"]
    for name in names:
        obj: object = namespace[name]
        if isinstance(obj, type):
            if issubclass(obj, msgspec.Struct) or is_typeddict(cast("type[object]", obj)):
                continue
        elif not (callable(obj) and hasattr(obj, "__code__")):
            continue  # constants and type aliases
        with contextlib.suppress(AttributeError, TypeError):  # some C types refuse it
            obj.__module__ = module
