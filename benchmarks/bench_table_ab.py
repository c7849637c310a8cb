"""A/B of two stencil tables of one architecture in one process: the committed table against
another file of it (e.g. the table of an earlier commit), each jitted function compiled once
against each table, then called interleaved in shuffled rounds; results checked bit for bit
equal between the tables. Compares stencil changes that keep the names and the image (the
fused loops' block width: docs/decisions/2026-12-05-two-register-blocks.md) without two
processes, whose spread on a shared machine is larger than the effect.

    git show HEAD~2:src/copapy/_tables/x86_64-v3.cpst > /tmp/old-v3.cpst
    PYTHONPATH=src python benchmarks/bench_table_ab.py --arch x86_64-v3 --against /tmp/old-v3.cpst

ns per element (this thread's CPU time), medians of the rounds, and new / old (below 1: the
committed table is faster). Only images loaded in process (the host's architectures).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import copapy as cp
from copapy.compiler import table

PARTS: dict[str, Callable[[Any, Any], Any]] = {
    "expr": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + cp.sin(x),
    "hyp": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + x,
    "arith": lambda x, y: (x * y + x * 2.0 - y) * 0.25,
}


def compiled(arch: str, data: bytes | None, a: Any, b: Any) -> dict[str, Callable[..., Any]]:
    """Every part jitted and compiled (first call) against ``data`` as arch's table (None:
    the committed one)."""
    module = vars(table)  # table.py's globals: load_table reads the file through read_data
    real = module["read_data"]
    name = f"{arch}.cpst"

    def read(package: str, file: str) -> bytes:
        got: bytes = data if data is not None and file == name else real(package, file)
        return got

    table.load_table.cache_clear()
    module["read_data"] = read
    try:
        fns = {}
        for k, part in PARTS.items():
            f = cp.jit(arch=arch)(lambda x, y, part=part: cp.map_to_numpy(part(x, y)))
            f(a, b)
            fns[k] = f
        return fns
    finally:
        module["read_data"] = real
        table.load_table.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="x86_64-v3")
    ap.add_argument("--against", required=True, type=Path, help="the other table file")
    ap.add_argument("--sizes", default="1000,100000,10000000")
    ap.add_argument("--rounds", type=int, default=9)
    opts = ap.parse_args()
    other = opts.against.read_bytes()
    rng = np.random.default_rng(1)
    print(f"{opts.arch}: committed table (new) against {opts.against} (old), "
          f"{opts.rounds} rounds; ns per element, new / old\n")
    print("| part | n | old | new | new / old |\n|---|---:|---:|---:|---:|")
    for n in map(int, opts.sizes.split(",")):
        a = rng.uniform(-10, 10, n).astype(np.float32)
        b = rng.uniform(-10, 10, n).astype(np.float32)
        fns = {"new": compiled(opts.arch, None, a, b), "old": compiled(opts.arch, other, a, b)}
        for k in PARTS:
            same = np.array_equal(fns["new"][k](a, b).view(np.uint32),
                                  fns["old"][k](a, b).view(np.uint32))
            assert same, f"{k} at n={n}: the tables' results differ"
        calls = max(1, 3_000_000 // n)
        times: dict[tuple[str, str], list[float]] = {}
        keys = [(v, k) for v in fns for k in PARTS]
        for _ in range(opts.rounds):
            random.shuffle(keys)
            for v, k in keys:
                f = fns[v][k]
                t = time.thread_time_ns()
                for _ in range(calls):
                    f(a, b)
                times.setdefault((v, k), []).append((time.thread_time_ns() - t) / calls / n)
        for k in PARTS:
            old, new = (statistics.median(times[(v, k)]) for v in ("old", "new"))
            print(f"| {k} | {n:.0e} | {old:.3f} | {new:.3f} | {new / old:.3f} |")


if __name__ == "__main__":
    main()
