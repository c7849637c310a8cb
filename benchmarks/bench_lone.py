"""Lone cheap operations under @cp.jit (`x + y`, `x * 2`, `-x`): a one-operation fused loop
reading the arguments in place and writing the result into the new array, against array.c's
loop with the arguments copied in and the result copied out; NumPy beside them.

Usage:
    python benchmarks/bench_lone.py [--sizes 1024,4096,...] [--rounds 15] [--dtype float32]

Each variant is the same jitted function, compiled once with ``fuse.LONE_LOOP_MIN_BYTES = 0``
(*in place*) and once with it out of reach (*copied*); the result is the array the caller
owns (a jitted function's default), as NumPy returns a fresh one. Interleaved, shuffled
rounds; CPU time of this thread (robust to a shared machine); median ns per element. The
crossover where *in place* wins is what ``fuse.LONE_LOOP_MIN_BYTES`` is set from.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_elementwise import measure  # interleaved, shuffled rounds; this thread's CPU time

import copapy as cp
from copapy.compiler import fuse

SIZES = [256, 1024, 2048, 4096, 8192, 16384, 65536, 100_000, 1_000_000]
OPS: dict[str, tuple[int, Callable[..., Any]]] = {
    "x + y": (2, lambda x, y: x + y),
    "x * 2": (1, lambda x: x * 2.0),
    "-x": (1, lambda x: -x),
}


def jitted(fn: Callable[..., Any], args: tuple[Any, ...], min_bytes: int) -> Callable[[], Any]:
    """fn jitted and compiled (at its first call) with the lone-loop threshold at min_bytes."""
    f = cp.jit(fn)
    saved, fuse.LONE_LOOP_MIN_BYTES = fuse.LONE_LOOP_MIN_BYTES, min_bytes
    try:
        f(*args)
    finally:
        fuse.LONE_LOOP_MIN_BYTES = saved
    return lambda: f(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64", "int32"])
    opts = parser.parse_args()
    dtype = np.dtype(opts.dtype)
    print(f"load average {os.getloadavg()[0]:.2f}; {opts.dtype}; LONE_LOOP_MIN_BYTES = "
          f"{fuse.LONE_LOOP_MIN_BYTES}\n")
    print("| op | n | bytes | in place | copied | numpy | in place / copied | "
          "in place / numpy | copied / numpy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(1)
    for name, (arity, fn) in OPS.items():
        for n in map(int, opts.sizes.split(",")):
            args = tuple((rng.standard_normal(n) * 100).astype(dtype) for _ in range(arity))
            calls = {"in place": jitted(fn, args, 0), "copied": jitted(fn, args, 1 << 62),
                     "numpy": lambda fn=fn, args=args: fn(*args)}
            want = calls["numpy"]()
            for k in ("in place", "copied"):
                got = calls[k]()
                assert got.dtype == want.dtype and np.array_equal(got, want), (name, n, k)
            med = {k: v / n * 1e9 for k, v in measure(calls, (), opts.rounds, 0.02).items()}
            print(f"| {name} | {n} | {n * dtype.itemsize} | {med['in place']:.3f} | "
                  f"{med['copied']:.3f} | {med['numpy']:.3f} | "
                  f"{med['in place'] / med['copied']:.2f} | "
                  f"{med['in place'] / med['numpy']:.2f} | {med['copied'] / med['numpy']:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
