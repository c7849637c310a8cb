"""Command line: ``copapy runner`` starts the host runner, ``copapy info PORT`` inspects one.

    copapy runner --pty              # prints "PTY /dev/pts/N"; connect cp.SerialTarget to it
    copapy runner --unix /run/cp.sock --key-file cp.key   # a Unix socket; only the key's owner
    copapy runner --tcp 5555 --key-file cp.key            # 127.0.0.1:5555, a key is required
    copapy info /dev/pts/3           # what a connected runner reports (--key-file for a key)
    copapy stats /dev/pts/3          # per-task statistics, release jitter, stream losses
    copapy archs                     # architectures copapy compiles for
    copapy run prog.cpimg --steps 100 --print speed    # a saved program (cp.save), in-process
    copapy info prog.cpimg           # header, tasks, ports and I/O bindings of a saved program
    copapy deploy prog.cpimg --port /dev/ttyACM0       # upload a saved program and start it
    copapy runner --pty --image prog.cpimg --start     # the host runner, running it at once
    copapy doctor                    # what is installed for each feature
    copapy firmware export DIR       # the runner sources for building a board's firmware
    copapy bench jitter --variants c_ctypes,cyclictest --conditions idle --seconds 5
                                     # wake-up latency, 4 cells, about 40 s; without options
                                     # all 54 cells, about 13 min, with CPU stress
    copapy flash build/zephyr/zephyr.hex   # the Teensy 4.1 firmware, via teensy_loader_cli
    copapy scope prog.cpimg --control gain=0:2   # live plots and controls in the browser
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from . import __version__, cli_bench, cli_program, cli_scope, cli_tools
from .host_runner import runner_executable
from .serial.protocol import RunnerStats


def cmd_runner(args: argparse.Namespace) -> int:
    exe = runner_executable(args.rebuild)
    if args.path:
        print(exe)
        return 0
    argv = [str(exe)]
    if args.tcp is not None:
        argv += ["--tcp", str(args.tcp)]
    elif args.unix is not None:
        argv += ["--unix", args.unix]
    elif args.stdio:
        argv += ["--stdio"]
    else:
        argv += ["--pty"]
    if args.no_rt:
        argv += ["--no-rt"]
    if args.no_seccomp:
        argv += ["--no-seccomp"]
    if args.name:
        argv += ["--name", args.name]
    for option, value in (("--key-file", args.key_file), ("--user", args.user),
                          ("--max-memory", args.max_memory),
                          ("--budget-factor", args.budget_factor),
                          ("--link-timeout", args.link_timeout), ("--io-file", args.io_file)):
        if value is not None:
            argv += [option, str(value)]
    if args.insecure_no_auth:
        argv += ["--insecure-no-auth"]
    if args.image:
        argv += ["--image", args.image, *(["--start"] if args.start else [])]
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached


def cmd_info(args: argparse.Namespace) -> int:
    from .serial_target import SerialTarget

    if cli_program.names_image_file(args.port):
        return cli_program.cmd_image_info(args.port)

    with SerialTarget(args.port, baudrate=args.baudrate, key=args.key_file) as tg:
        info = tg.info()
        for field, value in info.__dict__.items():
            if field == "image_crc":
                value = f"{value:#010x}"
            print(f"{field:15} {value}")
    return 0


def stream_losses(s: RunnerStats) -> str:
    """Where STREAM events were lost, so a scope's tick gaps are accounted for by the runner."""
    return (f"stream events dropped {s.stream_dropped + s.link_stream_dropped}: "
            f"{s.stream_dropped} by the event ring, {s.link_stream_dropped} by the link "
            f"(discarded unread: {s.link_frames_dropped} frames, {s.link_bytes_dropped} bytes "
            f"in {s.link_discards} discards)")


def cmd_stats(args: argparse.Namespace) -> int:
    from .serial_target import SerialTarget
    from .target_common import TaskStats

    if cli_program.names_image_file(args.port):
        raise SystemExit(f"copapy stats: {args.port} is a file, not a runner: stats come from "
                         f"a running runner (copapy deploy {args.port} --port P, then copapy "
                         f"stats P); copapy info {args.port} describes the saved program")
    with SerialTarget(args.port, baudrate=args.baudrate, key=args.key_file) as tg:
        s = tg.runner_stats()
        print(f"ticks {s.ticks}, late ticks {s.late_ticks}, bad frames {s.bad_frames}, "
              f"release jitter p50 {s.jitter_p50_ns / 1e3:.1f} µs, "
              f"p99 {s.jitter_p99_ns / 1e3:.1f} µs, max {s.jitter_max_ns / 1e3:.1f} µs")
        print(stream_losses(s))
        for k, counters in enumerate(s.tasks):
            t = TaskStats.from_counters(f"task {k}", counters)
            print(f"{t.name}: {t.runs} runs, {t.skipped} skipped, {t.overruns} overruns, "
                  f"exec max {t.max_exec_ns} ns, mean {t.mean_exec_ns:.0f} ns")
        if s.fault is not None and s.fault.active:
            print(f"FAULTED: {s.fault.kind} in task {s.fault.task} at tick {s.fault.tick} "
                  f"(address {s.fault.address:#x}, pc {s.fault.pc:#x}); {s.fault.count} "
                  f"faults since the runner started")
    return 0


def cmd_archs(args: argparse.Namespace) -> int:
    from .compiler.table import available_architectures, load_table

    for arch in available_architectures():
        table = load_table(arch)
        print(f"{arch:12} {len(table.names()):5} stencils   float64: "
              f"{'yes' if table.float64 else 'no'}")
    return 0


#: how long `flash --soft-reboot --no-wait` waits for the rebooted board's loader
SOFT_REBOOT_SECONDS = 5.0


def cmd_flash(args: argparse.Namespace) -> int:
    from .serial import usb

    try:
        argv = usb.flash_command(Path(args.hex), args.mcu, wait=not args.no_wait)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"copapy flash: {exc}") from exc
    if args.soft_reboot:
        try:
            port = args.port or usb.find_runner()
            usb.reboot_to_loader(port)
        except ImportError as exc:
            raise SystemExit("copapy flash --soft-reboot: opening the runner's port needs "
                             "pyserial: pip install 'copapy[serial]'") from exc
        except (usb.RunnerNotFound, OSError) as exc:
            raise SystemExit(f"copapy flash --soft-reboot: {exc} (or press the board's "
                             f"button and flash without --soft-reboot)") from exc
        print(f"copapy flash: asked the runner on {port} to reboot into the loader "
              f"({usb.REBOOT_BAUD} baud)", file=sys.stderr)
    elif not args.no_wait:
        print("press the button on the Teensy to start its loader", file=sys.stderr)
    if args.soft_reboot and args.no_wait:
        code = usb.run_loader_until_found(argv, SOFT_REBOOT_SECONDS)
    else:
        code = subprocess.run(argv).returncode
    if code != 0:
        print(f"copapy flash: {usb.TEENSY_LOADER} failed (exit status {code})", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="copapy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"copapy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("runner", help="start the host runner process")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--pty", action="store_true", help="serve on a new pty (default)")
    where.add_argument("--unix", metavar="PATH",
                       help="serve on a Unix-domain socket (mode 0600; needs --key-file)")
    where.add_argument("--tcp", type=int, metavar="PORT",
                       help="serve on 127.0.0.1:PORT (needs --key-file)")
    where.add_argument("--stdio", action="store_true", help="serve on stdin/stdout")
    run.add_argument("--key-file", metavar="F",
                     help="the shared key (16+ bytes, mode 0600): requests must prove it")
    run.add_argument("--insecure-no-auth", action="store_true",
                     help="--unix without a key: the socket's permissions alone decide")
    run.add_argument("--user", metavar="NAME", help="drop root after the real-time set-up")
    run.add_argument("--max-memory", type=int, metavar="BYTES",
                     help="memory a program may occupy (default 64 MiB)")
    run.add_argument("--budget-factor", type=int, metavar="N",
                     help="a job may run N times its budget before it is stopped (default 10)")
    run.add_argument("--link-timeout", type=float, metavar="SECONDS",
                     help="dead-man switch: outputs go safe when the host is silent this long")
    run.add_argument("--no-rt", action="store_true", help="skip real-time scheduling setup")
    run.add_argument("--no-seccomp", action="store_true",
                     help="run the tick thread without its system-call filter (debugging only: "
                          "a task may then end or hang the runner)")
    run.add_argument("--io-file", metavar="PATH",
                     help="keep the I/O channels in this shared file; a supervisor process "
                          "drives the outputs safe if the runner process dies")
    run.add_argument("--name", default="", help="name reported in HELLO")
    run.add_argument("--rebuild", action="store_true", help="rebuild the runner first")
    run.add_argument("--path", action="store_true", help="print the runner executable's path")
    run.add_argument("--image", help="load a saved program (.cpimg) at start-up")
    run.add_argument("--start", action="store_true", help="start the --image program")
    run.set_defaults(fn=cmd_runner)
    for name, fn, text, extra in (
            ("info", cmd_info, "what a runner reports (or a saved program holds)",
             ", or a saved program (.cpimg)"),
            ("stats", cmd_stats, "statistics of a running runner", "")):
        p = sub.add_parser(name, help=text)
        p.add_argument("port", help=f"serial port, pty path, Unix socket or "
                                    f"socket://host:port{extra}")
        p.add_argument("--baudrate", type=int, default=115200)
        p.add_argument("--key-file", metavar="F", help="the runner's key file")
        p.set_defaults(fn=fn)
    sub.add_parser("archs", help="architectures copapy compiles for").set_defaults(fn=cmd_archs)
    cli_program.register(sub)
    cli_tools.register(sub)
    cli_bench.register(sub)
    cli_scope.register(sub)
    fl = sub.add_parser("flash", help="write the Zephyr firmware to a Teensy (teensy_loader_cli)")
    fl.add_argument("hex", help="the firmware, e.g. build/zephyr/zephyr.hex")
    fl.add_argument("--mcu", default="TEENSY41", help="teensy_loader_cli's --mcu (TEENSY41)")
    fl.add_argument("--soft-reboot", action="store_true",
                    help="reboot running copapy firmware into the loader (no button press): "
                         "sets its USB port to 134 baud")
    fl.add_argument("--port", help="the runner's port for --soft-reboot (default: the one "
                                   "copapy runner on USB)")
    fl.add_argument("--no-wait", action="store_true",
                    help="fail at once if no board is in loader mode (with --soft-reboot: "
                         f"after {SOFT_REBOOT_SECONDS:g} s)")
    fl.set_defaults(fn=cmd_flash)
    args = parser.parse_args(argv)
    from .runtime.errors import ImageLoadError
    from .serial.protocol import ProtocolError
    from .serial_target import SerialTargetError

    try:
        result: int = args.fn(args)
        sys.stdout.flush()  # a reader that went away (copapy info F | head) shows here
    except (SerialTargetError, ProtocolError, ImageLoadError) as exc:  # names problem and fix
        print(f"copapy {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # as the signal module's "Note on SIGPIPE" does: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return result


if __name__ == "__main__":
    raise SystemExit(main())
