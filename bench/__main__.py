"""Run the benchmarks: ``python -m bench`` runs every ``bench/bench_*.py``; ``python -m bench sse``
runs only ``bench_sse.py``. Each module exposes ``main(rounds: int) -> str`` returning markdown."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> None:
    here = Path(__file__).parent
    modules = pkgutil.iter_modules([str(here)])
    names = sorted(m.name.removeprefix("bench_") for m in modules if m.name.startswith("bench_"))
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("only", nargs="*", help="benchmarks to run")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per measurement (median)")
    args = parser.parse_args()
    for name in args.only or names:
        module = importlib.import_module(f"bench.bench_{name}")
        print(module.main(args.rounds), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
