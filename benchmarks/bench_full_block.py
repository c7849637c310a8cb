"""Full-block fused loops (issue 32 item 2, docs/decisions/2026-12-05-full-block-fused-loops.md)
against the ordinary loop they replace, in one process: the same jitted expression compiled
once with ``fuse.FULL_BLOCKS`` on (forms q up to the last whole block, then the ordinary loop
over the rest) and once off (forms p, a partial-block test per memory operand), per table.

Usage:
    PYTHONPATH=src python benchmarks/bench_full_block.py [--sizes 1000,100000,...]
        [--rounds 15] [--archs x86_64,x86_64-v3,x86_64-v4] [--ops expr,hyp]

Interleaved, shuffled rounds (bench_elementwise.measure); CPU time of this thread; median ns
per element; full / ordinary below 1: the full-block loop is faster. Both results are
checked equal bit for bit before timing. A table whose CPU features this machine lacks is
skipped with a note.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_elementwise import measure  # interleaved, shuffled rounds; this thread's CPU time

import copapy as cp
from copapy.arch.targets import by_name
from copapy.compiler import fuse

SIZES = [1_000, 100_000, 1_000_000, 10_000_000]
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "expr": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + cp.sin(x),
    "hyp": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + x,
    # only cheap operations: where a memory operand's cost is most of a stencil
    "arith": lambda x, y: (x * y + x * 2.0 - y) * 0.25,
}


def jitted(fn: Callable[[Any, Any], Any], arch: str, args: tuple[Any, ...],
           full: bool) -> Callable[[], Any]:
    """fn jitted for arch and compiled (at its first call) with full-block loops on or off."""
    f = cp.jit(arch=arch)(lambda x, y: cp.map_to_numpy(fn(x, y)))
    saved, fuse.FULL_BLOCKS = fuse.FULL_BLOCKS, full
    try:
        f(*args)
    finally:
        fuse.FULL_BLOCKS = saved
    return lambda: f(*args)


def runs_here(arch: str) -> bool:
    """The CPU has the table's features (/proc/cpuinfo flags)."""
    with open("/proc/cpuinfo") as f:
        flags = set(next((ln for ln in f if ln.startswith("flags")), "").split())
    return set(by_name(arch).cpu_features) <= flags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--archs", default="x86_64,x86_64-v3,x86_64-v4")
    parser.add_argument("--ops", default=",".join(OPS))
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}\n")
    print("| op | table | n | full ns/el | ordinary ns/el | full / ordinary |")
    print("|---|---|---:|---:|---:|---:|")
    rng = np.random.default_rng(1)
    for name in opts.ops.split(","):
        for arch in opts.archs.split(","):
            if not runs_here(arch):
                print(f"<!-- {arch}: this CPU lacks {by_name(arch).cpu_features} -->")
                continue
            for n in map(int, opts.sizes.split(",")):
                args = tuple((rng.random(n) * 20 - 10).astype(np.float32) for _ in range(2))
                calls = {"full": jitted(OPS[name], arch, args, True),
                         "ordinary": jitted(OPS[name], arch, args, False)}
                assert calls["full"]().tobytes() == calls["ordinary"]().tobytes(), (name, n)
                med = {k: v / n * 1e9 for k, v in measure(calls, (), opts.rounds, 0.02).items()}
                print(f"| {name} | {arch} | {n:.0e} | {med['full']:.3f} | {med['ordinary']:.3f} "
                      f"| {med['full'] / med['ordinary']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
