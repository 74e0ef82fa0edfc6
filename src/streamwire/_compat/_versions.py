"""The installed version of a library a ``_compat`` module checks, as (major, minor)."""

from __future__ import annotations

import importlib.metadata

__all__ = ["installed_version"]


def installed_version(distribution: str) -> tuple[int, int]:
    """``distribution``'s installed (major, minor); (-1, -1) when it cannot be read."""
    try:
        parts = importlib.metadata.version(distribution).split(".")
        return int(parts[0]), int(parts[1])
    except (importlib.metadata.PackageNotFoundError, ValueError, IndexError):
        return -1, -1
