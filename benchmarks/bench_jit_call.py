"""A trivial ``@cp.jit`` call against numba's, interleaved in one process (issue 13's row
"trivial jit call vs numba trivial call <= 1.0").

Usage:
    PYTHONPATH=src python benchmarks/bench_jit_call.py [--rounds 15] [--calls 100000]
    PYTHONPATH=src python benchmarks/bench_jit_call.py --arrays [--rounds 7] [--calls 20000]

``--arrays``: calls that return new arrays (one, two, the fused expression of
bench_elementwise.py) at 8 and 1,000 float32 elements, against numba's array expressions, which
allocate their results as these calls do (docs/decisions/2026-12-05-jit-results-made-inside-
the-call.md).

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


def array_calls(rounds: int, calls: int) -> None:
    """Array results: copapy's and numba's calls interleaved per round, ns a call."""
    half, one = np.float32(0.5), np.float32(1.0)
    cases: list[tuple[str, Callable[..., Any], Callable[..., Any], int]] = [
        ("a + 1.0", cp.jit(lambda a: a + 1.0), numba.njit(lambda a: a + one), 1),
        ("(a * 2.0, a + 1.0)", cp.jit(lambda a: (a * 2.0, a + 1.0)),
         numba.njit(lambda a: (a * np.float32(2.0), a + one)), 1),
        ("sqrt(a*a+b*b)*0.5+sin(a)", cp.jit(lambda a, b: cp.sqrt(a * a + b * b) * 0.5 + cp.sin(a)),
         numba.njit(lambda a, b: np.sqrt(a * a + b * b) * half + np.sin(a)), 2)]
    print("| call | n | `@cp.jit` best ns | numba best ns | cp / numba (best) "
          "| cp / numba (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    for n in (8, 1000):
        a = np.linspace(0.0, 1.0, n, dtype=np.float32)
        b = a + np.float32(1.0)
        for name, ours_fn, nb_fn, arity in cases:
            argv = (a, b)[:arity]
            mine, theirs = ours_fn(*argv), nb_fn(*argv)
            for got, want in zip(mine if isinstance(mine, tuple) else (mine,),
                                 theirs if isinstance(theirs, tuple) else (theirs,), strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            ours: list[float] = []
            nbs: list[float] = []
            for _ in range(rounds):
                ours.append(per_call(lambda x, f=ours_fn: f(*x), calls, argv))
                nbs.append(per_call(lambda x, f=nb_fn: f(*x), calls, argv))
            print(f"| `{name}` | {n} | {min(ours):.0f} | {min(nbs):.0f} | "
                  f"{min(ours) / min(nbs):.2f} | "
                  f"{statistics.median(ours) / statistics.median(nbs):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--arrays", action="store_true", help="calls returning new arrays")
    args = parser.parse_args()
    if args.arrays:
        array_calls(args.rounds or 7, args.calls or 20_000)
        return
    args.rounds = args.rounds or 15
    args.calls = args.calls or 100_000
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
