"""Cost of Zephyr user mode (issue 29 item 3; docs/zephyr.md "User mode"): the two-task
program of the fault tests on the mps2_an500 firmware in qemu, privileged (mps2_an500) and
with every job in a user thread (mps2_an500_user). The guest clock counts instructions
(-icount shift=5: one instruction = 32 ns), so a job's mean execution time / 32 ns is its
instruction count, guard included. Prints per task the mean and max job time of both builds,
the difference per job in instructions, and flash/RAM of both images.

    # ZEPHYR_BASE, the toolchain and west as for the tests (docs/zephyr.md, "Tests")
    PYTHONPATH=src python benchmarks/bench_zephyr_usermode.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from copapy.serial_target import SerialTarget

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import zephyr_runners as zr  # noqa: E402
from tests.test_safety_host import bind_two, two_tasks  # noqa: E402

NS_PER_INSTRUCTION = 32  # qemu -icount shift=5


def measure(variant: str, seconds: float) -> dict[str, tuple[int, float, int]]:
    with zr.qemu_runner(variant) as url, SerialTarget(url, timeout=3.0) as tg:
        tasks, v = two_tasks(victim_budget=None)
        bind_two(tg, v)
        tg.deploy(*tasks)
        tg.start()
        time.sleep(seconds)
        tg.stop()
        return {s.name: (s.runs, s.mean_exec_ns, s.max_exec_ns) for s in tg.stats()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    rows = {variant: measure(variant, args.seconds) for variant in ("mps2_an500",
                                                                     "mps2_an500_user")}
    print(f"{'task':10} {'build':17} {'runs':>6} {'mean ns':>9} {'max ns':>9} {'instr':>7}")
    for task in rows["mps2_an500"]:
        for variant, r in rows.items():
            runs, mean, mx = r[task]
            print(f"{task:10} {variant:17} {runs:6d} {mean:9.0f} {mx:9d} "
                  f"{mean / NS_PER_INSTRUCTION:7.0f}")
        user, privileged = rows["mps2_an500_user"][task][1], rows["mps2_an500"][task][1]
        extra = user - privileged
        print(f"{task:10} user mode adds {extra:.0f} ns = {extra / NS_PER_INSTRUCTION:.0f} "
              f"instructions per job (ratio {user / max(1.0, privileged):.1f}x)")
    for variant in ("mps2_an500", "mps2_an500_user"):
        print(variant, zr.sizes(zr.BUILD_ROOT / variant))


if __name__ == "__main__":
    main()
