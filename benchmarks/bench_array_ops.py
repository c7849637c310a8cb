"""Benchmark: the NumPy-like array operations of issue 31 (items 3-5) through @cp.jit against
NumPy/SciPy, and operation counts of constant regrouping.

    PYTHONPATH=src python benchmarks/bench_array_ops.py            # all rows
    PYTHONPATH=src python benchmarks/bench_array_ops.py --quick    # fewer repetitions

Per row: the first call (trace + compile + load, once per signature), then the median of the
call time over repetitions, against the NumPy/SciPy call on the same float32 data (ratio =
copapy / baseline, lower is faster for copapy), and the graph's operation count. Results are
checked against the baseline before timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.signal

import copapy as cp
from copapy.graph.traverse import live_nodes


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def operations(outs: Any) -> int:
    nodes = [n for o in (outs if isinstance(outs, tuple) else (outs,)) for n in o.nodes()] \
        if not isinstance(outs, cp.Value) else [outs.node]
    return sum(1 for n in live_nodes(nodes) if n.args)


ROWS: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[tuple[int, ...], ...]]] = [
    ("sort n=16", cp.sort, np.sort, ((16,),)),
    ("sort n=64", cp.sort, np.sort, ((64,),)),
    ("sort n=256", cp.sort, np.sort, ((256,),)),
    ("argsort n=64", cp.argsort, lambda a: np.argsort(a, kind="stable"), ((64,),)),
    ("convolve 4096*9 same", lambda a, k: cp.convolve(a, k, "same"),
     lambda a, k: np.convolve(a, k, "same"), ((4096,), (9,))),
    ("conv2d 32x32*3x3 valid", cp.conv2d, lambda a, k: scipy.signal.convolve2d(a, k, "valid"),
     ((32, 32), (3, 3))),
    ("conv2d 256x256*3x3 valid", cp.conv2d,
     lambda a, k: scipy.signal.convolve2d(a, k, "valid"), ((256, 256), (3, 3))),
    ("conv2d 256x256*5x5 same", lambda a, k: cp.conv2d(a, k, "same"),
     lambda a, k: scipy.signal.convolve2d(a, k, "same"), ((256, 256), (5, 5))),
    ("max_pool2d 256x256 /2", lambda a: cp.max_pool2d(a, 2),
     lambda a: a.reshape(128, 2, 128, 2).max(axis=(1, 3)), ((256, 256),)),
    ("avg_pool2d 256x256 /2", lambda a: cp.avg_pool2d(a, 2),
     lambda a: a.reshape(128, 2, 128, 2).mean(axis=(1, 3)), ((256, 256),)),
    ("sum axis=0 1000x64", lambda a: a.sum(axis=0), lambda a: a.sum(axis=0), ((1000, 64),)),
    ("sum axis=1 1000x64", lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), ((1000, 64),)),
    ("broadcast (256,1,3)+(64,3)", lambda a, b: a + b, lambda a, b: a + b,
     ((256, 1, 3), (64, 3))),
    ("broadcast image 512x512x3 * gain (3,)", lambda a, b: a * b, lambda a, b: a * b,
     ((512, 512, 3), (3,))),
    # axis permutations: one level gather (two for the 4-D reversal)
    ("transpose 1000x1000 .T", lambda a: a.T, lambda a: np.ascontiguousarray(a.T),
     ((1000, 1000),)),
    ("transpose 16x32x32x8 (3,2,1,0)", lambda a: a.transpose(3, 2, 1, 0),
     lambda a: np.ascontiguousarray(a.transpose(3, 2, 1, 0)), ((16, 32, 32, 8),)),
    ("sum axis=(0,2) 64x64x64", lambda a: a.sum(axis=(0, 2)), lambda a: a.sum(axis=(0, 2)),
     ((64, 64, 64),)),
]


def bench_row(name: str, ours: Callable[..., Any], theirs: Callable[..., Any],
              shapes: tuple[tuple[int, ...], ...], repeat: int) -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    f = cp.jit(ours)
    t0 = time.perf_counter()
    got = f(*args)
    first = time.perf_counter() - t0
    want = theirs(*args)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=1e-4)
    traced = ours(*[cp.value(a, packed=True) for a in args])
    ops = operations(traced)
    t_cp = median_time(lambda: f(*args), repeat)
    t_np = median_time(lambda: theirs(*args), repeat)
    print(f"| {name} | {first * 1e3:.0f} | {ops} | {t_cp * 1e6:.1f} | {t_np * 1e6:.1f} | "
          f"{t_cp / t_np:.2f} |")


REGROUPED: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("(x+1)+(y+2)", lambda x, y: (x + 1) + (y + 2)),
    ("2*x+3*x", lambda x, y: 2 * x + 3 * x),
    ("(x*2)*(y*3)", lambda x, y: (x * 2) * (y * 3)),
    ("((x+1)+y)+2", lambda x, y: ((x + 1) + y) + 2),
    ("x*5-2*x+y", lambda x, y: x * 5 - 2 * x + y),
    ("(x+1)+(y+2)+(x+3)", lambda x, y: (x + 1) + (y + 2) + (x + 3)),
]


def regrouping_counts() -> None:
    print("| expression | float32 (default: as written) | int32 | float32, reassociate_floats "
          "| float64, reassociate_floats |")
    print("|---|---|---|---|---|")
    for name, expr in REGROUPED:
        written = operations(expr(cp.value(1.0), cp.value(2.0)))
        ints = operations(expr(cp.value(1), cp.value(2)))
        with cp.simplify_options(reassociate_floats=True):
            floats = operations(expr(cp.value(1.0), cp.value(2.0)))
            doubles = operations(expr(cp.value(1.0, cp.float64), cp.value(2.0, cp.float64)))
        print(f"| `{name}` | {written} | {ints} | {floats} | {doubles} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", help="only the rows whose name contains this text")
    args = parser.parse_args()
    repeat = 5 if args.quick else 21
    regrouping_counts()
    print()
    print("| operation | first call ms | operations | copapy µs | NumPy/SciPy µs | ratio |")
    print("|---|---|---|---|---|---|")
    for row in ROWS:
        if args.rows is None or args.rows in row[0]:
            bench_row(*row, repeat=repeat)


if __name__ == "__main__":
    main()
