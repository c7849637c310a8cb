"""Benchmark: element-wise float32 operations and the expression sqrt(a*a+b*b)*0.5+sin(a), in
copapy (@cp.jit, packed arrays, both x86_64 tables) and the strongest baselines, measured
side by side in one process: every repetition runs every variant once, in a shuffled order,
and the tables give medians and ratios (the machine is shared: compare ratios).

    python benchmarks/bench_elementwise.py            # sizes 1e3, 1e5, 1e6
    python benchmarks/bench_elementwise.py --quick    # fewer repetitions
    python benchmarks/bench_elementwise.py --plot benchmarks/elementwise.png   # and a chart

Variants (each called with the same NumPy float32 inputs, writing or returning a float32 array):
  cp x86_64     @cp.jit(arch="x86_64"), the SSE2 stencil table, result as a view (map_to_numpy)
  cp x86_64-v3  @cp.jit(arch="x86_64-v3"), the AVX2 table (same bits); skipped without AVX2
  cp x86_64-v4  @cp.jit(arch="x86_64-v4"), the AVX-512 table (same bits); skipped without it
  cp unfused    expr only: the best table with fused loops switched off (one pass per operation);
                a copapy cell whose program exceeds the in-process memory cap (unfused
                at 1e7) is skipped, "-", with the reason printed
  numpy         the NumPy expression (vectorised ufuncs, temporaries per operation)
  numba         @numba.njit loop over the elements into a preallocated output (default flags)
  numba fm      the same loop with fastmath=True
  C O3          gcc -O3 loop into a preallocated output (libm), called through ctypes
  C O3 fm       gcc -O3 -ffast-math
  C O3 nat      gcc -O3 -march=native
  C O3 fm nat   gcc -O3 -ffast-math -march=native
  C O3 fm v3    gcc -O3 -ffast-math -march=x86-64-v3 (AVX2, no AVX-512: the anchor of the
                x86_64-v3 table on a machine that has AVX-512 too)
  C fm v3 call  the same loop called once per Python call through ctypes (the buffers'
                addresses taken once), as a copapy call is; the C columns above run all calls
                of a repetition inside one C call, so they leave out the per-call cost that
                every copapy column pays (it dominates at 1e3)
  floor         the memory floor: the C loop o[i] = x[i] + y[i] (read two arrays, write one),
                -O3 -ffast-math -march=native
Every result is checked against a float64 NumPy reference (max error in float32 ulps printed),
and the two copapy tables against each other bit for bit.
"""

from __future__ import annotations

import argparse
import ctypes
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import copapy as cp
from copapy.arch.targets import host_variants
from copapy.compiler import fuse
from copapy.runtime.errors import ImageLoadError

Array = np.ndarray[Any, Any]
SIZES = [1_000, 100_000, 1_000_000]
# name -> (arity, copapy/NumPy expression of x (and y), C expression, float64 reference)
OPS: dict[str, tuple[int, Callable[..., Any], str]] = {
    "add": (2, lambda x, y: x + y, "x + y"),
    "mul": (2, lambda x, y: x * y, "x * y"),
    "sqrt": (1, lambda x: cp.sqrt(x), "sqrtf(x)"),
    "sin": (1, lambda x: cp.sin(x), "sinf(x)"),
    "cos": (1, lambda x: cp.cos(x), "cosf(x)"),
    "exp": (1, lambda x: cp.exp(x), "expf(x)"),
    "log": (1, lambda x: cp.log(x), "logf(x)"),
    "tanh": (1, lambda x: cp.tanh(x), "tanhf(x)"),
    "expr": (2, lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + cp.sin(x),
             "sqrtf(x * x + y * y) * 0.5f + sinf(x)"),
}
NP = {"add": np.add, "mul": np.multiply, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
      "exp": np.exp, "log": np.log, "tanh": np.tanh}
C_FLAGS = {"C O3": ["-O3"], "C O3 fm": ["-O3", "-ffast-math"],
           "C O3 nat": ["-O3", "-march=native"],
           "C O3 fm nat": ["-O3", "-ffast-math", "-march=native"],
           "C O3 fm v3": ["-O3", "-ffast-math", "-march=x86-64-v3"]}


def numpy_fn(op: str) -> Callable[..., Array]:
    if op == "expr":
        half = np.float32(0.5)
        return lambda x, y: np.sqrt(x * x + y * y) * half + np.sin(x)
    return NP[op]


def inputs(op: str, n: int) -> tuple[Array, ...]:
    rng = np.random.default_rng(n)
    lo = 1e-3 if op in ("sqrt", "log") else -10.0  # |a| < 10 (the issue's sin range)
    a = rng.uniform(lo, 10.0, n).astype(np.float32)
    b = rng.uniform(-10.0, 10.0, n).astype(np.float32)
    return (a, b) if OPS[op][0] == 2 else (a,)


def copapy_fn(op: str, arch: str) -> Callable[..., Array]:
    expr = OPS[op][1]

    @cp.jit(arch=arch)
    def f(*args: Any) -> Any:
        return cp.map_to_numpy(expr(*args))
    return f


def too_large(f: Callable[..., Any], args: tuple[Array, ...], label: str) -> bool:
    """Call ``f`` once (its compile); True, with the reason printed, when its program exceeds
    the in-process memory cap (the default 64 MiB, COPAPY_MAX_MEMORY): the cell is skipped
    ("-") instead of the run stopping. Unfused, every intermediate of n elements is an array
    in the program's memory (400 MB at 1e7 elements)."""
    try:
        f(*args)
    except ImageLoadError as exc:
        if getattr(exc, "name", None) != "TOO_LARGE":
            raise
        print(f"<!-- {label}: skipped, {exc} -->", flush=True)
        return True
    return False


def unfused_fn(op: str, arch: str, args: tuple[Array, ...]) -> Callable[..., Array] | None:
    """copapy_fn compiled (at its first call) with the fused loops switched off; None when
    its program is too large (see too_large)"""
    f = copapy_fn(op, arch)
    saved, fuse.ENABLED = fuse.ENABLED, False
    try:
        skip = too_large(f, args, f"cp unfused {op} n={args[0].size:.0e}")
    finally:
        fuse.ENABLED = saved
    return None if skip else f


def c_library(flags: list[str], tmp: Path) -> ctypes.CDLL:
    """op_<arity>(o, x, y, n, reps): the loop, reps times (timed as one call: no ctypes
    overhead per repetition)"""
    body = "\n".join(
        f"__attribute__((noinline)) void {op}_1x(float *restrict o, const float *restrict x_, "
        f"const float *restrict y_, int n) {{ for (int i = 0; i < n; i++) {{ float x = x_[i]; "
        f"float y = y_[i]; (void)y; o[i] = {c}; }} }}\n"
        f"void {op}_{arity}(float *o, const float *x, const float *y, int n, int reps) {{ "
        f"for (int r = 0; r < reps; r++) {{ {op}_1x(o, x, y, n); "
        f"__asm__ volatile(\"\" ::: \"memory\"); }} }}"
        for op, (arity, _, c) in OPS.items())
    src = tmp / "ops.c"
    src.write_text("#include <math.h>\n" + body + "\n")
    lib = tmp / f"ops{abs(hash(tuple(flags)))}.so"
    subprocess.run([shutil.which("gcc") or "cc", *flags, "-shared", "-fPIC", str(src), "-o",
                    str(lib), "-lm"], check=True)
    return ctypes.CDLL(str(lib))


class CLoop:
    """a C loop of the library: call(*args) once, run(args, number) number times in C"""

    def __init__(self, lib: ctypes.CDLL, op: str, n: int) -> None:
        self.fn = getattr(lib, f"{op}_{OPS[op][0]}")
        self.fn.restype = None
        self.fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_int]
        self.out = np.empty(n, np.float32)

    def run(self, args: tuple[Array, ...], number: int) -> None:
        y = args[1] if len(args) == 2 else args[0]
        self.fn(self.out.ctypes.data, args[0].ctypes.data, y.ctypes.data, len(self.out), number)

    def __call__(self, *args: Array) -> Array:
        self.run(args, 1)
        return self.out


class CCall:
    """a C loop of the library called once per Python call through ctypes, its buffers'
    addresses taken once: the per-call cost a Python caller of a C library pays"""

    def __init__(self, lib: ctypes.CDLL, op: str, args: tuple[Array, ...]) -> None:
        loop = CLoop(lib, op, args[0].size)
        self.fn, self.out = loop.fn, loop.out
        y = args[1] if len(args) == 2 else args[0]
        self.call = (self.out.ctypes.data, args[0].ctypes.data, y.ctypes.data, y.size, 1)

    def __call__(self, *args: Array) -> Array:
        self.fn(*self.call)
        return self.out


def numba_body(op: str) -> Callable[[Any, Any], Any]:
    """the element expression of op for numba (two operands; unary ones ignore y)"""
    half = np.float32(0.5)
    if op == "expr":
        return lambda x, y: np.sqrt(x * x + y * y) * half + np.sin(x)
    ufunc = NP[op]
    if OPS[op][0] == 2:
        return lambda x, y: ufunc(x, y)
    return lambda x, y: ufunc(x)


def numba_loop(numba: Any, body: Callable[[Any, Any], Any], fm: bool) -> Callable[..., Array]:
    """an explicit njit loop over the elements into the preallocated call.out"""
    elem = numba.njit(fastmath=fm, inline="always")(body)

    @numba.njit(fastmath=fm)
    def loop(o: Any, x: Any, y: Any) -> None:
        for i in range(o.shape[0]):
            o[i] = elem(x[i], y[i])

    def call(*args: Array) -> Array:
        out = call.out  # type: ignore[attr-defined]
        loop(out, args[0], args[1] if len(args) == 2 else args[0])
        return out
    return call


def numba_fns(op: str) -> dict[str, Callable[..., Array]]:
    try:
        import numba
    except ImportError:
        return {}
    body = numba_body(op)
    return {"numba": numba_loop(numba, body, False), "numba fm": numba_loop(numba, body, True)}


def ulps(got: Array, ref: Array, mag: Array) -> float:
    """max |got - ref| in float32 ulps of mag (the magnitude of the terms: ref itself for one
    operation, the sum of the absolute terms for the expression, where the result cancels)."""
    spacing = np.spacing(np.abs(mag).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - ref) / spacing))


def measure(variants: dict[str, Callable[..., Array]], args: tuple[Array, ...], reps: int,
            budget: float, clock: Callable[[], float] = time.thread_time) -> dict[str, float]:
    """median seconds per call, all variants interleaved in a shuffled order per repetition
    (a C loop runs its calls of one repetition inside C). The clock is this thread's CPU time
    by default: on a shared machine a call longer than a scheduler slice is preempted, which
    wall time charges to the slow variants only (every variant here runs on this thread)."""
    for f in variants.values():
        f(*args)
    t0 = time.perf_counter()
    variants[next(iter(variants))](*args)
    number = max(1, int(budget / max(time.perf_counter() - t0, 1e-7) / len(variants)))
    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for _ in range(reps):
        random.shuffle(order)
        for k in order:
            f = variants[k]
            t = clock()
            if isinstance(f, CLoop):
                f.run(args, number)
            else:
                for _ in range(number):
                    f(*args)
            times[k].append((clock() - t) / number)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--wall", action="store_true",
                    help="time by the wall clock (default: this thread's CPU time)")
    ap.add_argument("--plot", default="", metavar="PNG",
                    help="also draw ns per element against n, one panel per operation")
    opts = ap.parse_args()
    clock = time.perf_counter if opts.wall else time.thread_time
    reps, budget = (5, 0.01) if opts.quick else (15, 0.03)
    archs = ["x86_64", *host_variants()]
    #: op -> n -> variant -> ns per element (for the chart)
    results: dict[str, dict[int, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        libs = {name: c_library(flags, Path(tmp)) for name, flags in C_FLAGS.items()}
        print("| op | n | " + " | ".join(["cp " + a for a in archs] + ["cp unfused", "numpy",
              "numba", "numba fm", *C_FLAGS, "C fm v3 call"])
              + " | floor | cp/numpy | cp/numba | cp/numba fm | cp/C O3 fm nat | cp/cp unfused "
                "| v3/C O3 fm v3 | v3/C fm v3 call | cp/floor |")
        print("|" + "---|" * (16 + len(archs) + len(C_FLAGS)))
        for op in opts.ops.split(","):
            for n in map(int, opts.sizes.split(",")):
                args = inputs(op, n)
                variants: dict[str, Callable[..., Array]] = {
                    f"cp {a}": f for a in archs if not too_large(
                        f := copapy_fn(op, a), args, f"cp {a} {op} n={n:.0e}")}
                unfused = unfused_fn(op, archs[-1], args) if op == "expr" else None
                if unfused is not None:
                    variants["cp unfused"] = unfused
                ours = [k for k in variants if k.startswith("cp ")]
                variants["numpy"] = numpy_fn(op)
                for name, f in numba_fns(op).items():
                    f.out = np.empty(n, np.float32)  # type: ignore[attr-defined]
                    variants[name] = f
                for name, lib in libs.items():
                    variants[name] = CLoop(lib, op, n)
                variants["C fm v3 call"] = CCall(libs["C O3 fm v3"], op, args)
                floor = CLoop(libs["C O3 fm nat"], "add", n)
                a64 = [x.astype(np.float64) for x in args]
                with np.errstate(all="ignore"):
                    if op == "expr":
                        terms = (np.sqrt(a64[0] ** 2 + a64[1] ** 2) * 0.5, np.sin(a64[0]))
                        ref, mag = terms[0] + terms[1], np.abs(terms[0]) + np.abs(terms[1])
                    else:
                        ref = mag = NP[op](*a64)
                err = {k: ulps(np.array(f(*args)), ref, mag) for k, f in variants.items()}
                bits = [np.array(variants[k](*args)).view(np.uint32) for k in ours]
                assert all(np.array_equal(bits[0], o) for o in bits[1:]), op  # same bits
                t = measure({**variants, "floor": floor}, args, reps, budget, clock)
                results.setdefault(op, {})[n] = {k: v / n * 1e9 for k, v in t.items()}
                tables = [t[f"cp {a}"] for a in archs if f"cp {a}" in t]
                best = min(tables) if tables else 0.0  # 0: every table skipped, ratios "-"
                cols = [f"{t[k] / n * 1e9:.2f}" if k in t else "-" for k in
                        [*(f"cp {a}" for a in archs), "cp unfused", "numpy", "numba",
                         "numba fm", *C_FLAGS, "C fm v3 call", "floor"]]
                ratio = [f"{best / t[k]:.2f}" if k in t and best else "-" for k in
                         ("numpy", "numba", "numba fm", "C O3 fm nat", "cp unfused", "floor")]
                v3 = t.get("cp x86_64-v3")
                ratio[5:5] = [f"{v3 / t[k]:.2f}" if v3 else "-"
                              for k in ("C O3 fm v3", "C fm v3 call")]
                print(f"| {op} | {n:.0e} | " + " | ".join(cols + ratio) + " |", flush=True)
                bad = {k: round(e, 1) for k, e in err.items() if not e <= 4.0}
                if bad:
                    print(f"<!-- {op} n={n}: error above 4 ulp vs float64: {bad} -->")
    print(f"\nns per element ({'wall' if opts.wall else 'CPU'} time), medians; "
          "cp/X = best copapy table time / X time "
          "(below 1: copapy faster)")
    if opts.plot:
        plot(results, archs, opts.plot, "wall" if opts.wall else "CPU")
        print(f"\nchart: {opts.plot}")


def plot(results: dict[str, dict[int, dict[str, float]]], archs: list[str], path: str,
         clock: str) -> None:
    """One panel per operation: ns per element against n, log-log, every variant a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(results))
    rows = -(-len(results) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    every = list(dict.fromkeys(k for by_n in results.values() for t in by_n.values() for k in t))
    palette = [plt.get_cmap("tab20")(2 * k + light) for light in (0, 1) for k in range(10)]
    colour = {name: palette[k % 20] for k, name in enumerate(every)}
    lines: dict[str, Any] = {}
    for ax, (op, by_n) in zip(axes.flat, results.items(), strict=False):
        sizes = sorted(by_n)
        for name in every:
            if not all(name in by_n[n] for n in sizes):
                continue
            copapy = name.startswith("cp ")
            (lines[name],) = ax.plot(sizes, [by_n[n][name] for n in sizes], color=colour[name],
                                     marker="o" if copapy else ".",
                                     linewidth=2.2 if copapy else 1.0,
                                     linestyle="-" if copapy else "--", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("elements")
        ax.set_ylabel(f"ns per element ({clock} time)")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(results):]:
        ax.set_visible(False)
    fig.legend(list(lines.values()), list(lines), loc="lower center", ncol=min(6, len(lines)),
               fontsize=8)
    fig.suptitle(f"element-wise float32, copapy tables {', '.join(archs)} vs the baselines")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
