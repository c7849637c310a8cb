"""Strided slices under @cp.jit (issue 31): compile time and peak RSS against the length, and
the contiguous case beside them; then a large fused expression against NumPy.

Usage:
    python benchmarks/bench_slices.py [--sizes 1000,10000,...] [--big 100000000] [--no-big]
        [--cases "m.T;x[1::3]"] [--old-src DIR] [--timeout 120] [--rounds 3] [--cap BYTES]
        [--calls 10000000]

``--old-src DIR`` runs every case a second time with DIR on PYTHONPATH first (a copy of an
older ``src`` with its built extensions, e.g. before the transposes became level gathers) and
prints its rows beside the new ones (a case that runs past ``--timeout`` seconds is stopped).

Each (case, n) runs in a subprocess of its own (its peak RSS is ``resource.getrusage``'s
``ru_maxrss`` of that process alone), ``--rounds`` times in interleaved rounds (the medians
are shown): import, make the argument, then the first call of the
jitted function, which traces, compiles, loads and runs (the *compile* column); the result is
checked against NumPy. "RSS - base" subtracts the RSS a process had after the imports and the
argument. The cap on a program's memory is the default one (64 MiB) unless ``--cap BYTES``
sets COPAPY_MAX_MEMORY: a case the cap refuses shows the runner's error in its row.

``--calls N`` times the calls after the first at N elements (median of 7 calls in a process,
median over the rounds): copapy's call against NumPy's ``np.ascontiguousarray(f(x))`` (a view
made an array, as copapy returns one), and with ``--old-src`` the old src's call (at a raised
cap: the old code needed it).

The big expression ``sqrt(x*x + y*y)`` on float32 arguments of ``--big`` elements reads its
arguments in place and writes into the caller's new array; its peak RSS is set against
inputs + output, its time (median of five calls after the first) against NumPy's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SIZES = [1000, 10_000, 100_000, 1_000_000, 10_000_000]
CASES = {
    "contiguous x[1:] + x[:-1]": "lambda x: x[1:] + x[:-1]",
    "x[::2] + x[1::2]": "lambda x: x[::2] + x[1::2]",
    "x[::-1] * 2": "lambda x: x[::-1] * 2.0",
    "x[1::3]": "lambda x: x[1::3]",
    # 2-D (issue 31: one level gather whatever the size), m = x as rows of 100
    "m[::2]": "lambda x: x.reshape(-1, 100)[::2]",
    "m[:, ::2]": "lambda x: x.reshape(-1, 100)[:, ::2]",
    "m[::-1, 1::3]": "lambda x: x.reshape(-1, 100)[::-1, 1::3]",
    "m[1:5, ::2]": "lambda x: x.reshape(-1, 100)[1:5, ::2]",
    # axis permutations (one level gather; the 4-D reversal two), m as rows of 100, t as
    # blocks of 10 x 10 x 10
    "m.T": "lambda x: x.reshape(-1, 100).T",
    "np.swapaxes(t, 1, 3)": "lambda x: np.swapaxes(x.reshape(-1, 10, 10, 10), 1, 3)",
    "t.transpose(3, 2, 1, 0)": "lambda x: x.reshape(-1, 10, 10, 10).transpose(3, 2, 1, 0)",
}
CONTIGUOUS = "contiguous x[1:] + x[:-1]"

CHILD = """
import json, resource, sys, time
import numpy as np
import copapy as cp
fn, n = eval(sys.argv[1]), int(sys.argv[2])
x = np.random.default_rng(0).random(n, dtype=np.float32)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
f = cp.jit(fn)
t = time.perf_counter()
r = f(x)
compile_s = time.perf_counter() - t
ok = bool(np.array_equal(np.asarray(r), fn(x)))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"compile": compile_s, "peak": peak / 1024, "base": base / 1024, "ok": ok}))
"""

CALLS = """
import json, sys, time
import numpy as np
import copapy as cp
fn, n, which = eval(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
x = np.random.default_rng(0).random(n, dtype=np.float32)
f = (lambda a: np.ascontiguousarray(fn(a))) if which == "numpy" else cp.jit(fn)
f(x)
times = []
for _ in range(7):
    t = time.perf_counter(); r = f(x); times.append(time.perf_counter() - t); del r
print(json.dumps({"time": sorted(times)[3]}))
"""

BIG = """
import json, resource, sys, time
import numpy as np
import copapy as cp
n = int(sys.argv[1]); which = sys.argv[2]
rng = np.random.default_rng(0)
x = rng.random(n, dtype=np.float32); y = rng.random(n, dtype=np.float32)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if which == "copapy":
    f = cp.jit(lambda x, y: cp.sqrt(x * x + y * y))
else:
    f = lambda x, y: np.sqrt(x * x + y * y)
t = time.perf_counter(); r = f(x, y); first = time.perf_counter() - t
del r
times = []
for _ in range(5):
    t = time.perf_counter(); r = f(x, y); times.append(time.perf_counter() - t); del r
r = f(x, y)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # before the check's temporaries
ok = True
if which == "copapy":  # in slices of 1e6: the check allocates little
    for k in range(0, n, 1 << 20):
        a, b = x[k:k + (1 << 20)], y[k:k + (1 << 20)]
        ok = ok and bool(np.array_equal(r[k:k + (1 << 20)], np.sqrt(a * a + b * b)))
print(json.dumps({"first": first, "time": sorted(times)[2], "peak": peak / 1024,
                  "base": base / 1024, "ok": ok}))
"""


def child(code: str, *args: str, env: dict[str, str] | None = None,
          timeout: float | None = None) -> dict[str, float]:
    try:
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                             text=True, env=env, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"still running after {timeout:.0f} s (stopped)"}  # type: ignore[dict-item]
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}  # type: ignore[dict-item]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def slices(sizes: list[int], cases: list[str], old_src: str | None, timeout: float | None,
           rounds: int, cap: int | None) -> None:
    env = dict(os.environ)
    if cap is not None:
        env["COPAPY_MAX_MEMORY"] = str(cap)
    runs = [("", env)]
    if old_src:
        runs.append((" (old)", dict(env, PYTHONPATH=os.pathsep.join(
            [old_src, *env.get("PYTHONPATH", "").split(os.pathsep)]))))
    print(f"median of {rounds} interleaved round(s), one process per case and round\n")
    print("| case | n | compile s | peak RSS MB | RSS - base MB | compile / contiguous | "
          "(RSS - base) / contiguous | = NumPy |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for n in sizes:
        rows = [(name, tag, run_env) for name in [CONTIGUOUS, *(c for c in cases
                                                                if c != CONTIGUOUS)]
                for tag, run_env in runs if not (tag and name == CONTIGUOUS)]
        got: dict[str, list[dict[str, float]]] = {}
        for _ in range(rounds):  # every case once per round: load changes hit them alike
            for name, tag, run_env in rows:
                if any("error" in r for r in got.get(name + tag, [])):
                    continue  # stopped or failed once: not again
                got.setdefault(name + tag, []).append(
                    child(CHILD, CASES[name], str(n), env=run_env, timeout=timeout))
        ref: dict[str, float] = {}
        for name, tag, _ in rows:
            results = got[name + tag]
            if any("error" in r for r in results):
                print(f"| {name}{tag} | {n:,} | {results[-1]['error']} |")
                continue
            compile_s = median([r["compile"] for r in results])
            extra = median([max(r["peak"] - r["base"], 0.1) for r in results])
            peak = median([r["peak"] for r in results])
            if not ref:
                ref = {"compile": compile_s, "extra": extra}
            ok = all(r["ok"] for r in results)
            print(f"| {name}{tag} | {n:,} | {compile_s:.3f} | {peak:.0f} | {extra:.1f} | "
                  f"{compile_s / ref['compile']:.2f} | {extra / ref['extra']:.2f} | "
                  f"{'yes' if ok else 'NO'} |", flush=True)


def calls(n: int, cases: list[str], old_src: str | None, rounds: int) -> None:
    """Call time (after the first call) of every case at ``n`` against NumPy's."""
    runs = [("copapy", "copapy", dict(os.environ)), ("numpy", "numpy", dict(os.environ))]
    if old_src:
        runs.append(("old", "copapy", dict(os.environ, COPAPY_MAX_MEMORY=str(8 << 30),
                                           PYTHONPATH=os.pathsep.join(
                                               [old_src, os.environ.get("PYTHONPATH", "")]))))
    print(f"\ncall time at n = {n:,} (ms, median of 7 calls, median of {rounds} rounds)\n")
    print("| case | copapy | NumPy | copapy / NumPy |" + (" old | old / new |" if old_src else ""))
    print("|---|---:|---:|---:|" + ("---:|---:|" if old_src else ""))
    for name in cases:
        got: dict[str, list[float]] = {}
        for _ in range(rounds):
            for tag, which, env in runs:
                r = child(CALLS, CASES[name], str(n), which, env=env)
                got.setdefault(tag, []).append(r.get("time", float("nan")))
        t = {tag: median(v) * 1e3 for tag, v in got.items()}
        row = f"| {name} | {t['copapy']:.2f} | {t['numpy']:.2f} | {t['copapy'] / t['numpy']:.2f} |"
        if old_src:
            row += f" {t['old']:.2f} | {t['old'] / t['copapy']:.2f} |"
        print(row, flush=True)


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def big(n: int) -> None:
    data_mb = 3 * n * 4 / 2**20
    print(f"\nsqrt(x*x + y*y), float32, n = {n:,}: inputs + output = {data_mb:.0f} MB\n")
    print("| | first call s | call s (median of 5) | peak RSS MB | peak / (inputs + output) "
          "| = NumPy |")
    print("|---|---:|---:|---:|---:|---|")
    rows = {}
    for which in ("numpy", "copapy"):
        r = child(BIG, str(n), which)
        if "error" in r:
            print(f"| {which} | {r['error']} |")
            continue
        rows[which] = r
        print(f"| {which} | {r['first']:.2f} | {r['time']:.3f} | {r['peak']:.0f} | "
              f"{r['peak'] / data_mb:.2f} | {'yes' if r['ok'] else 'NO'} |")
    if len(rows) == 2:
        print(f"\ncopapy / NumPy time: {rows['copapy']['time'] / rows['numpy']['time']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--big", type=int, default=100_000_000)
    parser.add_argument("--no-big", action="store_true")
    parser.add_argument("--cases", default=";".join(CASES), help="names of CASES, by semicolons")
    parser.add_argument("--old-src", help="an older src directory to compare with")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per case")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each case (median)")
    parser.add_argument("--calls", type=int, default=None,
                        help="also time the calls after the first at this many elements")
    parser.add_argument("--cap", type=int, default=None,
                        help="COPAPY_MAX_MEMORY for the slice cases (default: the default cap)")
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}\n")
    cases = [c.strip() for c in opts.cases.split(";")] if opts.cases else list(CASES)
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {list(CASES)}")
    slices([int(s) for s in opts.sizes.split(",")], cases, opts.old_src, opts.timeout,
           opts.rounds, opts.cap)
    if opts.calls:
        calls(opts.calls, cases, opts.old_src, opts.rounds)
    if not opts.no_big:
        big(opts.big)


if __name__ == "__main__":
    main()
