"""Shared helpers for the benchmarks: timing by medians of rounds, and markdown tables.

Benchmarks mislead easily: every figure here is a median of several rounds on this machine, and
only ratios measured in the same run are meant to be compared.
"""

from __future__ import annotations

import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata


def settle_as_serve() -> None:
    """What ``streamwire serve`` does to the garbage collector once start-up is done (for a
    streamwire candidate started the way ``serve`` starts it)."""
    try:
        from streamwire.cli.serve import settle_heap
    except ImportError:  # code from before settle_heap: serve collected and froze
        gc.collect()
        gc.freeze()
        return
    settle_heap()


def median_time(fn: Callable[[], object], *, rounds: int = 7, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``rounds`` runs (GC off while timing)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return statistics.median(times)


def interleaved(candidates: Mapping[str, Callable[[], object]], *, rounds: int = 7,
                repeat: int = 3) -> dict[str, float]:
    """Median seconds per call of each candidate, candidates taking turns within every round.

    A load spike from another process then hits every candidate alike instead of one of them, and
    the order rotates each round so none is always first. Each sample times ``repeat`` calls.
    """
    names = list(candidates)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for fn in candidates.values():
        fn()  # warm-up
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            fn = candidates[name]
            samples[name].append(
                median_time(lambda f=fn: [f() for _ in range(repeat)], rounds=1, warmup=0) / repeat
            )
    return {name: statistics.median(times) for name, times in samples.items()}


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_line(dists: Sequence[str] = ()) -> str:
    parts = [f"Python {sys.version.split()[0]}", platform.machine(), platform.processor() or ""]
    parts += [f"{d} {version(d)}" for d in dists]
    return ", ".join(p for p in parts if p)


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Render a markdown table (floats shown with 3 significant digits)."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    lines = [f"### {title}", "", "| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
