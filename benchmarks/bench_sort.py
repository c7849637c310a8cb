"""cp.sort / cp.argsort under @cp.jit (issue 31): the sort stencil (a stable merge sort on
integer keys, stencils/include/cp_index.h) against np.sort, and against the compare-exchange
network it replaced (still used for unpacked rows of up to array_ops.NETWORK_MAX elements).

Usage:
    python benchmarks/bench_sort.py [--sizes 8,16,256,4096,100000] [--dtypes float32,float64]
        [--calls 2000] [--network-max 256]

Per case: the first call (trace, compile, load, run) and the median of ``--calls`` calls
after it (fewer for long rows), random normal input of each type; ratios to ``np.sort``
(NumPy's default kind) and to ``np.sort(kind="stable")``. Every result is checked against
NumPy's stable sort. The network (the old path) is timed for float32 only.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import copapy as cp
from copapy.array_ops import _sorted_pairs
from copapy.arrays import Array


def network_sort(a: Any) -> Any:
    """The compare-exchange network on the elements as scalars (the old path)."""
    return Array(a.shape, items=_sorted_pairs(a.to_unpacked().items())[0])


def median_calls(fns: list[Callable[[Any], Any]], x: Any, calls: int) -> list[float]:
    """The median call time of each of ``fns``, timed in interleaved rounds (one call of each
    per round, so load changes hit them alike)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(calls):
        for fn, kept in zip(fns, times, strict=True):
            t = time.perf_counter()
            fn(x)
            kept.append(time.perf_counter() - t)
    return [sorted(kept)[len(kept) // 2] for kept in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,16,256,4096,100000")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--network-max", type=int, default=256,
                        help="the longest row the network is also timed for (it compiles "
                             "for seconds at 256)")
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}\n")
    print("| case | dtype | n | first call s | call µs | np.sort µs | stable µs | / np.sort "
          "| / stable | = NumPy |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    rng = np.random.default_rng(0)
    for dtype, n in ((d, int(s)) for d in opts.dtypes.split(",") for s in opts.sizes.split(",")):
        x = rng.standard_normal(n).astype(dtype)
        calls = max(20, opts.calls * 256 // max(n, 256))
        cases: dict[str, Callable[[Any], Any]] = {"cp.sort (stencil)": cp.sort,
                                                  "cp.argsort (stencil)": cp.argsort}
        if n <= opts.network_max and dtype == "float32":
            cases["network (old path)"] = network_sort
        for name, body in cases.items():
            f = cp.jit(body)
            t = time.perf_counter()
            got = f(x)
            first = time.perf_counter() - t
            want = (np.argsort(x, kind="stable") if "argsort" in name
                    else np.sort(x, kind="stable"))
            ok = np.array_equal(np.asarray(got), want)
            call, t_np, t_stable = median_calls(
                [f, np.sort, lambda a: np.sort(a, kind="stable")], x, calls)
            print(f"| {name} | {dtype} | {n:,} | {first:.3f} | {call * 1e6:.1f} | "
                  f"{t_np * 1e6:.1f} | {t_stable * 1e6:.1f} | {call / t_np:.2f} | "
                  f"{call / t_stable:.2f} | {'yes' if ok else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
