"""What the tick thread's seccomp filter costs (issue 29, item 3): the host runner with its
filter against the same runner with --no-seccomp, rounds interleaved (A, B, A, B, ...) so the
machine's load falls on both alike. Each round runs the 1 kHz controller of `copapy bench
jitter` (copapy.bench.jitter.program) and reads the runner's own statistics: release jitter
p50/p99/max (wake time - deadline) and the mean job time (the chain and the guard around it,
whose signal-state check makes eight system calls per job, each through the filter).

    python benchmarks/bench_seccomp.py                   # 6 rounds of 5 s, --no-rt
    python benchmarks/bench_seccomp.py --rounds 10 --seconds 10 --fifo   # as root: SCHED_FIFO

Prints per variant the median over rounds and the ratio filter / no filter (no timing
assertion anywhere: numbers for docs/realtime.md).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from copapy.bench.jitter import host_runner

VARIANTS = {"seccomp": (), "no-seccomp": ("--no-seccomp",)}
FIELDS = ("p50_us", "p99_us", "max_us", "exec_mean_us")


def one(variant: str, seconds: float, fifo: bool) -> dict[str, float]:
    info: dict[str, Any] = host_runner(seconds, fifo, VARIANTS[variant])
    s = info["summary"]
    return {"p50_us": s["p50_us"], "p99_us": s["p99_us"], "max_us": s["max_us"],
            "exec_mean_us": info["exec_mean_ns"] / 1e3, "late": info["missed"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--fifo", action="store_true", help="real-time set-up (SCHED_FIFO 80)")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            runs[variant].append(one(variant, args.seconds, args.fifo))
    med = {v: {f: statistics.median(r[f] for r in rs) for f in FIELDS} for v, rs in runs.items()}
    print(f"{'variant':12}" + "".join(f"{f:>14}" for f in FIELDS) + f"{'late ticks':>12}")
    for v, m in med.items():
        late = sum(int(r["late"]) for r in runs[v])
        print(f"{v:12}" + "".join(f"{m[f]:14.2f}" for f in FIELDS) + f"{late:12d}")
    print(f"{'ratio':12}" + "".join(
        f"{med['seccomp'][f] / med['no-seccomp'][f]:14.3f}" if med["no-seccomp"][f] else
        f"{'-':>14}" for f in FIELDS))
    print(f"({args.rounds} rounds x {args.seconds:g} s per variant, "
          f"{'SCHED_FIFO' if args.fifo else '--no-rt'}; medians over rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
