"""Soak test of the host runner (issue 12): a 1 kHz PID loop for many minutes under CPU stress
(stress-ng --cpu 2), with SCHED_FIFO, an authenticated Unix-socket session and (as root)
--user nobody. Reports missed releases, release jitter p50/p99/max and the runner's resident
memory at the start, during and at the end (it must not grow).

    python benchmarks/bench_soak.py --minutes 10          # as root, stress-ng installed
    python benchmarks/bench_soak.py --minutes 0.05 --stress 0 --sample 1   # a smoke run

Not a CI test at full length: it takes as long as asked and wants a quiet-ish machine and root
(tests/test_bench_soak.py runs it for a few seconds without stress so it keeps working).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import copapy as cp
from copapy.serial_target import SerialTarget

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.runners import build  # noqa: E402


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def pid_program() -> tuple[list[cp.Task], dict[str, Any]]:
    """A PID speed controller and a first-order plant, both at 1 kHz, coupled through I/O."""
    setpoint = cp.value(1.0, name="setpoint")
    measured = cp.value(0.0, name="measured")
    drive_in = cp.value(0.0, name="drive_in")
    error = setpoint - measured
    drive = cp.clamp(2.0 * error + 20.0 * cp.integrate(error) + 0.01 * cp.rate(error), -1.0, 1.0)
    speed = cp.feedback(lambda v: v + (drive_in * 3.0 - v) * (cp.dt * 5.0), init=0.0)
    ticks = cp.feedback(lambda n: n + 1, init=0)
    tasks = [cp.Task(drive, ticks, period=1e-3, priority=0, name="pid"),
             cp.Task(speed, period=1e-3, priority=1, name="plant")]
    return tasks, {"setpoint": setpoint, "measured": measured, "drive": drive,
                   "drive_in": drive_in, "speed": speed, "ticks": ticks}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--stress", type=int, default=2, metavar="N",
                        help="stress-ng --cpu N next to the runner (0: no load)")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    seconds = args.minutes * 60
    stress = shutil.which("stress-ng")
    if stress is None and args.stress:
        raise SystemExit("the soak benchmark needs stress-ng: apt-get install stress-ng "
                         "(or --stress 0 for a run without load)")
    build("host")
    exe = ROOT / "runner" / "build" / "copapy-runner"
    tmp = Path(tempfile.mkdtemp(prefix="copapy-soak-"))
    key = tmp / "runner.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    sock = tmp / "runner.sock"
    argv = [str(exe), "--unix", str(sock), "--key-file", str(key), "--name", "soak"]
    if os.geteuid() == 0:
        os.chmod(tmp, 0o755)
        argv += ["--user", "nobody"]
    runner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    first = runner.stdout.readline().split()
    assert first[:1] == ["UNIX"], f"runner did not start: {first}"
    load = None
    if stress and args.stress:
        load = subprocess.Popen([stress, "--cpu", str(args.stress), "--timeout",
                                 f"{int(seconds) + 30}s", "--quiet"])
    samples = []
    try:
        tasks, v = pid_program()
        with SerialTarget(f"unix:{sock}", key=key) as tg:
            info = tg.info()
            # the controller reads the encoder and drives the PWM; the simulated plant (the
            # runner's simulated channels) reads the PWM and moves the encoder
            tg.bind(v["measured"], cp.io.Encoder(0))
            tg.bind(v["drive"], cp.io.PWM(0, safe=0.0))
            tg.bind(v["drive_in"], cp.io.plant(cp.io.PWM(0)))
            tg.bind(v["speed"], cp.io.plant(cp.io.Encoder(0)))
            tg.deploy(*tasks, start=True)
            time.sleep(2.0)  # settle: the first pages, the allocator's first requests
            start = time.monotonic()
            rss_start = rss_kib(runner.pid)
            while time.monotonic() - start < seconds:
                time.sleep(min(args.sample, seconds - (time.monotonic() - start) + 0.01))
                s = tg.runner_stats()
                samples.append({"t": round(time.monotonic() - start, 1),
                                "rss_kib": rss_kib(runner.pid), "ticks": s.ticks,
                                "late": s.late_ticks, "p99_us": s.jitter_p99_ns / 1e3,
                                "max_us": s.jitter_max_ns / 1e3})
            s = tg.runner_stats()
            rss_end = rss_kib(runner.pid)
            speed = tg.read(v["speed"])
            stats = tg.stats()
            tg.stop()
    finally:
        if load is not None:
            load.kill()
            load.wait()
        runner.terminate()
        runner.wait(timeout=10)
    duration = samples[-1]["t"] if samples else 0
    result = {
        "minutes": round(duration / 60, 2), "ticks": s.ticks, "late_ticks": s.late_ticks,
        "skipped": [t.skipped for t in stats], "overruns": [t.overruns for t in stats],
        "jitter_p50_us": s.jitter_p50_ns / 1e3, "jitter_p99_us": s.jitter_p99_ns / 1e3,
        "jitter_max_us": s.jitter_max_ns / 1e3, "rss_start_kib": rss_start,
        "rss_end_kib": rss_end, "rss_max_kib": max(x["rss_kib"] for x in samples),
        "realtime": info.realtime, "speed": speed, "fault": s.fault.kind if s.fault else None,
        "exec_max_ns": [t.max_exec_ns for t in stats], "samples": samples,
    }
    under = f"stress-ng --cpu {args.stress}" if args.stress else "no added load"
    print(f"host runner soak, {result['minutes']} min at 1 kHz under {under} "
          f"(SCHED_FIFO: {'yes' if info.realtime else 'no'}, user "
          f"{'nobody' if os.geteuid() == 0 else os.getuid()}, authenticated Unix socket)")
    print("| what | value |\n|---|---:|")
    print(f"| ticks | {s.ticks} |")
    print(f"| missed releases (late ticks) | {s.late_ticks} |")
    print(f"| skipped releases (pid, plant) | {result['skipped']} |")
    print(f"| release jitter p50 / p99 / max | {result['jitter_p50_us']:.1f} / "
          f"{result['jitter_p99_us']:.1f} / {result['jitter_max_us']:.1f} µs |")
    print(f"| RSS start / end / max | {rss_start} / {rss_end} / {result['rss_max_kib']} KiB |")
    print(f"| plant speed at the end (setpoint 1.0) | {speed:.4f} |")
    print(f"| fault | {result['fault']} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
