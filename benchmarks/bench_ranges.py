"""Cost of the range analysis (issue 35): per node, next to compiling, and at trace time.

Usage:
    PYTHONPATH=src python benchmarks/bench_ranges.py [--nodes 8192] [--rounds 5]

For the graphs of bench_compile.py (*chain*, *dag*, *term*) and a *guarded* one (a chain of
cp.where guards over declared inputs, the analysis' costly case: each side is analysed with
the narrowed range), prints µs per operation of compile_program alone, of the analysis
(graph/ranges.analyse and the folding map, what ``tg.compile(..., check=True)`` adds) and
the ratio of compile time with checks to without (goal: <= 1.5), and the splitting's work
per operation: operations the cp.where side windows walked and operations the sides
evaluated again (counters, Analysis.split_explored / split_evaluated). Then the trace-time cost of
capturing source locations (graph/location.mark): tracing the chain with and without it.
Best of ``--rounds`` (CPU time, the machine is shared).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_compile import GRAPHS, ops_of

import copapy as cp
from copapy.checks import folded
from copapy.compiler import compile_program
from copapy.graph.ranges import analyse
from copapy.runtime.load import host_architecture


def guarded(n: int) -> tuple[list[Any], list[Any]]:
    xs = [cp.value(0.5, range=(-1.0, 1.0)) for _ in range(16)]
    acc: Any = xs[0]
    for i in range(n // 6):
        x = xs[i % 16]
        acc = cp.where(x > 0.1, acc + cp.log(x), acc * 0.5) + cp.sqrt(x * x + 1.0)
    return xs, [acc]


def best(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        gc.collect()
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def trace_cost(n: int, rounds: int) -> tuple[float, float]:
    """µs per traced operation with and without the location capture."""
    def trace() -> None:
        GRAPHS["chain"](n)
    with_loc = best(trace, rounds)
    # (cp.value is the function: the modules by name)
    cp_value, cp_arrays = (importlib.import_module(f"copapy.{m}") for m in ("value", "arrays"))
    saved = cp_value.mark, cp_arrays.mark
    cp_value.mark = cp_arrays.mark = lambda node, depth=2: node  # type: ignore[assignment]
    try:
        without = best(trace, rounds)
    finally:
        cp_value.mark, cp_arrays.mark = saved
    return with_loc / n * 1e6, without / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    arch = host_architecture()
    graphs = {**GRAPHS, "guarded": guarded}
    print(f"{'graph':8} {'ops':>7} {'compile us/op':>14} {'analysis us/op':>15} "
          f"{'with/without':>13} {'walked/op':>10} {'again/op':>9}")
    for name, make in graphs.items():
        _, outs = make(args.nodes)
        nodes = [o.node for o in outs]
        ops = ops_of(outs)
        compile_s = best(lambda nodes=nodes: compile_program(nodes, arch), args.rounds)
        analysis_s = best(lambda nodes=nodes: folded(nodes, analyse(nodes)), args.rounds)
        found = analyse(nodes)
        print(f"{name:8} {ops:7d} {compile_s / ops * 1e6:14.2f} {analysis_s / ops * 1e6:15.2f} "
              f"{(compile_s + analysis_s) / compile_s:13.2f} "
              f"{found.split_explored / ops:10.2f} {found.split_evaluated / ops:9.2f}")
    with_loc, without = trace_cost(args.nodes, args.rounds)
    print(f"tracing (chain): {with_loc:.2f} us/op with source locations, {without:.2f} without "
          f"({with_loc / without:.2f}x, {(with_loc - without) * 1e3:.0f} ns per operation)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
