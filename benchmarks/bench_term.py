"""Benchmark: the term sum((v1 + i) @ v2 for i in range(10)) in every copapy form, NumPy, C
and numba — all measured in one run, side by side, as medians and ratios (this machine is
shared and noisy: compare ratios, not absolute times).

    python benchmarks/bench_term.py              # full run, prints markdown tables
    python benchmarks/bench_term.py --quick      # fewer repetitions
    python benchmarks/bench_term.py --plot benchmarks/term.png

Variants:
  scalar   copapy, v1/v2 as lists of cp.value (one stencil chain, registers across the chain)
  unpacked copapy, v1/v2 as unpacked input vectors (cp.value(array, packed=False)) and `@`:
           the dot products in the fixed lane order (graph/lanes.py) as scalar nodes
  packed   copapy, v1/v2 as packed input vectors (loop stencils, vectorised by the C compiler),
           through `tg.run()` of `LocalTarget()` (the widest stencil table this CPU runs:
           x86_64-v4 on AVX-512); "code alone": the same image's task called in a C loop
           (benchmarks/term_code.c, the runner linked in, timed as the C rows are), so the
           generated code is compared with C without the Python call; "base": the same on the
           base table (`LocalTarget(arch="x86_64")`, SSE2, what `tg.save()` writes)
  jit      @cp.jit of the same function, called with two NumPy float32 arrays
  numpy    the same expression on NumPy float32 arrays
  C -O3    plain C, sequential float32 sums, gcc -O3 (what the scalar form is compared with)
  C lanes  plain C in the lane order (8 accumulators, the fixed tree; what the unpacked form is
           compared with), gcc -O3, -O3 -march=native, and with -ffast-math (which may reorder)
  C fast   the same C with -O3 -ffast-math (vectorised reductions), and with
           -O3 -ffast-math -march=native (the packed goal of issue 13: <= 1.2x)
  numba    @numba.njit (default and fastmath=True), if numba is installed
"""

from __future__ import annotations

import argparse
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
from typing import Any

import numpy as np

import copapy as cp
from copapy.graph.lanes import np_dot
from copapy.runtime.load import fastest_host_architecture, host_architecture

SCALAR_SIZES = [10, 50, 100, 200, 500]
ROOT = Path(__file__).resolve().parent.parent
#: the lane-order C baselines of the unpacked form: row key -> gcc flags
LANE_FLAGS = {
    "cl_o3": ["-O3"],
    "cl_nat": ["-O3", "-march=native"],
    "cl_fast": ["-O3", "-ffast-math"],
    "cl_fast_nat": ["-O3", "-ffast-math", "-march=native"],
}
C_SOURCE = textwrap.dedent(
    """
    #include <stdio.h>
    #include <stdlib.h>
    #include <time.h>

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
        double t[9];
        for (int k = 0; k < 9; k++) {
            double t0 = now();
            for (long r = 0; r < reps; r++) {
                __asm__ volatile("" : : "r"(v1), "r"(v2) : "memory");
                sink = term(v1, v2, n);
            }
            t[k] = (now() - t0) / reps;
        }
        for (int a = 0; a < 9; a++) for (int b = a + 1; b < 9; b++)
            if (t[b] < t[a]) { double x = t[a]; t[a] = t[b]; t[b] = x; }
        printf("%.6e %.1f\\n", t[4], (double)sink);
        return 0;
    }
    """
)


#: the term in copapy's reduction order (graph/lanes.py): lane j sums the products of the
#: elements i = j mod 8 in increasing i, the lanes present are combined by the fixed tree
C_LANES_TERM = textwrap.dedent(
    """
    __attribute__((noinline)) float term(const float *v1, const float *v2, int n)
    {
        float s = 0.0f;
        for (int i = 0; i < 10; i++) {
            float acc[8];
            int lanes = n < 8 ? n : 8, j = 8;
            for (int k = 0; k < lanes; k++) acc[k] = (v1[k] + (float)i) * v2[k];
            for (; j + 8 <= n; j += 8)
                for (int k = 0; k < 8; k++) acc[k] += (v1[j + k] + (float)i) * v2[j + k];
            for (int k = 0; j + k < n; k++) acc[k] += (v1[j + k] + (float)i) * v2[j + k];
            while (lanes > 1) {
                int m = 0;
                for (int k = 0; k < lanes; k += 2, m++)
                    acc[m] = k + 1 < lanes ? acc[k] + acc[k + 1] : acc[k];
                lanes = m;
            }
            s += acc[0];
        }
        return s;
    }
    """
)


def build_c(flags: list[str], workdir: Path, lanes: bool = False) -> Path:
    exe = workdir / ("term_" + ("lanes_" if lanes else "")
                     + "_".join(f.strip("-").replace("=", "") for f in flags))
    src = workdir / ("term_lanes.c" if lanes else "term.c")
    source = C_SOURCE
    if lanes:
        start = source.index("__attribute__((noinline))")
        end = source.index("static double now")
        source = source[:start] + C_LANES_TERM.lstrip() + "\n" + source[end:]
    src.write_text(source)
    subprocess.run(["gcc", *flags, str(src), "-o", str(exe)], check=True)
    return exe


def time_c(exe: Path, n: int, quick: bool) -> tuple[float, float]:
    reps = max(10, int((20000 if quick else 100000) / n))
    out = subprocess.run([str(exe), str(n), str(reps)], capture_output=True, text=True, check=True)
    seconds, value = out.stdout.split()
    return float(seconds), float(value)


def build_code_runner(workdir: Path) -> Path:
    """benchmarks/term_code.c with the runner's sources and this machine's stencil tables (a
    LocalTarget's image is format 2, linked by the runner from its tables; without them the
    load fails): runs an image's task in a C loop."""
    exe = workdir / "term_code"
    runner = sorted(str(p) for p in (ROOT / "runner" / "src").glob("[a-z]*.c"))
    runner += sorted(str(p) for p in (ROOT / "runner" / "tables").glob(
        f"{host_architecture()}*.c"))
    subprocess.run(["gcc", "-std=c11", "-O2", "-DCP_WITH_TABLE", f"-I{ROOT / 'runner' / 'include'}",
                    f"-I{ROOT / 'runner' / 'src'}", "-pthread",
                    str(ROOT / "benchmarks" / "term_code.c"), *runner, "-o", str(exe)], check=True)
    return exe


def time_code(exe: Path, tg: cp.LocalTarget, term: Any, workdir: Path, n: int,
              quick: bool) -> tuple[float, float]:
    """Seconds per run of ``tg``'s program in a C loop (as time_c times C), and its result."""
    image = workdir / f"term_{tg.arch}_{n}.img"
    image.write_bytes(tg.image)
    offset = tg.program_info.ports[term.node].offset
    reps = max(10, int((20000 if quick else 100000) / n))
    out = subprocess.run([str(exe), str(image), str(offset), str(reps)], capture_output=True,
                         text=True, check=True)
    seconds, value = out.stdout.split()
    return float(seconds), float(value)


def median_call(fn: Callable[[], object], quick: bool) -> float:
    """Median seconds per call over repeated batches."""
    number = 1
    while timeit.timeit(fn, number=number) < (0.005 if quick else 0.02):
        number *= 4
    runs = timeit.repeat(fn, number=number, repeat=5 if quick else 11)
    return statistics.median(runs) / number


def dot(a: list[Any], b: list[Any]) -> Any:
    s = a[0] * b[0]
    for x, y in zip(a[1:], b[1:], strict=True):
        s = s + x * y
    return s


def expected(n: int) -> float:
    return float(sum(sum((j + i) * 5.0 for j in range(n)) for i in range(10)))


def term_expr(v1: Any, v2: Any) -> Any:
    return sum((v1 + i) @ v2 for i in range(10))


def scalar_term(n: int) -> Any:
    """The term over scalar ``cp.value`` inputs (v1 = 0, 1, ..., v2 = 5), the dot product a
    Python loop over scalars: one stencil chain; its value is ``expected(n)``."""
    v1 = [cp.value(float(j)) for j in range(n)]
    v2 = [cp.value(5.0) for _ in range(n)]
    return sum((dot([x + i for x in v1], v2) for i in range(10)), cp.constant(0.0))


def packed_term(n: int) -> Any:
    """The same term with v1, v2 as packed input vectors (array stencils, a fused dot per i)."""
    v1 = cp.value(np.arange(n, dtype=np.float32), packed=True)
    v2 = cp.value(np.full(n, 5.0, np.float32), packed=True)
    return term_expr(v1, v2)


def unpacked_term(n: int) -> Any:
    """The term with v1, v2 as unpacked input vectors (one scalar input per element; ``@``
    builds the lane order of graph/lanes.py from scalar nodes)."""
    v1 = cp.value(np.arange(n, dtype=np.float32), packed=False)
    v2 = cp.value(np.full(n, 5.0, np.float32), packed=False)
    return term_expr(v1, v2)


def lane_reference(n: int) -> float:
    """The term in the lane order on NumPy float32 (graph/lanes.np_dot), summed as copapy does."""
    a1 = np.arange(n, dtype=np.float32)
    a2 = np.full(n, 5.0, np.float32)
    total = np.float32(0.0)
    for i in range(10):
        total = np.float32(total + np_dot(np, a1 + np.float32(i), a2))
    return float(total)


def scalar_variant(n: int) -> tuple[cp.LocalTarget, Any, float]:
    term = scalar_term(n)
    tg = cp.LocalTarget()
    t0 = time.perf_counter()
    tg.compile(term)
    return tg, term, time.perf_counter() - t0


def traced_variant(make: Callable[[int], Any], n: int) -> tuple[cp.LocalTarget, Any, float]:
    """A target running ``make(n)`` and the seconds tracing and compiling took."""
    t0 = time.perf_counter()
    term = make(n)
    tg = cp.LocalTarget()
    tg.compile(term)
    return tg, term, time.perf_counter() - t0


def numba_functions() -> dict[str, Callable[[np.ndarray, np.ndarray], float]]:
    try:
        import numba
    except ImportError:
        return {}

    def py_term(v1: np.ndarray, v2: np.ndarray) -> float:
        s = np.float32(0.0)
        for i in range(10):
            s += np.dot(v1 + np.float32(i), v2)
        return s

    return {"numba": numba.njit(py_term), "numba fastmath": numba.njit(fastmath=True)(py_term)}


def import_time() -> float:
    code = "import time; t = time.perf_counter(); import copapy; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout) for _ in range(7)]
    return statistics.median(times)


def compile_rate(nodes: int) -> float:
    """Microseconds per graph node for compiling a chain of about ``nodes`` operations."""
    xs = [cp.value(float(j)) for j in range(8)]
    acc = xs[0]
    for k in range(nodes):
        acc = acc * xs[k % 8] + xs[(k + 3) % 8] if k % 2 else acc - xs[k % 8]
    tg = cp.LocalTarget()
    t0 = time.perf_counter()
    tg.compile(acc)
    return (time.perf_counter() - t0) / tg.program_info.op_count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plot", default="")
    args = parser.parse_args()
    quick = args.quick
    numbas = numba_functions()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        c_o3 = build_c(["-O3"], Path(tmp))
        c_fast = build_c(["-O3", "-ffast-math"], Path(tmp))
        c_fast_nat = build_c(["-O3", "-ffast-math", "-march=native"], Path(tmp))
        code_runner = build_code_runner(Path(tmp))
        wide, base = fastest_host_architecture(), host_architecture()
        c_lanes = {key: build_c(flags, Path(tmp), lanes=True) for key, flags in LANE_FLAGS.items()}
        jitted = cp.jit(term_expr)
        for n in SCALAR_SIZES:
            want = expected(n)
            a1 = np.arange(n, dtype=np.float32)
            a2 = np.full(n, 5.0, dtype=np.float32)
            row: dict[str, Any] = {"n": n}
            tg_s, term_s, row["compile_scalar"] = scalar_variant(n)
            tg_s.run()
            assert tg_s.read(term_s) == want
            tg_p, term_p, row["compile_packed"] = traced_variant(packed_term, n)
            tg_p.run()
            assert tg_p.read(term_p) == want, (tg_p.read(term_p), want)
            assert tg_p.arch == wide
            term_b = packed_term(n)
            tg_b = cp.LocalTarget(arch=base)
            tg_b.compile(term_b)
            tg_b.run()
            assert tg_b.read(term_b) == want, (tg_b.read(term_b), want)
            tg_u, term_u, row["compile_unpacked"] = traced_variant(unpacked_term, n)
            tg_u.run()
            assert tg_u.read(term_u) == want == lane_reference(n), (tg_u.read(term_u), want)
            jitted.cache_clear()
            t0 = time.perf_counter()
            assert jitted(a1, a2) == want
            row["jit_first"] = time.perf_counter() - t0
            assert float(sum((a1 + i) @ a2 for i in range(10))) == want
            for _name, fn in numbas.items():
                fn(a1, a2)  # compile outside the timing
            row["scalar"] = median_call(tg_s.run, quick)
            row["packed"] = median_call(tg_p.run, quick)
            row["packed_base"] = median_call(tg_b.run, quick)
            row["unpacked"] = median_call(tg_u.run, quick)
            row["jit"] = median_call(lambda a1=a1, a2=a2: jitted(a1, a2), quick)
            row["numpy"] = median_call(lambda a1=a1, a2=a2: sum((a1 + i) @ a2 for i in range(10)),
                                       quick)
            for name, fn in numbas.items():
                row[name] = median_call(lambda fn=fn, a1=a1, a2=a2: fn(a1, a2), quick)
            row["c_o3"], c_val = time_c(c_o3, n, quick)
            row["c_fast"], _ = time_c(c_fast, n, quick)
            row["c_fast_nat"], fast_val = time_c(c_fast_nat, n, quick)
            assert fast_val == want
            for key, tg_c, term_c in (("code", tg_p, term_p), ("code_base", tg_b, term_b)):
                row[key], code_val = time_code(code_runner, tg_c, term_c, Path(tmp), n, quick)
                assert code_val == want, (key, code_val, want)
            assert c_val == want
            for key, exe in c_lanes.items():
                row[key], lane_val = time_c(exe, n, quick)
                assert lane_val == want, (key, lane_val, want)
            row["info_u"] = tg_u.program_info
            row["info_s"] = tg_s.program_info
            row["info_p"] = tg_p.program_info
            rows.append(row)

    us = 1e6
    print("\n## Term sum((v1 + i) @ v2 for i in range(10)): time per evaluation (median µs)\n")
    head = ["v_size", "scalar", "packed", "jit", "NumPy", "C -O3", "C fast-math",
            *[k for k in numbas]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for r in rows:
        cells = [r["n"], r["scalar"] * us, r["packed"] * us, r["jit"] * us, r["numpy"] * us,
                 r["c_o3"] * us, r["c_fast"] * us, *[r[k] * us for k in numbas]]
        print("| " + " | ".join(str(c) if isinstance(c, int) else f"{c:.3f}" for c in cells)
              + " |")
    print("\n### Ratios (lower is faster for copapy)\n")
    print("| v_size | scalar/C -O3 | base/C fast-math (both SSE2) | scalar/NumPy | packed/NumPy "
          "| jit/NumPy"
          + (" | jit/numba fastmath" if numbas else "") + " |")
    print("|---:|---:|---:|---:|---:|---:|" + ("---:|" if numbas else ""))
    for r in rows:
        extra = f" | {r['jit'] / r['numba fastmath']:.2f}" if numbas else ""
        print(f"| {r['n']} | {r['scalar'] / r['c_o3']:.2f} | "
              f"{r['packed_base'] / r['c_fast']:.2f} | "
              f"{r['scalar'] / r['numpy']:.3f} | {r['packed'] / r['numpy']:.3f} | "
              f"{r['jit'] / r['numpy']:.3f}{extra} |")
    print("\n### Unpacked `@` vs C in the same lane order (median µs, ratios)\n")
    print("| v_size | unpacked | C lanes -O3 | -O3 -march=native | -O3 -ffast-math | "
          "-O3 -ffast-math -march=native | unpacked/C lanes -O3 | unpacked/C lanes native | "
          "packed (same run) | unpacked/packed | stencils | unpacked compile ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        u = r["info_u"]
        print(f"| {r['n']} | {r['unpacked'] * us:.3f} | {r['cl_o3'] * us:.3f} | "
              f"{r['cl_nat'] * us:.3f} | {r['cl_fast'] * us:.3f} | {r['cl_fast_nat'] * us:.3f} | "
              f"{r['unpacked'] / r['cl_o3']:.2f} | {r['unpacked'] / r['cl_nat']:.2f} | "
              f"{r['packed'] * us:.3f} | {r['unpacked'] / r['packed']:.2f} | "
              f"{u.stencil_count} | {r['compile_unpacked'] * 1e3:.1f} |")
    print(f"\n### Packed against C -O3 -ffast-math -march=native (median µs, ratios; *code*: the "
          f"image's task in a C loop, no Python call; packed: LocalTarget(), here {wide}; "
          f"base: {base})\n")
    print("| v_size | packed tg.run() | packed code alone | base tg.run() | base code alone | "
          "C fm native | C lanes fm native | run / C fm nat | code / C fm nat | "
          "base run / C fm nat | base code / C fm nat | run / C lanes fm nat | "
          "code / C lanes fm nat |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']} | {r['packed'] * us:.3f} | {r['code'] * us:.3f} | "
              f"{r['packed_base'] * us:.3f} | {r['code_base'] * us:.3f} | "
              f"{r['c_fast_nat'] * us:.3f} | {r['cl_fast_nat'] * us:.3f} | "
              f"{r['packed'] / r['c_fast_nat']:.2f} | {r['code'] / r['c_fast_nat']:.2f} | "
              f"{r['packed_base'] / r['c_fast_nat']:.2f} | "
              f"{r['code_base'] / r['c_fast_nat']:.2f} | {r['packed'] / r['cl_fast_nat']:.2f} | "
              f"{r['code'] / r['cl_fast_nat']:.2f} |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    print("\n### Compile time and code size\n")
    print("| v_size | scalar compile ms | packed compile ms | jit first call ms | scalar ops | "
          "scalar stencils | scalar code B | B per op | packed stencils | packed code B |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        s, p = r["info_s"], r["info_p"]
        print(f"| {r['n']} | {r['compile_scalar'] * 1e3:.1f} | {r['compile_packed'] * 1e3:.2f} | "
              f"{r['jit_first'] * 1e3:.2f} | {s.op_count} | {s.stencil_count} | {s.code_bytes} | "
              f"{s.stencil_bytes / s.op_count:.1f} | {p.stencil_count} | {p.code_bytes} |")

    x = cp.value(1.0)
    tg = cp.LocalTarget()
    tg.compile(x + 1.0)
    from copapy import _runner

    trivial = cp.jit(lambda v: v + 1.0)
    trivial(2.0)
    overheads = [
        ("`tg.run()` on a trivial program", median_call(tg.run, quick)),
        ("no-op C-extension call (`_runner.noop()`)", median_call(_runner.noop, quick)),
        ("`tg.read(x)`", median_call(lambda: tg.read(x), quick)),
        ("`tg.write(x, 2.0)`", median_call(lambda: tg.write(x, 2.0), quick)),
        ("trivial `@cp.jit` call (`x + 1.0` on a float)", median_call(lambda: trivial(2.0), quick)),
    ]
    if numbas:
        import numba

        nb_trivial = numba.njit(lambda v: v + 1.0)
        nb_trivial(2.0)
        overheads.append(("trivial numba call, same function",
                          median_call(lambda: nb_trivial(2.0), quick)))
    print("\n## Call overheads (median)\n")
    print("| what | µs |\n|---|---:|")
    for name, t in overheads:
        print(f"| {name} | {t * us:.3f} |")
    print(f"\n`import copapy`: {import_time() * 1e3:.1f} ms (median of 7 fresh interpreters)")
    print("\n## Compile time per graph node (scalar chains)\n")
    print("| nodes | µs per node |\n|---:|---:|")
    for nodes in (1000, 16000):
        print(f"| {nodes} | {compile_rate(nodes):.1f} |")
    print(f"\nmachine: {os.uname().machine}, {os.cpu_count()} cores, Python "
          f"{sys.version.split()[0]}, NumPy {np.__version__}"
          + (f", numba {__import__('numba').__version__}" if numbas else ""))
    if args.plot:
        plot(rows, list(numbas), args.plot)
        print(f"\nchart: {args.plot}")


def plot(rows: list[dict[str, Any]], numbas: list[str], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, label in [("scalar", "copapy scalar"), ("unpacked", "copapy unpacked @"),
                       ("packed", "copapy packed"), ("cl_o3", "C -O3, lane order"),
                       ("jit", "copapy @jit"), ("numpy", "NumPy"), ("c_o3", "C -O3"),
                       ("c_fast", "C -O3 -ffast-math"), *[(k, k) for k in numbas]]:
        ax.plot(sizes, [r[key] * 1e6 for r in rows], marker="o", label=label)
    ax.set_xlabel("v_size")
    ax.set_ylabel("µs per evaluation (median)")
    ax.set_yscale("log")
    ax.set_title("sum((v1 + i) @ v2 for i in range(10))")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
