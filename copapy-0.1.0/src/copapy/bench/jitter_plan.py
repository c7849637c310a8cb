"""What ``copapy bench jitter`` will run, without NumPy: its options (the command line parser
is built for every ``copapy`` command) and the up-front plan: cells, time, CPU stress."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

VARIANTS = ["py_sleep", "py_slack1", "py_copapy", "c_ctypes", "cppyy_loop", "host_runner",
            "ros2_control", "ros2_trivial", "cyclictest"]
CONDITIONS = ["idle", "stress", "gilhog"]
POLICIES = ["other", "fifo"]
#: seconds a cell costs beyond --seconds (a fresh process, imports, warm-up): 54 cells of
#: 1 s took about 5 minutes
CELL_OVERHEAD_S = 4.5


def parse_list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise SystemExit(f"unknown {what} {', '.join(bad) or '(none)'}; choose from "
                         f"{', '.join(allowed)}")
    return items


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=float, default=10.0,
                   help="per cell (default 10); each cell also costs about "
                        f"{CELL_OVERHEAD_S:g} s to start")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, of {','.join(VARIANTS)}")
    p.add_argument("--conditions", default=",".join(CONDITIONS),
                   help=f"comma-separated, of {','.join(CONDITIONS)} (stress loads every CPU)")
    p.add_argument("--policies", default=",".join(POLICIES),
                   help=f"comma-separated, of {','.join(POLICIES)}")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every cell this many times, interleaved, and pool (default 1)")
    p.add_argument("--out", default="jitter-results", help="directory for JSON and plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def describe(variants: Sequence[str], conditions: Sequence[str], policies: Sequence[str],
             seconds: float, rounds: int) -> str:
    """The line printed before the first cell: a full run takes minutes and stresses the CPU,
    which nobody should learn only by waiting."""
    cells = len(variants) * len(conditions) * len(policies) * rounds
    total = cells * (seconds + CELL_OVERHEAD_S)
    when = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"
    parts = (f"{len(variants)} variants x {len(conditions)} conditions x {len(policies)} "
             f"policies" + (f" x {rounds} rounds" if rounds > 1 else ""))
    stress = ("; the 'stress' condition loads every CPU (stress-ng) during its cells"
              if "stress" in conditions else "")
    return (f"copapy bench jitter: {cells} cell{'s' if cells != 1 else ''} ({parts}) of "
            f"{seconds:g} s each, about {when} in all{stress}. Fewer: --variants, "
            f"--conditions, --policies, --seconds")
