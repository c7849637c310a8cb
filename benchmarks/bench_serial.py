"""SerialTarget over a pty to the host runner: READ round trip, upload throughput, and the host
runner's 1 kHz release jitter next to cyclictest (rt-tests), all in one run.

    python benchmarks/bench_serial.py [--seconds 10]

Run as root for SCHED_FIFO/mlockall (the runner warns and continues without them).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import copapy as cp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.runners import build  # noqa: E402


def cyclictest(seconds: float) -> str:
    if shutil.which("cyclictest") is None:
        return "cyclictest not installed (apt-get install rt-tests)"
    loops = int(seconds * 1000)
    proc = subprocess.run(["cyclictest", "-m", "-p", "80", "-i", "1000", "-l", str(loops), "-q",
                           "-h", "10000"], capture_output=True, text=True)
    hist = [line for line in proc.stdout.splitlines() if re.match(r"^\d+\s+\d+$", line)]
    counts = [(int(a), int(b)) for a, b in (line.split() for line in hist)]
    total = sum(c for _, c in counts)
    if not total:
        return proc.stdout.strip().splitlines()[-1] if proc.stdout else proc.stderr.strip()

    def percentile(q: float) -> int:
        acc = 0
        for us, c in counts:
            acc += c
            if acc >= q * total:
                return us
        return counts[-1][0]

    maximum = re.search(r"# Max Latencies: (\d+)", proc.stdout)
    return (f"p50 {percentile(0.5)} µs, p99 {percentile(0.99)} µs, "
            f"max {int(maximum.group(1)) if maximum else '?'} µs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    counter = cp.feedback(lambda n: n + 1, init=0)
    big = cp.value(np.arange(2000, dtype=np.float32), packed=False)  # a large scalar program
    build("host")
    exe = ROOT / "runner" / "build" / "copapy-runner"
    proc = subprocess.Popen([str(exe), "--pty"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    pty = proc.stdout.readline().split()[1]
    try:
        tg = cp.SerialTarget(pty, progress=False)
        upload_task = cp.Task(big.sum() + counter * 0, period=1e-3)
        image = tg._compile([upload_task]).image
        t0 = time.perf_counter()
        tg.deploy(upload_task)
        upload_s = time.perf_counter() - t0
        tg.deploy(cp.Task(counter, period=1e-3))
        tg.start()
        reads = []
        for _ in range(2000):
            t = time.perf_counter()
            tg.read(counter)
            reads.append(time.perf_counter() - t)
        reads.sort()
        time.sleep(0.5)
        tg.reset()  # jitter statistics restart here
        before = cyclictest(min(args.seconds, 5.0))
        time.sleep(args.seconds)
        s = tg.runner_stats()
        after = cyclictest(min(args.seconds, 5.0))
        info = tg.info()
        tg.stop()
        tg.close()
    finally:
        proc.kill()
    print("\n## SerialTarget to the host runner over a pty\n")
    print("| what | value |\n|---|---:|")
    print(f"| READ round trip p50 | {statistics.median(reads) * 1e6:.1f} µs |")
    print(f"| READ round trip p99 | {reads[int(0.99 * len(reads))] * 1e6:.1f} µs |")
    print(f"| upload of a {len(image)} B image (incl. commit) | {upload_s * 1e3:.1f} ms, "
          f"{len(image) / upload_s / 1e6:.2f} MB/s |")
    print(f"\n## 1 kHz release jitter, {args.seconds:.0f} s "
          f"(real-time scheduling: {'yes' if info.realtime else 'no'})\n")
    print("| source | p50 | p99 | max | late ticks |\n|---|---:|---:|---:|---:|")
    print(f"| host runner | {s.jitter_p50_ns / 1e3:.1f} µs | {s.jitter_p99_ns / 1e3:.1f} µs | "
          f"{s.jitter_max_ns / 1e3:.1f} µs | {s.late_ticks} of {s.ticks} |")
    print(f"| cyclictest before | {before} |  |  |  |")
    print(f"| cyclictest after | {after} |  |  |  |")


if __name__ == "__main__":
    main()
