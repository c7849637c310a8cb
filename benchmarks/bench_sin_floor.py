"""The floor of the fused expression sqrt(a*a+b*b)*0.5+sin(a) on AVX2 against C -O3 -ffast-math
(issue 32, item 2): its parts as plain C loops (benchmarks/sin_floor.c says which) next to
copapy's fused loops through @cp.jit on the x86_64-v3 table, interleaved rounds in one run.

Usage:
    PYTHONPATH=src python benchmarks/bench_sin_floor.py [--n 100000] [--rounds 7] [--accuracy]

Needs AVX2 and FMA (x86-64-v3), gcc and the stencils' compiler (ziglang). ns per element,
this thread's CPU time, medians of the rounds (the C parts: best of three passes per round).
The last rows put the parts together: what the expression would cost with copapy's sin lane
form replaced by the cheaper "modpi" sin, inside copapy's fused loop (its hyp part as
measured) and in a loop without the fused loop's per-operand cost (C's hyp with the exact
square root). --accuracy also sweeps every float32 in [2^-12, 100] through both sins against
the double sin (155 million arguments, seconds).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import copapy as cp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_stencils  # noqa: E402

SRC = ROOT / "benchmarks" / "sin_floor.c"
PARTS: dict[str, Callable[[Any, Any], Any]] = {
    "expr": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + cp.sin(x),
    "hyp": lambda x, y: cp.sqrt(x * x + y * y) * 0.5 + x,
    "sin": lambda x, y: cp.sin(x),
}


def jitted(part: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    f: Callable[..., Any] = cp.jit(arch="x86_64-v3")(lambda x, y: cp.map_to_numpy(part(x, y)))
    return f


def build(tmp: Path) -> Path:
    """The three parts of sin_floor.c, each with its compiler, linked into one program."""
    target = build_stencils.load_target("x86_64-v3")
    flags = [f for f in build_stencils.target_flags(target) if not f.startswith("-DCP_FUSE")]
    lanes = [*build_stencils.clang_command(), *flags, f"-I{ROOT / 'stencils' / 'include'}",
             "-DPART_LANES"]  # the kernels without the fused loops' stencils
    objs = {"lanes": lanes, "c": ["gcc", "-c", "-O3", "-ffast-math", "-march=x86-64-v3",
                                  "-DPART_C"],
            "main": ["gcc", "-c", "-O2", "-DPART_MAIN"]}
    for name, cmd in objs.items():
        subprocess.run([*cmd, str(SRC), "-o", str(tmp / f"{name}.o")], check=True)
    exe = tmp / "sin_floor"
    subprocess.run(["gcc", "-no-pie", *(str(tmp / f"{k}.o") for k in objs), "-o", str(exe),
                    "-lm"], check=True)
    return exe


def c_times(exe: Path, n: int) -> dict[str, float]:
    out = subprocess.run([str(exe), str(n), "3"], check=True, capture_output=True, text=True)
    return {" ".join(w[1:-1]): float(w[-1]) for w in map(str.split, out.stdout.splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--accuracy", action="store_true")
    opts = ap.parse_args()
    rng = np.random.default_rng(1)
    a = rng.uniform(-10, 10, opts.n).astype(np.float32)
    b = rng.uniform(-10, 10, opts.n).astype(np.float32)
    fns = {k: jitted(p) for k, p in PARTS.items()}
    for f in fns.values():
        f(a, b)
    calls = max(1, 2_000_000 // opts.n)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        if opts.accuracy:
            print(subprocess.run([str(exe), "8", "1", "--accuracy"], check=True,
                                 capture_output=True, text=True).stdout, end="")
        times: dict[str, list[float]] = {}
        for _ in range(opts.rounds):
            for k, v in c_times(exe, opts.n).items():
                times.setdefault(f"C {k}", []).append(v)
            for k, f in fns.items():
                t = time.thread_time_ns()
                for _ in range(calls):
                    f(a, b)
                times.setdefault(f"cp v3 {k}", []).append((time.thread_time_ns() - t)
                                                           / calls / opts.n)
    m = {k: statistics.median(v) for k, v in times.items()}
    anchor = m["C expr fm"]
    rows = [
        ("C expr fm", "the goal's anchor: gcc -O3 -ffast-math -march=x86-64-v3"),
        ("cp v3 expr", "copapy's fused loop"),
        ("C libmvec", "sinf, libmvec (FMA)"),
        ("C lane", "copapy's sin lane form, plain loop"),
        ("C modpi", "the cheaper sin, plain loop"),
        ("cp v3 sin", "copapy's lone sin (block form)"),
        ("C hyp fm", "sqrt(a*a+b*b)*0.5+a, -ffast-math (rsqrtps)"),
        ("C hyp", "the same, exact square root"),
        ("cp v3 hyp", "copapy's fused loop"),
    ]
    print(f"n = {opts.n}, ns per element (CPU time), medians of {opts.rounds} rounds\n")
    print("| part | ns/el | / C expr fm | what |")
    print("|---|---:|---:|---|")
    for k, what in rows:
        print(f"| {k} | {m[k]:.3f} | {m[k] / anchor:.2f} | {what} |")
    fused_modpi = m["cp v3 expr"] - m["C lane"] + m["C modpi"]
    plain_modpi = m["C hyp"] + m["C modpi"]
    plain_lane = m["C hyp"] + m["C lane"]
    for k, v in (("expr, modpi sin in copapy's fused loop (estimate)", fused_modpi),
                 ("expr, copapy's sin + exact hyp, no fused-loop cost (estimate)", plain_lane),
                 ("expr, modpi sin + exact hyp, no fused-loop cost (estimate)", plain_modpi)):
        print(f"| {k} | {v:.3f} | {v / anchor:.2f} | |")


if __name__ == "__main__":
    main()
