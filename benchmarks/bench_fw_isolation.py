"""What running tasks unprivileged inside MPU regions costs on the bare-metal Cortex-M7
firmware in qemu (issue 29, items 3-4): the mean job execution time the firmware measures
(STATS, CMSDK TIMER0 at 25 MHz) for a small and a larger task, on this tree's firmware and on
another firmware file given with --baseline (e.g. one built from a revision before the
isolation). Under ``-icount shift=5`` (tests/support/runners.py) each instruction is 32 ns of
guest time, so a time difference / 32 ns is instructions. Also prints text/data/bss.

``--attacks ELF`` instead runs the attack corpus of tests/test_fw_isolation.py against that
firmware, one fresh boot per case, and prints what each did: the fault reported (or none),
whether ticks go on, the state HELLO reports, whether the board still answers.

    make -C <old tree>/runner/baremetal BUILD=/tmp/fw-old /tmp/fw-old/runner-cortex-m7.elf
    python benchmarks/bench_fw_isolation.py --baseline /tmp/fw-old/runner-cortex-m7.elf
    python benchmarks/bench_fw_isolation.py --attacks /tmp/fw-old/runner-cortex-m7.elf
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import copapy as cp
from copapy.serial_target import SerialTarget

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.faults import FaultWaiter  # noqa: E402
from tests.support.runners import build, qemu_process  # noqa: E402
from tests.test_fw_isolation import CASES, Fw, deploy, offset_of, symbols  # noqa: E402

NS_PER_INSTRUCTION = 32  # -icount shift=5


def tasks() -> dict[str, cp.Task]:
    counter = cp.feedback(lambda n: n + 1, init=0)
    gain = cp.value(0.75)
    work = cp.sin(gain) * cp.cos(gain) + cp.sqrt(gain) / 3.0 + cp.exp(gain) * cp.log(gain + 2.0)
    return {"counter": cp.Task(counter, period=1e-3), "math": cp.Task(work, period=1e-3)}


def job_ns(elf: Path, seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    with qemu_process("cortex-m7", elf=elf) as (url, _proc), \
            SerialTarget(url, timeout=3.0, progress=False) as tg:
        for name, task in tasks().items():
            tg.deploy(task)
            tg.start()
            time.sleep(seconds)
            tg.stop()
            s = tg.stats()[0]
            out[name] = s.mean_exec_ns
            print(f"  {name}: {s.runs} jobs, mean {s.mean_exec_ns:.0f} ns "
                  f"(max {s.max_exec_ns} ns)")
    return out


def sizes(elf: Path) -> str:
    return subprocess.run(["arm-none-eabi-size", str(elf)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[1]


def attack_outcome(elf: Path, fw: Fw, name: str) -> str:
    case = CASES[name]
    with qemu_process("cortex-m7", elf=elf) as (url, proc):
        try:
            with SerialTarget(url, timeout=2.0, progress=False) as tg:
                waiter = FaultWaiter(tg)
                v = deploy(tg, lambda img: case.code(fw, img))
                tg.start()
                waiter.arrived.wait(3)
                fault = waiter.faults[-1].kind if waiter.faults else "none"
                before = tg.read(v["counter"])
                time.sleep(0.3)
                ticks = "ticking" if tg.read(v["counter"]) > before else "no ticks"
                out = f"fault {fault}, {ticks}, HELLO: {tg.info().state}"
        except Exception as e:  # what the attack did to the board is the result
            out = f"{type(e).__name__}: {str(e)[:70]}"
        return out + ("" if proc.poll() is None else "; qemu exited")


def attacks(elf: Path) -> None:
    sym = symbols(elf)
    fw = Fw(sym, sym["srv"] + offset_of("offsetof(cp_server, cfg.require_auth)"),
            sym["srv"] + offset_of("offsetof(cp_server, owner)"))
    print(f"| case | expected here | {elf} |\n|---|---|---|")
    for name, case in CASES.items():
        print(f"| {name} | {case.kind or 'ignored'} | {attack_outcome(elf, fw, name)} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="a firmware ELF to compare with")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--attacks", type=Path, help="run the attack corpus against this ELF")
    args = ap.parse_args()
    if args.attacks is not None:
        attacks(args.attacks)
        return
    build("build/runner-cortex-m7.elf", "BUILD=build", directory="runner/baremetal")
    elf = ROOT / "runner" / "baremetal" / "build" / "runner-cortex-m7.elf"
    print("size (text data bss dec hex):", sizes(elf))
    print("isolated (this tree):")
    now = job_ns(elf, args.seconds)
    if args.baseline is None:
        return
    print("baseline size:", sizes(args.baseline))
    print(f"baseline ({args.baseline}):")
    base = job_ns(args.baseline, args.seconds)
    for name in now:
        extra = now[name] - base[name]
        print(f"{name}: +{extra:.0f} ns per job = {extra / NS_PER_INSTRUCTION:.0f} "
              f"instructions ({now[name] / base[name]:.2f}x)")


if __name__ == "__main__":
    main()
