"""Where the time of a one-operation @cp.jit call goes: packed sqrt against NumPy.

Usage:
    python benchmarks/bench_jit_copy.py [--sizes 100000,1000000]

Variants, interleaved in shuffled rounds (median ns per element): *cp jit* (the jitted
`cp.map_to_numpy(cp.sqrt(x))`: the program reads the argument in place, through the pointer
slot Program.invoke sets, the result a view), *cp jit owned* (`map_to_numpy(...,
copy=True)`: the result written through its pointer slot into a new array per call, as NumPy
returns one), *cp jit copy* (the same program as *cp jit* called with the
argument copied into it by one memcpy, as every call did before the in-place reads),
*cp run* (the same program's pass alone, on the data already in it), *numpy* (`np.sqrt(a)`,
a fresh output), *numpy out* (into a preallocated output), *memcpy* (`np.copyto` of the
argument into a preallocated array) and *memcpy + numpy out* (what the copying call does, in
NumPy). At 1e6 float32 elements the 4 MB copy costs as much as the pass (the data no longer
fits the caches), which the in-place read saves.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import copapy as cp


def variants(n: int) -> dict[str, Callable[[], Any]]:
    a = np.random.default_rng(1).uniform(1e-3, 10, n).astype(np.float32)

    @cp.jit
    def f(x: Any) -> Any:
        return cp.map_to_numpy(cp.sqrt(x))

    assert np.array_equal(f(a), np.sqrt(a))
    program = next(iter(f._cache.values()))
    fast = program.fast
    (entry,) = fast.inputs
    assert entry[0] == 3, "the argument is not read in place"
    copied = ((1, *entry[1:5]),)  # the same program, the argument copied in (invoke kind 1)
    fast.invoke((a,), copied, fast.outputs)
    assert np.array_equal(program.outputs[0][1], np.sqrt(a))

    def jit_copy() -> Any:
        return fast.invoke((a,), copied, fast.outputs)

    @cp.jit
    def g(x: Any) -> Any:
        return cp.map_to_numpy(cp.sqrt(x), copy=True)

    assert np.array_equal(g(a), np.sqrt(a))
    assert next(iter(g._cache.values())).fast.outputs[0][0] == 3, "result not written in place"
    out, buf = np.empty_like(a), np.empty_like(a)
    return {"cp jit": lambda: f(a), "cp jit owned": lambda: g(a), "cp jit copy": jit_copy,
            "cp run": program.run,
            "numpy": lambda: np.sqrt(a),
            "numpy out": lambda: np.sqrt(a, out=out), "memcpy": lambda: np.copyto(buf, a),
            "memcpy + numpy out": lambda: (np.copyto(buf, a), np.sqrt(buf, out=out))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| n | cp jit | cp jit owned | cp jit copy | cp run | numpy | numpy out | memcpy "
          "| memcpy + numpy out | cp jit / numpy | cp jit owned / numpy | cp jit copy / numpy "
          "| cp run / numpy |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        calls = variants(n)
        times: dict[str, list[float]] = {k: [] for k in calls}
        order = list(calls)
        number = max(1, 20_000_000 // n)
        for _ in range(args.rounds):
            random.shuffle(order)
            for k in order:
                call = calls[k]
                t = time.perf_counter()
                for _ in range(number):
                    call()
                times[k].append((time.perf_counter() - t) / number / n * 1e9)
        med = {k: statistics.median(v) for k, v in times.items()}
        cells = " | ".join(f"{v:.3f}" for v in med.values())
        print(f"| {n:.0e} | {cells} | {med['cp jit'] / med['numpy']:.2f} "
              f"| {med['cp jit owned'] / med['numpy']:.2f} "
              f"| {med['cp jit copy'] / med['numpy']:.2f} "
              f"| {med['cp run'] / med['numpy']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
