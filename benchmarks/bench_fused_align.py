"""The fused benchmark expression on one table per argument, in this process: CPU ns per element.

Usage (the stack's alignment decided the v4 loop's speed before the lane form's block was
aligned; with ASLR off the environment's size moves the stack):

    for pad in 0 8 16 24 32 40 48 56; do PAD=$(printf '%*s' $pad '' | tr ' ' x) \\
        PYTHONPATH=src setarch -R python benchmarks/bench_fused_align.py x86_64-v4; done

``@cp.jit(arch=...)`` of ``cp.map_to_numpy(cp.sqrt(a*a+b*b)*0.5+cp.sin(a))`` on 1e5 float32
elements in [-10, 10], best of 7 x 30 calls.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

import copapy as cp


def expr(a: Any, b: Any) -> Any:
    return cp.map_to_numpy(cp.sqrt(a * a + b * b) * 0.5 + cp.sin(a))


def main() -> None:
    n = 100_000
    rng = np.random.default_rng(1)
    a = rng.uniform(-10, 10, n).astype(np.float32)
    b = rng.uniform(-10, 10, n).astype(np.float32)
    for arch in sys.argv[1:] or ["x86_64"]:
        f = cp.jit(expr, arch=arch)
        f(a, b)
        best = float("inf")
        for _ in range(7):
            t0 = time.process_time()
            for _ in range(30):
                f(a, b)
            best = min(best, (time.process_time() - t0) / 30 / n * 1e9)
        print(f"{arch} {best:.2f} ns/element")


if __name__ == "__main__":
    main()
