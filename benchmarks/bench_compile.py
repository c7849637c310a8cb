"""Compile and gradient speed: µs per operation for scalar graphs of 1k to 256k nodes.

Usage:
    PYTHONPATH=src python benchmarks/bench_compile.py [--max-nodes 262144] [--profile KIND:N]
    PYTHONPATH=src python benchmarks/bench_compile.py --against /tmp/base/src [--rounds 2]
    PYTHONPATH=src python benchmarks/bench_compile.py --phases dag:262144

``--against`` compares with another copapy source tree (e.g. ``git archive <commit> src | tar
-x -C /tmp/base``, then copy the built ``*.so`` of src/copapy beside it): every row runs in
fresh interpreters, alternating between the two trees, and reports the best of ``--rounds``
(CPU time) for each, so both see the same machine load.

Graphs: *chain* (a running multiply-add over fresh inputs, the shape of a controller), *dag* (a
random DAG: every node combines two random earlier nodes, seeded, so the live set is large),
*term* (the benchmark term of bench_term.py with scalar vectors). Per graph: tracing (building the
nodes), compiling (schedule, registers, stencil selection, link, image) and ``cp.grad`` of the sum
of the outputs with respect to every input (building the gradient graph; its *teardown*, the
nodes only the gradient held dying when it is dropped, is timed apart), each as µs per forward
operation (median of 3, CPU time: the machine is shared). Goal of issue 13: compile <= 10
µs/op, flat from 1k to 256k nodes; ``cp.grad`` <= 10 µs per forward op.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import copapy as cp
from copapy.compiler import compile_program


def chain(n: int) -> tuple[list[Any], list[Any]]:
    xs = [cp.value(float(i % 7) + 0.5) for i in range(max(1, n // 64))]
    acc: Any = xs[0]
    for i in range(n // 2):
        acc = acc * 0.999 + xs[i % len(xs)]
    return xs, [acc]


def dag(n: int, seed: int = 1) -> tuple[list[Any], list[Any]]:
    rnd = random.Random(seed)
    xs = [cp.value(rnd.uniform(0.5, 2.0)) for _ in range(16)]
    pool: list[Any] = list(xs)
    for _ in range(n):
        a, b = rnd.choice(pool[-256:]), rnd.choice(pool)
        pool.append(a * b + 0.25 if rnd.random() < 0.5 else a - b * 0.5)
    return xs, pool[-8:]


def term(n: int) -> tuple[list[Any], list[Any]]:
    size = max(1, n // 20)
    v1 = [cp.value(float(i)) for i in range(size)]
    v2 = [cp.value(float(i) * 0.5) for i in range(size)]
    out: Any = 0.0
    for i in range(10):
        out = out + sum((a + i) * b for a, b in zip(v1, v2, strict=True))
    return v1 + v2, [out]


GRAPHS: dict[str, Callable[[int], tuple[list[Any], list[Any]]]] = {
    "chain": chain, "dag": dag, "term": term}


def ops_of(outputs: list[Any]) -> int:
    from copapy.graph.traverse import live_nodes

    return sum(1 for n in live_nodes([o.node for o in outputs]) if n.args)


def measure(kind: str, n: int) -> tuple[int, float, float, float, float]:
    traces, compiles, grads, teardowns = [], [], [], []
    ops = 0
    for _ in range(3):
        gc.collect()
        t0 = time.process_time()
        inputs, outputs = GRAPHS[kind](n)
        t1 = time.process_time()
        compile_program([o.node for o in outputs], "x86_64")
        t2 = time.process_time()
        total = outputs[0]
        for o in outputs[1:]:
            total = total + o
        gradient = cp.grad(total, inputs)
        t3 = time.process_time()
        del gradient  # what is only the gradient's dies here (weak-reference callbacks)
        t4 = time.process_time()
        ops = ops_of(outputs)
        traces.append(t1 - t0)
        compiles.append(t2 - t1)
        grads.append(t3 - t2)
        teardowns.append(t4 - t3)
        del inputs, outputs, total
    us = 1e6 / max(ops, 1)
    return (ops, statistics.median(traces) * us, statistics.median(compiles) * us,
            statistics.median(grads) * us, statistics.median(teardowns) * us)


def row(kind: str, n: int) -> str:
    ops, trace, comp, grad, teardown = measure(kind, n)
    return f"{ops} {trace:.1f} {comp:.1f} {grad:.1f} {teardown:.1f}"


def phases(kind: str, n: int) -> None:
    """µs per operation of one compile's phases: the closure walk, the schedule, the lowering
    (its C loops included), the link (process time around each, best of 3 compiles)."""
    from copapy.compiler import lower, program

    spent: dict[str, float] = {}

    def timed(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - t0

        setattr(owner, name, wrapper)

    timed(program, "_closure", "walk")
    timed(lower, "evaluation_order", "schedule")
    timed(lower._Lowerer, "lower", "lowering")
    timed(program, "link", "link")
    _, outputs = GRAPHS[kind](n)
    ops = ops_of(outputs)
    best: dict[str, float] = {}
    for _ in range(3):
        spent.clear()
        gc.collect()
        t0 = time.process_time()
        compile_program([o.node for o in outputs], "x86_64")
        spent["total"] = time.process_time() - t0
        best = {k: min(v, best.get(k, v)) for k, v in spent.items()}
    print(f"{kind}:{n} ({ops} ops), µs/op: " + ", ".join(f"{k} {v * 1e6 / ops:.1f}"
                                                        for k, v in best.items()))


def compare(other: str, min_nodes: int, max_nodes: int, rounds: int) -> None:
    """Rows of this tree and of ``other`` (a src folder), alternating fresh interpreters."""
    trees = {"this": os.path.dirname(os.path.dirname(os.path.abspath(cp.__file__))),
             "other": os.path.abspath(other)}
    print(f"other tree: {trees['other']}; load average {os.getloadavg()[0]:.1f}")
    print("| graph | nodes | ops | trace µs/op this / other | compile this / other "
          "| grad this / other | grad teardown this / other |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in GRAPHS:
        n = min_nodes
        while n <= max_nodes:
            best: dict[str, list[float]] = {}
            ops = 0
            for _ in range(rounds):
                for name, tree in trees.items():
                    out = subprocess.run(
                        [sys.executable, __file__, "--row", f"{kind}:{n}"], check=True,
                        capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": tree}).stdout.split()
                    ops = int(out[0])
                    values = [float(v) for v in out[1:]]
                    best[name] = [min(a, b) for a, b in zip(best.get(name, values), values,
                                                            strict=True)]
            cells = " | ".join(f"{a:.1f} / {b:.1f}" for a, b in zip(best["this"], best["other"],
                                                                   strict=True))
            print(f"| {kind} | {n} | {ops} | {cells} |", flush=True)
            n *= 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-nodes", type=int, default=1024)
    parser.add_argument("--max-nodes", type=int, default=262144)
    parser.add_argument("--profile", metavar="KIND:N", help="profile one graph, e.g. dag:65536")
    parser.add_argument("--phases", metavar="KIND:N", help="time one compile's phases")
    parser.add_argument("--against", metavar="SRC", help="compare with another source tree")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.setrecursionlimit(100000)
    if args.row:
        kind, n = args.row.split(":")
        print(row(kind, int(n)))
        return
    if args.phases:
        kind, n = args.phases.split(":")
        phases(kind, int(n))
        return
    if args.against:
        compare(args.against, args.min_nodes, args.max_nodes, args.rounds)
        return
    if args.profile:
        kind, n = args.profile.split(":")
        inputs, outputs = GRAPHS[kind](int(n))
        prof = cProfile.Profile()
        prof.enable()
        compile_program([o.node for o in outputs], "x86_64")
        total = outputs[0]
        for o in outputs[1:]:
            total = total + o
        cp.grad(total, inputs)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    print("| graph | nodes | ops | trace µs/op | compile µs/op | grad µs/op "
          "| grad teardown µs/op |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in GRAPHS:
        n = args.min_nodes
        while n <= args.max_nodes:
            ops, trace, comp, grad, teardown = measure(kind, n)
            print(f"| {kind} | {n} | {ops} | {trace:.1f} | {comp:.1f} | {grad:.1f} "
                  f"| {teardown:.1f} |", flush=True)
            n *= 4


if __name__ == "__main__":
    main()
