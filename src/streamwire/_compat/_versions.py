"""The installed version of a library a ``_compat`` module checks, and the check itself."""

from __future__ import annotations

import importlib.metadata
import logging
from typing import final

__all__ = ["VersionGate", "installed_version"]

logger = logging.getLogger("streamwire.server")


def installed_version(distribution: str) -> tuple[int, int]:
    """``distribution``'s installed (major, minor); (-1, -1) when it cannot be read."""
    try:
        parts = importlib.metadata.version(distribution).split(".")
        return int(parts[0]), int(parts[1])
    except (importlib.metadata.PackageNotFoundError, ValueError, IndexError):
        return -1, -1


@final
class VersionGate:
    """Is the installed ``distribution`` one a reach-in was checked against, ``low`` <= (major,
    minor) < ``high``? Read once; outside the range, one warning saying what streamwire does
    instead (``outside``: "... is outside the versions streamwire {outside}"). Callers on a hot
    path test ``gate.ok or gate.passes()``: the attribute once known, the call only the first
    time."""

    __slots__ = ("distribution", "high", "low", "ok", "outside")

    def __init__(self, distribution: str, low: tuple[int, int], high: tuple[int, int],
                 outside: str) -> None:
        self.distribution, self.low, self.high, self.outside = distribution, low, high, outside
        self.ok: bool | None = None

    def passes(self) -> bool:
        if self.ok is None:
            version = installed_version(self.distribution)
            self.ok = self.low <= version < self.high
            if not self.ok:
                logger.warning("%s %s.%s is outside the versions streamwire %s",
                               self.distribution, *version, self.outside)
        return self.ok
