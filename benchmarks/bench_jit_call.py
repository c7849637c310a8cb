"""A trivial ``@cp.jit`` call against numba's, interleaved in one process (issue 13's row
"trivial jit call vs numba trivial call <= 1.0").

Usage:
    PYTHONPATH=src python benchmarks/bench_jit_call.py [--rounds 15] [--calls 100000]

Both functions are ``lambda v: v + 1.0`` called with a float; rounds alternate between the
two so both see the same machine (plus a row for the jitted call with an ``np.float32``
argument, which takes the same fast path as a float); CPU time per call, best and median of
the rounds. Run it with another tree on PYTHONPATH (``git archive <commit> src | tar -x -C
/tmp/base`` plus the built extension modules) to compare two versions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

import copapy as cp


def per_call(fn: Callable[[Any], Any], calls: int, arg: Any = 2.0) -> float:
    t0 = time.process_time_ns()
    for _ in range(calls):
        fn(arg)
    return (time.process_time_ns() - t0) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    jitted = cp.jit(lambda v: v + 1.0)
    nb = numba.njit(lambda v: v + 1.0)
    assert jitted(2.0) == nb(2.0) == 3.0
    ours: list[float] = []
    theirs: list[float] = []
    np32: list[float] = []
    for _ in range(args.rounds):
        ours.append(per_call(jitted, args.calls))
        theirs.append(per_call(nb, args.calls))
        np32.append(per_call(jitted, args.calls, np.float32(2.0)))
    best, med = min(ours), statistics.median(ours)
    nb_best, nb_med = min(theirs), statistics.median(theirs)
    print("| | best ns | median ns |\n|---|---:|---:|")
    print(f"| `@cp.jit` | {best:.0f} | {med:.0f} |")
    print(f"| numba | {nb_best:.0f} | {nb_med:.0f} |")
    print(f"| ratio | {best / nb_best:.2f} | {med / nb_med:.2f} |")
    print(f"| `@cp.jit` with np.float32(2.0) | {min(np32):.0f} | {statistics.median(np32):.0f} |")
    print(f"| np.float32 / float | {min(np32) / best:.2f} | {statistics.median(np32) / med:.2f} |")


if __name__ == "__main__":
    main()
