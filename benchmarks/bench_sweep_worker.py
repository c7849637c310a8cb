"""A Dask worker of another CPU (issue 33): scenarios per second of the motor PID Monte-Carlo
(0.1 simulated seconds at a 10 kHz tick, angle and PWM every 10 ms, two metrics) on one
x86_64 `dask worker` here and on one aarch64 `dask worker` in the Debian userland under
qemu-user (tools/make_userland.sh, tools/userland_worker.sh setup), both joined to one
`dask scheduler` on 127.0.0.1; the two results are checked to be the same bits.

    COPAPY_USERLANDS=/work/userlands PYTHONPATH=src python benchmarks/bench_sweep_worker.py \
        [--scenarios 2000] [--rounds 3]

Needs root (chroot). Each row is the best of --rounds of the sweep through the client (the
plan is compiled before timing); the ratio is against the x86_64 worker.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import copapy as cp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import motor_pid  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not os.environ.get("COPAPY_USERLANDS"):
        sys.exit("set COPAPY_USERLANDS (the directory holding aarch64/, docs/architectures.md)")
    from distributed import Client

    dask = str(Path(sys.executable).parent / "dask")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COPAPY_PROGRESS": "0"}
    tmp = Path(tempfile.mkdtemp())
    log = open(tmp / "dask.log", "wb")
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(tmp / "s.json")],
                              env=env, stdout=log, stderr=log)]
    try:
        while not (tmp / "s.json").exists() or not (tmp / "s.json").stat().st_size:
            time.sleep(0.05)
        address = json.loads((tmp / "s.json").read_text())["address"]
        worker = [address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                  "127.0.0.1"]
        procs.append(subprocess.Popen([dask, "worker", *worker], env=env, stdout=log,
                                      stderr=log))
        procs.append(subprocess.Popen(
            [str(ROOT / "tools" / "userland_worker.sh"), "run", "aarch64",
             "/root/copapy-worker/venv/bin/dask", "worker", *worker], env=env, stdout=log,
            stderr=log))
        with Client(address) as client:
            start = time.perf_counter()
            client.wait_for_workers(2, timeout=900)
            print(f"workers up in {time.perf_counter() - start:.1f} s: "
                  f"{sorted(client.run(lambda: os.uname().machine).values())}")
            rows = {arch: best(client, arch, args.scenarios, args.rounds)
                    for arch in ("x86_64", "aarch64")}
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(60)
        log.close()
    (t86, r86), (tarm, rarm) = rows["x86_64"], rows["aarch64"]
    assert r86.identical(rarm), "the aarch64 worker's bits differ"
    n = args.scenarios
    print(f"{n} scenarios, best of {args.rounds}; the same bits: {r86.identical(rarm)}")
    print(f"x86_64 worker (native)      {n / t86:10.0f} scenarios/s   1.00x")
    print(f"aarch64 worker (qemu-user)  {n / tarm:10.0f} scenarios/s   {t86 / tarm:.3f}x")


def best(client: Any, arch: str, n: int, rounds: int) -> tuple[float, Any]:
    program = motor_pid.sweep_program()
    names = program[2]
    sc = cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                               "inertia": cp.sweep.around(2e-5, 0.2),
                               "seed": cp.sweep.seeds(), "noise": 2.0}, n, seed=5)
    metrics = {"iae": cp.sweep.iae(names["setpoint"] - names["angle"]),
               "peak": cp.sweep.peak(names["angle"])}
    from copapy.sweeps import build_plan, encode
    from copapy.sweeps.engines import run_dask

    keys = list(sc.columns)
    plan = build_plan(program, keys, 0.1, ["angle", "pwm"], metrics, None, 1e-2,
                      arch=None if arch == "x86_64" else arch)
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        raw = run_dask(client, plan, lambda a, b: encode(plan, sc.slice(a, b), keys), n,
                       max(1, n // 8), None)
        times.append(time.perf_counter() - start)
        result = raw
    from copapy.sweeps import SweepResult
    from copapy.sweeps.engines import split

    series, finals = split(result, plan, n)  # type: ignore[arg-type]
    return min(times), SweepResult(sc, plan.time, series, finals, result[2])  # type: ignore[index]


if __name__ == "__main__":
    main()
