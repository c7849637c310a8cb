"""Where the fused expression's time goes: sqrt(a*a+b*b)*0.5+sin(a) and its parts through
@cp.jit, per stencil table (issue 32, item 2).

Usage:
    PYTHONPATH=src python benchmarks/bench_expr_parts.py [--n 100000] [--rounds 15]

Rows (each a fused loop or a lone kernel, result as a view of the program's memory): the
expression, the expression with x in place of sin(x) ("hyp"), sin(x) + y, sin(x) alone (the
block form), x*y + x and x + y (the loop's cost without math). ns per element, this thread's
CPU time, best and median of interleaved rounds. If sin alone costs more than the goal allows
for the whole expression, the polynomial's operation count (not the loop) is the limit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import copapy as cp
from copapy.arch.targets import host_variants

PARTS: dict[str, Callable[[Any, Any], Any]] = {
    "expr": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + cp.sin(x),
    "hyp": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + x,
    "sin+y": lambda x, y: cp.sin(x) + y,
    "sin": lambda x, y: cp.sin(x),
    "x*y+x": lambda x, y: x * y + x,
    "x+y": lambda x, y: x + y,
}


def jitted(arch: str, part: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return cp.jit(arch=arch)(lambda x, y: cp.map_to_numpy(part(x, y)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=15)
    opts = ap.parse_args()
    rng = np.random.default_rng(1)
    a = rng.uniform(-10, 10, opts.n).astype(np.float32)
    b = rng.uniform(-10, 10, opts.n).astype(np.float32)
    archs = ["x86_64", *host_variants()]
    fns = {(arch, k): jitted(arch, p) for arch in archs for k, p in PARTS.items()}
    for f in fns.values():
        f(a, b)
    times: dict[tuple[str, str], list[float]] = {k: [] for k in fns}
    calls = max(1, 2_000_000 // opts.n)
    for _ in range(opts.rounds):
        for key, f in fns.items():
            t = time.thread_time_ns()
            for _ in range(calls):
                f(a, b)
            times[key].append((time.thread_time_ns() - t) / calls / opts.n)
    print(f"n = {opts.n}, load average {os.getloadavg()[0]:.2f}; ns per element, best "
          f"(median)\n")
    print("| part | " + " | ".join(archs) + " |\n|---|" + "---:|" * len(archs))
    for k in PARTS:
        cells = [f"{min(times[(arch, k)]):.2f} ({statistics.median(times[(arch, k)]):.2f})"
                 for arch in archs]
        print(f"| {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
