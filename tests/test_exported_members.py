"""The public face: ``__all__`` is sorted, complete and importable (as httpx checks its own), and
every public object reports a public module."""

from __future__ import annotations

import importlib

import pytest

import streamwire


def test_all_is_sorted_and_unique() -> None:
    names = list(streamwire.__all__)
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    assert len(names) == len(set(names))


def test_every_public_name_is_exported() -> None:
    public = {n for n in dir(streamwire) if not n.startswith("_")} - {"annotations"}
    modules = {n for n in public if type(getattr(streamwire, n)).__name__ == "module"}
    assert public - modules == set(streamwire.__all__)


def test_errors_read_as_streamwire() -> None:
    assert repr(streamwire.StreamDropError).startswith("<class 'streamwire.StreamDropError")
    assert issubclass(streamwire.StreamGapError, streamwire.StreamwireError)


@pytest.mark.parametrize("package", ["streamwire", "streamwire.frames", "streamwire.log",
                                     "streamwire.server", "streamwire.client"])
def test_public_objects_report_their_public_module(package: str) -> None:
    module = importlib.import_module(package)
    private = {}
    for name in module.__all__:
        obj = getattr(module, name)
        if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__code__")):
            where = obj.__module__
            if any(part.startswith("_") for part in where.split(".")):
                private[name] = where
    assert private == {}
