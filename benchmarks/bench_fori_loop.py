"""cp.fori_loop against the unrolled loop: code bytes and compile time at n = 10, 100, 1000,
and the results bit for bit (issue 30 item 4).

    PYTHONPATH=src python benchmarks/bench_fori_loop.py [--repeat 3]

The body is one Gauss-Newton-like step on a 2-state problem (a few multiplies, a division, a
sine). Prints code bytes, image bytes and compile time (best of --repeat) for both forms and
the ratios unrolled / loop; the loop's code and compile time should be flat in n. Also the
run time per iteration (a whole run divided by n, best of --repeat) and the ratio loop /
unrolled: the loop's overhead (the state copies, the counter's stencils).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import copapy as cp
from copapy import _runner
from copapy.compiler.program import compile_program


def body_of(a: Any, b: Any) -> Any:
    def body(s: tuple[Any, Any]) -> tuple[Any, Any]:
        x, y = s
        r = a * x - cp.sin(y) - b
        return x - r / (a + 0.1 * y * y), y + 0.05 * r * x
    return body


def build(n: int, loop: bool) -> list[Any]:
    a, b = cp.value(1.3, name="a"), cp.value(0.4, name="b")
    init = (cp.value(1.0, name="x0"), cp.value(0.5, name="y0"))
    body = body_of(a, b)
    if loop:
        x, y = cp.fori_loop(n, body, init)
    else:
        x, y = init
        for _ in range(n):
            x, y = body((x, y))
    return [x.node, y.node]


def measure(n: int, loop: bool, repeat: int) -> tuple[int, int, float, list[bytes], float]:
    best = float("inf")
    for _ in range(repeat):
        outs = build(n, loop)
        t0 = time.perf_counter()
        compiled = compile_program(outs, "x86_64")
        best = min(best, time.perf_counter() - t0)
    prog = _runner.load(compiled.image)  # the verifying runner (format 2)
    prog.run(0)
    raws = [np.float32(prog.read(compiled.ports[o].offset, o.dtype.code)).tobytes()
            for o in outs]
    runs = max(1, 20000 // n)
    run_best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(runs):
            prog.run(0)
        run_best = min(run_best, (time.perf_counter() - t0) / runs)
    return compiled.code_bytes, len(compiled.image), best, raws, run_best / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'n':>5} | {'loop code B':>11} {'image B':>8} {'compile ms':>10} "
          f"{'ns/iter':>8} | {'unrolled code B':>15} {'image B':>8} {'compile ms':>10} "
          f"{'ns/iter':>8} | {'code ratio':>10} {'compile ratio':>13} {'run ratio':>9} | "
          f"same bits")
    for n in (10, 100, 1000):
        lc, li, lt, lr, lrun = measure(n, True, args.repeat)
        uc, ui, ut, ur, urun = measure(n, False, args.repeat)
        print(f"{n:>5} | {lc:>11} {li:>8} {lt * 1e3:>10.2f} {lrun * 1e9:>8.1f} | {uc:>15} "
              f"{ui:>8} {ut * 1e3:>10.2f} {urun * 1e9:>8.1f} | {uc / lc:>10.1f} "
              f"{ut / lt:>13.1f} {lrun / urun:>9.2f} | {lr == ur}")


if __name__ == "__main__":
    main()
