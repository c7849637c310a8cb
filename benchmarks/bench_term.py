"""Benchmark: the term sum((v1 + i) @ v2 for i in range(10)) in copapy, NumPy and plain C.

Everything is measured in one run, side by side, and reported as medians and ratios (this
machine is shared and noisy; ratios are what to compare).

    python benchmarks/bench_term.py            # full table
    python benchmarks/bench_term.py --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import numpy as np

import copapy as cp

SIZES = [10, 100, 500]
C_SOURCE = textwrap.dedent(
    """
    #include <stdint.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <time.h>

    /* the same float32 computation, same order: sequential dot products summed over i */
    __attribute__((noinline)) float term(const float *v1, const float *v2, int n)
    {
        float s = 0.0f;
        for (int i = 0; i < 10; i++) {
            float d = 0.0f;
            for (int j = 0; j < n; j++) {
                d += (v1[j] + (float)i) * v2[j];
            }
            s += d;
        }
        return s;
    }

    static double now(void)
    {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec + 1e-9 * t.tv_nsec;
    }

    int main(int argc, char **argv)
    {
        int n = atoi(argv[1]);
        long reps = atol(argv[2]);
        float *v1 = malloc(n * sizeof(float)), *v2 = malloc(n * sizeof(float));
        for (int j = 0; j < n; j++) { v1[j] = (float)j; v2[j] = 5.0f; }
        volatile float sink = 0.0f;
        double best[9];
        for (int k = 0; k < 9; k++) {
            double t0 = now();
            for (long r = 0; r < reps; r++) {
                __asm__ volatile("" : : "r"(v1), "r"(v2) : "memory");
                sink = term(v1, v2, n);
            }
            best[k] = (now() - t0) / reps;
        }
        for (int a = 0; a < 9; a++) for (int b = a + 1; b < 9; b++)
            if (best[b] < best[a]) { double t = best[a]; best[a] = best[b]; best[b] = t; }
        printf("%.6e %.1f\\n", best[4], (double)sink);
        return 0;
    }
    """
)


def build_c(flags: list[str], workdir: Path) -> Path:
    exe = workdir / ("term_" + "_".join(f.strip("-").replace("=", "") for f in flags))
    src = workdir / "term.c"
    src.write_text(C_SOURCE)
    subprocess.run(["gcc", *flags, str(src), "-o", str(exe)], check=True)
    return exe


def time_c(exe: Path, n: int, quick: bool) -> tuple[float, float]:
    reps = max(10, int((20000 if quick else 100000) / n))
    out = subprocess.run([str(exe), str(n), str(reps)], capture_output=True, text=True, check=True)
    seconds, value = out.stdout.split()
    return float(seconds), float(value)


def median_call(fn: Callable[[], object], quick: bool) -> float:
    """Median seconds per call over repeated batches."""
    number = 1
    while True:
        t = timeit.timeit(fn, number=number)
        if t > (0.005 if quick else 0.02):
            break
        number *= 4
    runs = timeit.repeat(fn, number=number, repeat=5 if quick else 11)
    return statistics.median(runs) / number


def dot(a: list[cp.Value], b: list[cp.Value]) -> cp.Value:
    s = a[0] * b[0]
    for x, y in zip(a[1:], b[1:], strict=True):
        s = s + x * y
    return s


def scalar_term(n: int) -> tuple[cp.Value, list[cp.Value], list[cp.Value]]:
    v1 = [cp.value(float(j)) for j in range(n)]
    v2 = [cp.value(5.0) for _ in range(n)]
    return sum((dot([x + i for x in v1], v2) for i in range(10)), cp.constant(0.0)), v1, v2


def import_time() -> float:
    code = "import time; t = time.perf_counter(); import copapy; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout) for _ in range(7)]
    return statistics.median(times)


def compile_rate(nodes: int) -> float:
    """Microseconds per graph node for compiling a chain of roughly ``nodes`` operations."""
    xs = [cp.value(float(j)) for j in range(8)]
    acc = xs[0]
    for k in range(nodes):
        acc = acc * xs[k % 8] + xs[(k + 3) % 8] if k % 2 else acc - xs[k % 8]
    tg = cp.LocalTarget()
    t0 = time.perf_counter()
    tg.compile(acc)
    elapsed = time.perf_counter() - t0
    return elapsed / tg.program_info.op_count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    quick = args.quick
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        c_o3 = build_c(["-O3"], Path(tmp))
        c_native = build_c(["-O3", "-march=native"], Path(tmp))
        for n in SIZES:
            term, v1, v2 = scalar_term(n)
            tg = cp.LocalTarget()
            t0 = time.perf_counter()
            tg.compile(term)
            compile_s = time.perf_counter() - t0
            tg.run()
            expected = float(sum(sum((j + i) * 5.0 for j in range(n)) for i in range(10)))
            assert tg.read(term) == expected, (tg.read(term), expected)
            t_cp = median_call(tg.run, quick)
            a1 = np.arange(n, dtype=np.float32)
            a2 = np.full(n, 5.0, dtype=np.float32)
            assert float(sum((a1 + i) @ a2 for i in range(10))) == expected
            t_np = median_call(lambda a1=a1, a2=a2: sum((a1 + i) @ a2 for i in range(10)), quick)
            t_c, c_val = time_c(c_o3, n, quick)
            t_cn, _ = time_c(c_native, n, quick)
            assert c_val == expected
            info = tg.program_info
            rows.append((n, t_cp, t_np, t_c, t_cn, compile_s, info))
    print(f"\n## Term sum((v1 + i) @ v2 for i in range(10)), scalar form (median µs per run)\n")
    print("| v_size | copapy | NumPy | C -O3 | C -O3 -march=native | copapy/C -O3 | copapy/NumPy "
          "| compile ms | ops | stencils | code B | B/stencil |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, t_cp, t_np, t_c, t_cn, compile_s, info in rows:
        print(f"| {n} | {t_cp * 1e6:.3f} | {t_np * 1e6:.2f} | {t_c * 1e6:.3f} | {t_cn * 1e6:.3f} "
              f"| {t_cp / t_c:.2f} | {t_cp / t_np:.3f} | {compile_s * 1e3:.1f} | {info.op_count} "
              f"| {info.stencil_count} | {info.code_bytes} "
              f"| {info.stencil_bytes / info.stencil_count:.1f} |")
    # call overheads
    x = cp.value(1.0)
    tg = cp.LocalTarget()
    tg.compile(x + 1.0)
    from copapy import _runner

    t_run = median_call(tg.run, quick)
    t_noop = median_call(_runner.noop, quick)
    noop_lib = ctypes.CDLL(None)
    t_ctypes = median_call(noop_lib.getpid, quick)
    t_read = median_call(lambda: tg.read(x), quick)
    t_write = median_call(lambda: tg.write(x, 2.0), quick)
    print("\n## Call overheads (median)\n")
    print("| what | µs |\n|---|---:|")
    print(f"| `tg.run()` on a trivial program | {t_run * 1e6:.3f} |")
    print(f"| no-op C-extension call (`_runner.noop()`) | {t_noop * 1e6:.3f} |")
    print(f"| ctypes call of `getpid` (for scale) | {t_ctypes * 1e6:.3f} |")
    print(f"| `tg.read(x)` | {t_read * 1e6:.3f} |")
    print(f"| `tg.write(x, 2.0)` | {t_write * 1e6:.3f} |")
    print(f"\n`tg.run()` − no-op call: {(t_run - t_noop) * 1e9:.0f} ns")
    imp = import_time()
    print(f"\n`import copapy`: {imp * 1e3:.1f} ms (median of 7 fresh interpreters)")
    print("\n## Compile time per graph node\n")
    print("| nodes | µs per node |\n|---:|---:|")
    for nodes in (1000, 16000):
        print(f"| {nodes} | {compile_rate(nodes):.1f} |")
    print(f"\nmachine: {os.uname().machine}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
          f"NumPy {np.__version__}")


if __name__ == "__main__":
    main()
