"""The public face: ``__all__`` is sorted, complete and importable (as httpx checks its own)."""

from __future__ import annotations

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
