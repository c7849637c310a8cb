"""``copapy run``, ``copapy info`` and ``copapy deploy`` for saved programs (``cp.save``).

    copapy run prog.cpimg --steps 100 --write setpoint=2 --print speed
    copapy info prog.cpimg
    copapy deploy prog.cpimg --port /dev/ttyACM0
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .runtime.errors import ProgramFault, TargetError
from .saved import ArrayInfo, Program, ProgramFileError, is_image_file, load

__all__ = ["cmd_image_info", "is_image_file", "names_image_file", "register"]


def register(sub: Any) -> None:
    """Add the saved-program commands to the ``copapy`` parser's subcommands."""
    run = sub.add_parser("run", help="run a saved program in this process",
                         description="Load a saved program (cp.save) into an in-process "
                                     "runner, write inputs, run it and print ports.")
    run.add_argument("image", help="a saved program (.cpimg)")
    run.add_argument("--steps", type=int, default=1, metavar="N",
                     help="ticks of the program's tick to run (runs, for a program run on "
                          "request); default 1")
    run.add_argument("--write", action="append", default=[], metavar="NAME=VALUE",
                     help="set an input before running (repeatable; an array input takes "
                          "all its elements: NAME=1,2,3)")
    run.add_argument("--print", action="append", default=[], dest="print_", metavar="NAME",
                     help="print a port after running (repeatable; default: every output)")
    run.add_argument("--arch", help="the stencil table to run it with: the image's (default; "
                                    "emulated when this CPU is another), or a variant of it")
    run.set_defaults(fn=cmd_run)
    dep = sub.add_parser("deploy", help="upload a saved program to a runner and start it")
    dep.add_argument("image", help="a saved program (.cpimg)")
    dep.add_argument("--port", required=True,
                     help="serial port, pty path, Unix socket or socket://host:port of the "
                          "runner")
    dep.add_argument("--baudrate", type=int, default=115200)
    dep.add_argument("--key-file", metavar="F", help="the runner's key file")
    dep.add_argument("--no-start", action="store_true", help="upload only")
    dep.add_argument("--progress", action="store_true", help="show the upload progress bar "
                     "even for small images")
    dep.set_defaults(fn=cmd_deploy)


def _load(path: str) -> Program:
    try:
        return load(path)
    except ProgramFileError as exc:
        raise SystemExit(f"copapy: {exc}") from None


def names_image_file(path: str) -> bool:
    """Whether ``copapy info PATH`` means a saved program: a regular file (a serial port, pty
    or socket is none) or a .cpimg name (a missing one is reported as a missing file)."""
    return os.path.isfile(path) or (path.endswith(".cpimg") and not os.path.exists(path))


def _parse_value(text: str, dtype: Any) -> float | int | bool:
    """One number of a --write VALUE for a ``dtype`` port, or ValueError naming the type."""
    if dtype.is_bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{text!r} is not a bool (true/false)")
    try:
        return int(text, 0) if dtype.is_int else float(text)
    except ValueError:
        kind = "an integer (int32)" if dtype.is_int else f"a number ({dtype.name})"
        raise ValueError(f"{text!r} is not {kind}") from None


def _parse_values(text: str, port: Any) -> Any:
    """A --write VALUE: one number, or for an array port its elements separated by commas
    (row-major)."""
    if port.count == 1 and not isinstance(port, ArrayInfo):
        return _parse_value(text, port.dtype)
    values = [_parse_value(t.strip(), port.dtype) for t in text.split(",")]
    if len(values) != port.count:
        raise ValueError(f"port {port.name!r} holds {port.count} values, got {len(values)}: "
                         f"give all of them separated by commas")
    return values


def _format(value: Any) -> str:
    if hasattr(value, "tolist"):
        return " ".join(_format(v) for v in value.reshape(-1).tolist())
    if isinstance(value, float):
        return repr(value)
    return str(value)


def cmd_run(args: argparse.Namespace) -> int:
    from .local_target import LocalTarget

    prog = _load(args.image)
    if args.steps < 0:
        raise SystemExit("copapy run: --steps must be >= 0")
    try:
        tg = LocalTarget(arch=args.arch or prog.arch)
        tg.deploy(prog)
    except (TargetError, ValueError) as exc:  # an unknown or another architecture
        hint = (f" (leave --arch out: the image's code runs on {prog.arch} and its variants)"
                if args.arch else "")
        raise SystemExit(f"copapy run: {exc}{hint}") from None
    for item in args.write:
        name, sep, text = item.partition("=")
        if not sep:
            raise SystemExit(f"copapy run: --write {item!r}: use NAME=VALUE")
        try:
            tg.write(name, _parse_values(text, prog.named(name)))
        except (KeyError, ValueError, TypeError, OverflowError, TargetError) as exc:
            raise SystemExit(f"copapy run: --write {item}: {exc.args[0]}") from None
    try:
        if prog.periodic:
            tg.step(args.steps * prog.tick)
        else:
            for _ in range(args.steps):
                tg.run()
    except ProgramFault as exc:  # its message names the fault, the task and the tick
        raise SystemExit(f"copapy run: {exc}") from None
    names: list[Any] = args.print_ or prog.names("output")  # (read takes a str too)
    for name in names:
        try:
            prog.named(name)
        except KeyError as exc:
            raise SystemExit(f"copapy run: --print: {exc.args[0]}") from None
        print(f"{name} {_format(tg.read(name))}")
    return 0


def cmd_image_info(path: str) -> int:
    """``copapy info prog.cpimg``: header, tasks, ports and I/O bindings."""
    prog = _load(path)
    meta = prog.meta
    print(f"file           {path}")
    print(f"arch           {prog.arch}")
    needs = (f"{', '.join(prog.cpu_features)} ({prog.variant} code: a CPU without them refuses "
             f"it)" if prog.cpu_features else f"none (baseline: runs on every {prog.arch} CPU)")
    print(f"cpu features   {needs}")
    print(f"size           {len(prog.image)} bytes (code {len(prog._parsed.code)}, data "
          f"{prog._parsed.data_size}, {len(prog._parsed.patches)} runtime patches)")
    print(f"image crc      {int.from_bytes(prog.image[-4:], 'little'):#010x}")
    print(f"compiler       {meta.compiler} (stencil table {meta.stencil_table}), {meta.ops} "
          f"operations")
    if prog.periodic:
        print(f"tick           {prog.tick_ns} ns")
    print("tasks:" if prog.periodic else "runs on request (copapy run --steps N runs it N times)")
    for k, t in enumerate(prog.tasks if prog.periodic else []):
        extra = "".join(f", {what} {v * scale:g} {unit}" for what, v, scale, unit in (
            ("wcet", t.wcet, 1e6, "µs"), ("budget", t.budget, 1e6, "µs"),
            ("link timeout", t.link_timeout, 1e3, "ms")) if v)
        print(f"  {k}: {t.name:16} period {t.period * 1e3:g} ms, offset {t.offset * 1e3:g} ms, "
              f"priority {t.priority}{extra}")
    print("ports:")
    for name in prog.names():
        p = prog.named(name)
        shape = ("[" + ", ".join(map(str, p.shape)) + "]" if isinstance(p, ArrayInfo) else
                 f"[{p.count}]" if p.count != 1 else "")
        at = ", ".join(str(q.offset) for q in p.ports) if isinstance(p, ArrayInfo) else p.offset
        task = f" (task {p.task})" if p.task is not None else ""
        print(f"  {p.name:24} {p.role:8} {p.dtype.name}{shape} @ {at}{task}")
    if meta.ranges:
        print("ranges:")
        for r in meta.ranges:
            print(f"  {r.port:24} {r}")
    if prog.bindings:
        print("I/O bindings:")
        for b in prog.bindings:
            arrow = "->" if b.direction == "output" else "<-"
            print(f"  {b.port} {arrow} {b.channel!r} (task {b.task})")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    from .serial_target import SerialTarget

    prog = _load(args.image)
    with SerialTarget(args.port, baudrate=args.baudrate, key=args.key_file,
                      progress=True if args.progress else None) as tg:
        tg.deploy(prog)
        if not args.no_start:
            tg.start()
        info = tg.info()
        print(f"{args.image}: {info.state} on {args.port} ({info.name}, {info.arch}, image crc "
              f"{info.image_crc:#010x})")
    return 0
