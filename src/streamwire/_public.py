"""``publish``: make a package's exports report the package as their module (httpx does this), so
reprs, tracebacks and docs read ``streamwire.server.StreamApp``, not a private module's name."""

from __future__ import annotations

import contextlib
import inspect
import typing
from collections.abc import Iterable
from typing import Any


def publish(namespace: dict[str, Any], names: Iterable[str]) -> None:
    """Set ``__module__`` of each class and function in ``names`` to the namespace's module.

    A class's string annotations are resolved first, in the module that defines it: msgspec and
    ``typing.get_type_hints`` resolve them through ``__module__``, which is about to change.
    """
    module = namespace["__name__"]
    for name in names:
        obj: object = namespace[name]
        if isinstance(obj, type):
            _resolve_annotations(obj)
        elif not (callable(obj) and hasattr(obj, "__code__")):
            continue  # constants and type aliases
        with contextlib.suppress(AttributeError, TypeError):  # some C types refuse it
            obj.__module__ = module


def _resolve_annotations(cls: type) -> None:
    own = inspect.get_annotations(cls)
    if not any(isinstance(value, str) for value in own.values()):
        return
    hints = typing.get_type_hints(cls, include_extras=True)
    cls.__annotations__ = {key: hints.get(key, value) for key, value in own.items()}
