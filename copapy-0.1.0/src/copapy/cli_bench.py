"""``copapy bench jitter``: registered into copapy's command line by cli.py."""

from __future__ import annotations

import argparse
from typing import Any

from .bench.jitter_plan import add_arguments


def cmd_bench_jitter(args: argparse.Namespace) -> int:
    from .bench.jitter import main_from_args  # NumPy and tqdm: only for the bench itself

    if not args.seconds > 0:  # 0 or less ran every cell anyway, for nothing
        raise SystemExit(f"copapy bench jitter: --seconds must be > 0, got {args.seconds}")
    if args.rounds < 1:
        raise SystemExit(f"copapy bench jitter: --rounds must be >= 1, got {args.rounds}")
    return main_from_args(args)


def register(sub: Any) -> None:
    bench = sub.add_parser("bench", help="benchmarks (jitter: wake-up latency of every way "
                                         "of running a program)")
    kinds = bench.add_subparsers(dest="bench", required=True)
    jitter = kinds.add_parser("jitter", help="1 kHz wake-up latency: Python loops, the C loop, "
                                             "the cppyy ControlLoop, the host runner, "
                                             "ros2_control and cyclictest side by side")
    add_arguments(jitter)
    jitter.set_defaults(fn=cmd_bench_jitter)
