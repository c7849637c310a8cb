"""Code bytes, data bytes and compile time of x_{k+1} = A x_k + B u as one feedback signal,
unpacked (a state per element) and packed (one state slot), for n states (issue 30, item 1;
docs/decisions/2026-12-04-online-change-keep-state.md). Prints a Markdown table.

    python benchmarks/bench_signal_shapes.py
"""

from __future__ import annotations

import time

import numpy as np

import copapy as cp


def measure(n: int, packed: bool, repeat: int = 3) -> tuple[cp.LocalTarget, float]:
    """The deployed target and the best time of building and deploying the program."""
    rng = np.random.default_rng(n)
    a_np = (np.eye(n) + 0.01 * rng.standard_normal((n, n))).astype(np.float32)
    b_np = rng.standard_normal(n).astype(np.float32)
    best = float("inf")
    tg = cp.LocalTarget(tick=1e-3)
    for _ in range(repeat):
        u = cp.value(1.0)
        a, b = cp.matrix(a_np, packed=packed), cp.vector(b_np, packed=packed)
        t0 = time.perf_counter()
        x = cp.feedback(lambda s, a=a, b=b, u=u: a @ s + b * u, init=np.zeros(n, np.float32),
                        packed=packed)
        tg = cp.LocalTarget(tick=1e-3)
        tg.deploy(cp.Task(x, period=1e-3))
        best = min(best, time.perf_counter() - t0)
    return tg, best


def main() -> None:
    print("| n | form | operations | code bytes | data bytes | build + deploy ms (best of 3) |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in (4, 12, 32):
        for packed in (False, True):
            tg, best = measure(n, packed)
            info = tg.program_info
            print(f"| {n} | {'packed' if packed else 'unpacked'} | {info.op_count} | "
                  f"{info.code_bytes} | {info.data_bytes} | {best * 1e3:.1f} |")


if __name__ == "__main__":
    main()
