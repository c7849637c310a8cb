"""``copapy scope TARGET``: the live scope of a saved program run here, or of the program a
runner runs (registered into copapy's command line by cli.py).

    copapy scope prog.cpimg --control gain=0:2          # in-process, in real time
    copapy scope /dev/pts/3 --image prog.cpimg --record run.csv
"""

from __future__ import annotations

import argparse
import sys
import time
import webbrowser
from typing import Any

from .cli_program import names_image_file
from .saved import ArrayInfo, Program, ProgramFileError, load

__all__ = ["register"]


def register(sub: Any) -> None:
    sc = sub.add_parser("scope", help="live plots and controls of a running program in the "
                                      "browser",
                        description="A live scope in the browser: plots of a program's ports "
                                    "while it runs, a control per input, start/stop, its state "
                                    "and a recording of every tick.")
    sc.add_argument("target", help="a saved program (.cpimg), run in this process; or a "
                                   "runner's serial port, pty, Unix socket or socket:// URL "
                                   "(with --image)")
    sc.add_argument("--image", metavar="F", help="the saved program the runner runs (or is "
                                                 "given and started)")
    sc.add_argument("--signal", action="append", default=[], metavar="NAME",
                    help="a port to plot (repeatable; default: every output)")
    sc.add_argument("--control", action="append", default=[], metavar="NAME[=LO:HI]",
                    help="an input to control, a slider over LO..HI (else a number field) "
                         "(repeatable; default: every input, as fields)")
    sc.add_argument("--record", metavar="FILE", help="record every tick from the start "
                                                     "(.csv, or .parquet with pyarrow)")
    sc.add_argument("--fast", action="store_true",
                    help="run a saved program as fast as it runs, not in real time")
    sc.add_argument("--http-port", type=int, default=0, metavar="N",
                    help="the page's port on 127.0.0.1 (default: a free one)")
    sc.add_argument("--key-file", metavar="F", help="the runner's key file")
    sc.add_argument("--baudrate", type=int, default=115200)
    sc.add_argument("--seconds", type=float, metavar="S",
                    help="close after S seconds (default: at Ctrl-C)")
    sc.add_argument("--no-browser", action="store_true", help="print the URL only")
    sc.set_defaults(fn=cmd_scope)


def parse_control(text: str) -> tuple[str, tuple[float, float] | None]:
    """NAME or NAME=LO:HI, or SystemExit naming the mistake."""
    name, _, span = text.partition("=")
    if not span:
        return name, None
    lo, sep, hi = span.partition(":")
    try:
        if not sep:
            raise ValueError
        low, high = float(lo), float(hi)
    except ValueError:
        raise SystemExit(f"copapy scope: --control {text}: the range is LO:HI, e.g. "
                         f"--control {name}=0:2") from None
    if not low < high:
        raise SystemExit(f"copapy scope: --control {text}: LO must be below HI")
    return name, (low, high)


def _program(path: str) -> Program:
    try:
        return load(path)
    except ProgramFileError as exc:
        raise SystemExit(f"copapy scope: {exc}") from None


def cmd_scope(args: argparse.Namespace) -> int:
    from .local_target import LocalTarget
    from .serial_target import SerialTarget

    local = names_image_file(args.target)
    if not local and args.image is None:
        raise SystemExit(f"copapy scope: {args.target} is a runner: name the program it runs "
                         f"with --image prog.cpimg (its ports are the scope's signals)")
    prog = _program(args.target if local else args.image)
    if not prog.periodic:
        raise SystemExit(f"copapy scope: {prog.source} has no periodic tasks to watch (a "
                         f"program run on request: copapy run)")
    signals = args.signal or prog.names("output")
    bound = {b.port for b in prog.bindings}  # set at every release by their channels
    controls = dict(parse_control(c) for c in args.control) if args.control else \
        dict.fromkeys(n for n in prog.names("input")
                      if not isinstance(prog.named(n), ArrayInfo) and n not in bound)
    ranges = {k: r for k, r in controls.items() if r is not None}
    tg: Any
    if local:
        tg = LocalTarget(arch=prog.arch)
        tg.deploy(prog)
    else:
        tg = SerialTarget(args.target, baudrate=args.baudrate, key=args.key_file)
        tg.deploy(prog, start=True)
    scope = tg.scope(*signals, controls=list(controls), ranges=ranges, record=args.record,
                     port=args.http_port, **({"realtime": not args.fast} if local else {}))
    print(f"copapy scope: {scope.url}", flush=True)
    if not args.no_browser:
        webbrowser.open(scope.url)
    try:
        deadline = time.monotonic() + args.seconds if args.seconds is not None else None
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    scope.close()  # the recording takes the ticks still on their way, then closes
    recorded = scope.recorded
    if args.record:
        print(f"copapy scope: recorded {recorded} ticks to {args.record}", file=sys.stderr)
    if scope.lost:
        print(f"copapy scope: WARNING {scope.lost} ticks were lost from the stream (the host "
              f"stalled longer than the runner keeps its events); the recording marks each "
              f"gap in its lost_before column", file=sys.stderr)
    return 0
