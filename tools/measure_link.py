"""Link and timing figures of a runner, for docs/zephyr.md: upload rate, READ round trip and
the LET release jitter the runner reports (STATS), measured through SerialTarget.

    python tools/measure_link.py socket://127.0.0.1:45123      # a runner already listening
    python tools/measure_link.py --qemu zephyr_app/build/mps2_an500/zephyr/zephyr.elf

--qemu boots a Zephyr mps2_an500 build in qemu-system-arm (console on the first UART, the link
on the second, as tests/support/zephyr_runners.py does). Under an emulator these are emulator timings
(the host's scheduling of qemu's threads), not hardware claims.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

import copapy as cp
from copapy.serial_target import SerialTarget


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def qemu(elf: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(["qemu-system-arm", "-M", "mps2-an500", "-cpu", "cortex-m7",
                             "-display", "none", "-monitor", "none", "-serial", "null",
                             "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on",
                             "-kernel", elf], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # the first connection gets the ready byte, then qemu listens again
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.recv(1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        time.sleep(0.3)
        yield f"socket://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=5)


def measure(url: str, reads: int, seconds: float, timeout: float) -> dict[str, float]:
    out: dict[str, float] = {}
    with SerialTarget(url, timeout=timeout, progress=False) as tg:
        # upload: an image of a packed 16k-element constant (64 kB of data)
        big = cp.value(np.linspace(0.0, 1.0, 16384, dtype="float32"))
        task = cp.Task(big.sum(), period=10e-3)
        image = tg._compile([task]).image
        began = time.monotonic()
        tg.deploy(task)
        elapsed = time.monotonic() - began
        out["image_bytes"] = len(image)
        out["upload_kB_s"] = len(image) / elapsed / 1000
        # READ round trip and LET jitter of a 1 kHz program
        counter = cp.feedback(lambda n: n + 1, init=0)
        tg.deploy(cp.Task(counter, period=1e-3))
        tg.start()
        rtts = []
        for _ in range(reads):
            t0 = time.perf_counter()
            tg.read(counter)
            rtts.append(time.perf_counter() - t0)
        time.sleep(seconds)
        stats = tg.runner_stats()
        tg.stop()
        rtts.sort()
        out["read_rtt_p50_ms"] = statistics.median(rtts) * 1e3
        out["read_rtt_p99_ms"] = rtts[int(len(rtts) * 0.99) - 1] * 1e3
        out["ticks"] = stats.ticks
        out["late_ticks"] = stats.late_ticks
        out["jitter_p50_us"] = stats.jitter_p50_ns / 1e3
        out["jitter_p99_us"] = stats.jitter_p99_ns / 1e3
        out["jitter_max_us"] = stats.jitter_max_ns / 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url", nargs="?", help="the runner's port or socket:// URL")
    ap.add_argument("--qemu", metavar="ELF", help="boot this mps2_an500 Zephyr build in qemu")
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=5.0, help="run time for the jitter")
    ap.add_argument("--timeout", type=float, default=3.0)
    args = ap.parse_args(argv)
    if (args.url is None) == (args.qemu is None):
        ap.error("give a URL or --qemu ELF")
    if args.qemu is not None:
        with qemu(args.qemu) as url:
            result = measure(url, args.reads, args.seconds, args.timeout)
    else:
        result = measure(args.url, args.reads, args.seconds, args.timeout)
    for key, value in result.items():
        print(f"{key:16} {value:.3f}" if isinstance(value, float) else f"{key:16} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
