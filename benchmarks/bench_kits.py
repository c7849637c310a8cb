"""First-use costs of copapy.kits in fresh processes: ``import cppyy``, loading the control-loop
kit with an empty compile cache (cold: g++ compiles it) and with a filled one (cached: the
library is loaded and only the declarations are parsed), the first ControlLoop (construction
with its call-wrapper warm-up) and its first run; libcopapy through ctypes for comparison.

    python benchmarks/bench_kits.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROBE = r"""
import json, time
t0 = time.perf_counter()
import cppyy
t1 = time.perf_counter()
from copapy.kits.control_loop import ControlLoop, dc_motor, kit_build
import copapy as cp
b = kit_build()
t2 = time.perf_counter()
angle = cp.value(0.0, name="angle"); vel = cp.value(0.0, name="velocity")
u = 20.0 * (1.0 - angle) - 0.8 * vel
task = cp.Task(u, period=1e-3, name="ctrl")
t3 = time.perf_counter()
loop = ControlLoop(task, states=[angle, vel], commands=[u], hardware=dc_motor(1e-3))
t4 = time.perf_counter()
loop.run(10)
t5 = time.perf_counter()
loop.read(u); loop.stats()
t6 = time.perf_counter()
loop.read(u); loop.stats()
t7 = time.perf_counter()
print(json.dumps({"import_cppyy": t1 - t0, "kit": t2 - t1, "hit": b.hit,
                  "compile": b.compile_s, "first_loop": t4 - t3, "first_run_10": t5 - t4,
                  "first_read_stats": t6 - t5, "second_read_stats": t7 - t6}))
"""

CTYPES = r"""
import json, time
import copapy as cp
angle = cp.value(0.0, name="angle")
u = 20.0 * (1.0 - angle)
tg = cp.LocalTarget(tick=1e-3); tg.deploy(cp.Task(u, period=1e-3, name="ctrl"))
t0 = time.perf_counter()
from copapy.kits.abi import CProgram
prog = CProgram(tg.image); port = prog.port("angle"); prog.write(port, 0.5); prog.tick()
t1 = time.perf_counter()
print(json.dumps({"ctypes_first_use": t1 - t0}))
"""


def run(code: str, cache: str) -> dict[str, float]:
    env = dict(os.environ, COPAPY_KIT_CACHE=cache)
    t0 = __import__("time").perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.strip().splitlines()[-1]
    result: dict[str, float] = json.loads(out)
    result["process"] = __import__("time").perf_counter() - t0
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cold, cached, ctypes_runs = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(run(PROBE, cache))
            cached.append(run(PROBE, cache))
        ctypes_runs.append(run(CTYPES, tempfile.gettempdir()))
    assert not any(r["hit"] for r in cold) and all(r["hit"] for r in cached)

    def med(rows: list[dict[str, float]], key: str) -> str:
        v = [r[key] for r in rows]
        return f"{statistics.median(v) * 1e3:.0f} ms ({min(v) * 1e3:.0f}-{max(v) * 1e3:.0f})"

    print(f"\n## First use of copapy.kits, median (min-max) of {args.repeat} fresh processes\n")
    print("| step | cold (empty cache) | cached |\n|---|--:|--:|")
    for key, label in (("import_cppyy", "import cppyy"),
                       ("kit", "control-loop kit: compile + load, or load"),
                       ("compile", "of which g++"),
                       ("first_loop", "first ControlLoop (compile a task, load, warm-up)"),
                       ("first_run_10", "its first run (start, 10 cycles, stop)"),
                       ("first_read_stats", "first read() + stats() after the warm-up"),
                       ("second_read_stats", "second read() + stats()"),
                       ("process", "whole process")):
        print(f"| {label} | {med(cold, key)} | {med(cached, key)} |")
    print(f"\nlibcopapy through ctypes (CDLL, prototypes, load, first tick): "
          f"{med(ctypes_runs, 'ctypes_first_use')}")


if __name__ == "__main__":
    main()
