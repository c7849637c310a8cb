"""The live scope at 1 kHz from the host runner (issue 34): the runner streams every tick of
a 1 kHz program to the scope, which records them all while headless Chromium shows the page.
Reports recorded ticks against ticks run (they must be equal), the page's update rate as the
browser counts it, the browser's CPU, and the runner's release jitter without and with the
scope open (the scope must not disturb the real-time side).

    python benchmarks/bench_scope.py --minutes 10               # the issue's acceptance run
    python benchmarks/bench_scope.py --seconds 3 --json out.json   # a smoke run (the test)
    python benchmarks/bench_scope.py --seconds 20 --screenshot docs/guide/howto/scope.png
    python benchmarks/bench_scope.py --seconds 10 --stall 2   # stop the scope's process 2 s
    python benchmarks/bench_scope.py --seconds 1 --rounds 6 --round-seconds 30  # jitter only

``--rounds N`` adds N interleaved rounds of ``--round-seconds`` without and with the scope
open (ABBA order), so a host whose load drifts over the run (a shared machine) weighs both
sides alike: the jitter ratio of the long run compares two phases minutes apart.

Needs Debian's chromium and chromium-driver and selenium (the dev extra). Run as root (or with
rtprio) for SCHED_FIFO; without it the jitter numbers are those of a normal thread.
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
from copapy.serial_target import SerialTarget

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support import browser as br  # noqa: E402
from support.runners import runner_process  # noqa: E402


def program() -> tuple[list[cp.Task], dict[str, Any], dict[str, Any]]:
    """A 1 kHz loop with some work: a filtered, gained sine and a tick counter."""
    gain = cp.value(1.0, name="gain")
    phase = cp.feedback(lambda p: p + cp.dt * 6.283185307179586, init=0.0)
    wave = gain * cp.sin(phase)
    smooth = cp.feedback(lambda y: y + (wave - y) * 0.05, init=0.0)
    count = cp.feedback(lambda n: n + 1.0, init=0.0)
    return ([cp.Task(wave, smooth, count, period=1e-3, name="loop")],
            {"wave": wave, "smooth": smooth}, {"gain": gain})


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of processes (those that went away count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (the browser's processes under chromedriver)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def jitter(tg: SerialTarget) -> dict[str, float]:
    s = tg.runner_stats()
    return {"ticks": s.ticks, "late_ticks": s.late_ticks, "stream_dropped": s.stream_dropped,
            "p50_us": s.jitter_p50_ns / 1e3,
            "p99_us": s.jitter_p99_ns / 1e3, "max_us": s.jitter_max_ns / 1e3}


def stall(seconds: float) -> None:
    """Stops this process (the scope, its reader) for ``seconds``: a host stall."""
    me = os.getpid()
    subprocess.Popen(["sh", "-c", f"kill -STOP {me}; sleep {seconds}; kill -CONT {me}"]).wait()


def phase(tg: SerialTarget, seconds: float) -> dict[str, float]:
    """The runner's jitter over ``seconds`` of running from a reset."""
    tg.start()
    time.sleep(seconds)
    tg.stop()
    return jitter(tg)


def interleaved(tg: SerialTarget, driver: Any, rounds: int, seconds: float, record: Path,
                signals: dict[str, Any], controls: dict[str, Any]) -> dict[str, Any]:
    """Jitter without and with the scope open (the page in the browser, recording), in
    ``rounds`` rounds of both, alternating which goes first; every scope phase must record
    every tick it ran."""
    alone, scoped, incomplete = [], [], 0
    for k in range(rounds):
        for with_scope in ((False, True) if k % 2 == 0 else (True, False)):
            tg.reset()
            if not with_scope:
                driver.get("about:blank")
                alone.append(phase(tg, seconds))
                continue
            with tg.scope(controls=controls, ranges={"gain": (0, 2)}, record=str(record),
                          **signals) as scope:
                br.open_page(driver, scope.url)
                scoped.append(phase(tg, seconds))
                ran = scope.core.drain(timeout=30)
                incomplete += ran != scope.recorded or scope.lost != 0
    return {"alone": alone, "with_scope": scoped, "incomplete_phases": incomplete}


def median(xs: list[float]) -> float:
    ys = sorted(xs)
    return (ys[(len(ys) - 1) // 2] + ys[len(ys) // 2]) / 2


def run(seconds: float, screenshot: Path | None, record: Path, stall_s: float = 0.0,
        rounds: int = 0, round_seconds: float = 30.0) -> dict[str, Any]:
    tasks, signals, controls = program()
    with runner_process("--pty") as (address, _proc), SerialTarget(address) as tg:
        tg.deploy(*tasks)
        realtime = tg.info().realtime
        tg.start()  # without the scope: the runner alone
        time.sleep(seconds)
        tg.stop()
        alone = jitter(tg)
        tg.reset()  # time 0, statistics cleared
        with br.chromium() as driver, tg.scope(controls=controls, ranges={"gain": (0, 2)},
                                               record=str(record), **signals) as scope:
            br.open_page(driver, scope.url)
            browser = descendants(driver.service.process.pid)
            tg.start()
            # each clock read right after what it times (a busy browser answers slowly)
            u0 = br.updates(driver)
            t0, c0, py0 = time.monotonic(), cpu_seconds(browser), os.times()
            if stall_s:
                time.sleep(seconds / 2)
                stall(stall_s)
                time.sleep(max(0.0, seconds / 2 - stall_s))
            else:
                time.sleep(seconds)
            c1, py1, t1 = cpu_seconds(browser), os.times(), time.monotonic()
            u1 = br.updates(driver)
            t1u = time.monotonic()
            if screenshot is not None:
                br.screenshot(driver, screenshot)
            tg.stop()
            ran = scope.core.drain(timeout=30)
            recorded = scope.recorded
            gaps = scope.lost
            with_scope = jitter(tg)
            rounds_result = interleaved(
                tg, driver, rounds, round_seconds, record, signals, controls) \
                if rounds else None
        elapsed = t1 - t0
        return {
            "interleaved": rounds_result,
            "seconds": seconds, "realtime": realtime, "ticks_run": ran, "recorded": recorded,
            "gaps": gaps, "page_updates_per_s": (u1 - u0) / (t1u - t0),
            "browser_cpu_percent": 100 * (c1 - c0) / elapsed,
            "scope_process_cpu_percent": 100 * ((py1.user + py1.system)
                                                - (py0.user + py0.system)) / elapsed,
            "jitter_alone": alone, "jitter_with_scope": with_scope,
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="each phase's length")
    ap.add_argument("--seconds", type=float, help="each phase's length (instead of --minutes)")
    ap.add_argument("--screenshot", type=Path, help="save the page here (PNG)")
    ap.add_argument("--json", type=Path, help="write the numbers here")
    ap.add_argument("--rounds", type=int, default=0,
                    help="then this many interleaved rounds without and with the scope")
    ap.add_argument("--round-seconds", type=float, default=30.0,
                    help="each phase's length in a round")
    ap.add_argument("--stall", type=float, default=0.0,
                    help="stop the scope's process this many seconds mid-run (a host stall)")
    args = ap.parse_args()
    seconds = args.seconds if args.seconds is not None else 60 * args.minutes
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        r = run(seconds, args.screenshot, Path(tmp) / "scope.csv", args.stall, args.rounds,
                args.round_seconds)
    r["loadavg_before"], r["loadavg_after"] = load_before, os.getloadavg()
    a, w = r["jitter_alone"], r["jitter_with_scope"]
    print(f"{seconds:g} s at 1 kHz per phase (SCHED_FIFO: {r['realtime']})"
          f"{f', scope stopped {args.stall:g} s mid-run' if args.stall else ''}")
    print(f"recorded ticks {r['recorded']} / ticks run {r['ticks_run']} "
          f"({'equal' if r['recorded'] == r['ticks_run'] else 'NOT EQUAL'}), reported lost "
          f"{r['gaps']} (run - recorded {r['ticks_run'] - r['recorded']}), STREAM events the "
          f"runner dropped {w['stream_dropped']}")
    print(f"page updates {r['page_updates_per_s']:.1f}/s; browser CPU "
          f"{r['browser_cpu_percent']:.1f} %; scope process CPU "
          f"{r['scope_process_cpu_percent']:.1f} %")
    for name, j in (("runner alone", a), ("scope open", w)):
        print(f"{name:13} jitter p50 {j['p50_us']:.1f} us, p99 {j['p99_us']:.1f} us, "
              f"max {j['max_us']:.1f} us, late ticks {j['late_ticks']}")
    print(f"jitter ratio with/without scope: p99 "
          f"{w['p99_us'] / a['p99_us'] if a['p99_us'] else float('nan'):.2f}, max "
          f"{w['max_us'] / a['max_us'] if a['max_us'] else float('nan'):.2f}")
    inter = r["interleaved"]
    if inter is not None:
        for key in ("p50_us", "p99_us", "max_us"):
            a_k = [j[key] for j in inter["alone"]]
            w_k = [j[key] for j in inter["with_scope"]]
            print(f"interleaved {len(a_k)} x {args.round_seconds:g} s: {key[:-3]} alone "
                  f"{' '.join(f'{x:.1f}' for x in a_k)} / with scope "
                  f"{' '.join(f'{x:.1f}' for x in w_k)} us; ratio of medians "
                  f"{median(w_k) / median(a_k):.2f}")
        print(f"interleaved late ticks alone {[j['late_ticks'] for j in inter['alone']]}, "
              f"with scope {[j['late_ticks'] for j in inter['with_scope']]}; scope phases "
              f"with a tick not recorded: {inter['incomplete_phases']}")
    print(f"load average (1, 5, 15 min) before {r['loadavg_before']}, after "
          f"{r['loadavg_after']}")
    if args.json is not None:
        args.json.write_text(json.dumps(r, indent=2))
    complete = r["recorded"] == r["ticks_run"] and r["gaps"] == 0 and (
        inter is None or inter["incomplete_phases"] == 0)
    if not complete:
        print(f"FAILED: {r['ticks_run'] - r['recorded']} of {r['ticks_run']} ticks run were not "
              f"recorded ({r['gaps']} reported lost by the scope)", file=sys.stderr)
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
