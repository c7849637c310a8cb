"""Compile and gradient speed: µs per operation for scalar graphs of 1k to 256k nodes.

Usage:
    PYTHONPATH=src python benchmarks/bench_compile.py [--max-nodes 262144] [--profile]

Graphs: *chain* (a running multiply-add over fresh inputs, the shape of a controller), *dag* (a
random DAG: every node combines two random earlier nodes, seeded, so the live set is large),
*term* (the benchmark term of bench_term.py with scalar vectors). Per graph: tracing (building the
nodes), compiling (schedule, registers, stencil selection, link, image) and ``cp.grad`` of the sum
of the outputs with respect to every input (building the gradient graph), each as µs per forward
operation (median of 3). Goal of issue 13: compile <= 10 µs/op, flat from 1k to 256k nodes;
``cp.grad`` <= 10 µs per forward op.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import statistics
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


def measure(kind: str, n: int) -> tuple[int, float, float, float]:
    traces, compiles, grads = [], [], []
    ops = 0
    for _ in range(3):
        gc.collect()
        t0 = time.perf_counter()
        inputs, outputs = GRAPHS[kind](n)
        t1 = time.perf_counter()
        compile_program([o.node for o in outputs], "x86_64")
        t2 = time.perf_counter()
        total = outputs[0]
        for o in outputs[1:]:
            total = total + o
        cp.grad(total, inputs)
        t3 = time.perf_counter()
        ops = ops_of(outputs)
        traces.append(t1 - t0)
        compiles.append(t2 - t1)
        grads.append(t3 - t2)
        del inputs, outputs, total
    us = 1e6 / max(ops, 1)
    return (ops, statistics.median(traces) * us, statistics.median(compiles) * us,
            statistics.median(grads) * us)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-nodes", type=int, default=262144)
    parser.add_argument("--profile", metavar="KIND:N", help="profile one graph, e.g. dag:65536")
    args = parser.parse_args()
    sys.setrecursionlimit(100000)
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
    print("| graph | nodes | ops | trace µs/op | compile µs/op | grad µs/op |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in GRAPHS:
        n = 1024
        while n <= args.max_nodes:
            ops, trace, comp, grad = measure(kind, n)
            print(f"| {kind} | {n} | {ops} | {trace:.1f} | {comp:.1f} | {grad:.1f} |", flush=True)
            n *= 4


if __name__ == "__main__":
    main()
