"""Target I/O: write a 100-element input, run, read the 100-element result (issue 32 item 3).

Usage:
    PYTHONPATH=src python benchmarks/bench_target_io.py [--rounds 15] [--calls 2000] [--n 100]

The program is the gradient of ``sum(x*x*0.5 + sin(x))`` for an unpacked float32 input ``x``
(one scalar chain per element). Rows, interleaved (every round measures each once, in turn):

  run alone        ``tg.run()``: the compiled code and one C call
  write+run+read   ``tg.write(x, xs); tg.run(); tg.read(g)`` with a float32 array ``xs``
  ... float64      the same with a float64 array (converted on the way in)
  jit              ``@cp.jit`` of the same gradient (packed input), called with ``xs``
  CasADi external  the same gradient from CasADi's generated C (gcc -O3), through
                   ``casadi.external`` (its own Python call), and through ctypes with
                   preallocated buffers (the least a Python call of that C can cost)

Per call: best, median and worst of the rounds, and each row's ratio to *run alone* and to
CasADi (ctypes). The goal of issue 32: write+run+read <= 2x run alone. The load average is
printed: on a shared machine compare ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import copapy as cp


def per_call(fn: Callable[[], Any], calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls


def casadi_rows(n: int, xs: Any, ref: Any, tmp: str) -> dict[str, Callable[[], Any]]:
    """CasADi's generated C of the gradient, compiled, called two ways (or nothing when CasADi
    or a C compiler is missing)."""
    try:
        import casadi
    except ImportError:
        return {}
    x = casadi.SX.sym("x", n)
    y = casadi.sum1(x * x * 0.5 + casadi.sin(x))
    fn = casadi.Function("grad_f", [x], [casadi.gradient(y, x)])
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        fn.generate("grad_f.c")
    finally:
        os.chdir(cwd)
    lib = os.path.join(tmp, "grad_f.so")
    subprocess.run(["gcc", "-O3", "-shared", "-fPIC", os.path.join(tmp, "grad_f.c"), "-o", lib],
                   check=True)
    ext = casadi.external("grad_f", lib)
    xd = xs.astype(np.float64)
    assert np.allclose(np.asarray(ext(xd)).reshape(-1), ref, rtol=1e-5)
    c = ctypes.CDLL(lib)
    c.grad_f.restype = ctypes.c_int
    out = np.zeros(n)
    args = (ctypes.c_void_p * 1)(xd.ctypes.data)
    res = (ctypes.c_void_p * 1)(out.ctypes.data)
    iw = (ctypes.c_longlong * 64)()
    w = (ctypes.c_double * 4096)()
    call = c.grad_f

    def via_ctypes() -> Any:
        xd[...] = xs
        call(args, res, iw, w, 0)
        return out.copy()

    assert np.allclose(via_ctypes(), ref, rtol=1e-5)
    return {"CasADi external": lambda: np.asarray(ext(xd)), "CasADi ctypes": via_ctypes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    n = args.n
    xs = np.linspace(0.0, 1.0, n, dtype=np.float32)
    x = cp.value(xs, packed=False)
    g = cp.grad((x * x * 0.5 + cp.sin(x)).sum(), x)
    tg = cp.LocalTarget()
    tg.compile(g)
    ref = xs.astype(np.float64) + np.cos(xs.astype(np.float64))

    def io32() -> Any:
        tg.write(x, xs)
        tg.run()
        return tg.read(g)

    x64 = xs.astype(np.float64)

    def io64() -> Any:
        tg.write(x, x64)
        tg.run()
        return tg.read(g)

    jitted = cp.jit(lambda v: cp.grad((v * v * 0.5 + cp.sin(v)).sum(), v))
    rows: dict[str, Callable[[], Any]] = {"run alone": tg.run, "write+run+read": io32,
                                          "write+run+read float64": io64,
                                          "jit": lambda: jitted(xs)}
    assert np.allclose(io32(), ref, rtol=1e-5) and np.allclose(jitted(xs), ref, rtol=1e-5)
    with tempfile.TemporaryDirectory() as tmp:
        rows.update(casadi_rows(n, xs, ref, tmp))
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, fn in rows.items():
                times[name].append(per_call(fn, args.calls))
    print(f"n = {n}, {args.rounds} rounds x {args.calls} calls, load average "
          f"{os.getloadavg()[0]:.2f}, arch {tg.arch}\n")
    base = min(times["run alone"])
    anchor = min(times["CasADi ctypes"]) if "CasADi ctypes" in times else None
    print("| | best µs | median µs | worst µs | best / run alone | best / CasADi ctypes |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, ts in times.items():
        best = min(ts)
        vs = f"{best / anchor:.2f}" if anchor else "-"
        print(f"| {name} | {best / 1e3:.2f} | {statistics.median(ts) / 1e3:.2f} | "
              f"{max(ts) / 1e3:.2f} | {best / base:.2f} | {vs} |")


if __name__ == "__main__":
    main()
