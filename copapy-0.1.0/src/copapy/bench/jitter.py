"""``copapy bench jitter``: the wake-up latency of every way of running a copapy program
periodically, side by side, in one run.

Variants (each cell runs in a fresh process):

=================  ==========================================================================
py_sleep           pure Python loop, ``time.sleep`` to absolute deadlines (50 µs timer slack)
py_slack1          the same after ``prctl(PR_SET_TIMERSLACK, 1)``
py_copapy          the slack-1 Python loop calling the copapy program in-process every cycle
                   (LocalTarget: write the state, step one tick, read the command)
c_ctypes           libcopapy's C loop (``copapy_loop_run``) through ctypes, GIL released
cppyy_loop         the cppyy ControlLoop (C++ thread, DC-motor plant), Python thread waiting
host_runner        the host runner process (copapy-runner) and its real-time tick thread
ros2_control       the copapy controller in ros2_control's controller_manager (the real
                   ros2_control_node where COPAPY_ROS2_SETUP is found, else the loop that
                   reproduces its timing)
ros2_trivial       the trivial controller in the same loop (the copapy controller's baseline)
cyclictest         rt-tests' cyclictest, the baseline
=================  ==========================================================================

Conditions: ``idle`` (nothing added), ``stress`` (``stress-ng --cpu N``, N = CPUs), ``gilhog``
(a busy pure-Python thread in the process that runs the loop, or that drives it for the
external variants). Policies: ``other`` (SCHED_OTHER) and ``fifo`` (SCHED_FIFO 80 and
mlockall; ros2_control: the node's own priority 50). For every FIFO cell the bench holds
``/dev/cpu_dma_latency`` at 0 (cyclictest would do it itself; here every variant gets it
alike, cyclictest runs with ``--default-system``).

Latency = wake-up time minus the deadline (what cyclictest reports), 1 kHz, the first cycles
of each cell dropped. ``missed``: deadlines skipped because the loop was a period or more late
(for cyclictest, the host runner and ros2_control: wake-ups a period or more late).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tqdm import tqdm

from .jitter_plan import CONDITIONS, POLICIES, VARIANTS, add_arguments, describe, parse_list

PERIOD_NS = 1_000_000
FIFO_PRIORITY = 80
PR_SET_TIMERSLACK = 29


# ---- statistics --------------------------------------------------------------------------

@dataclass
class Cell:
    variant: str
    condition: str
    policy: str
    samples: int
    p50_us: float | None
    p99_us: float | None
    p999_us: float | None
    max_us: float | None
    missed: int
    note: str = ""
    ok: bool = True
    steal_ms: float = 0.0  # CPU time the hypervisor took from this machine's vCPUs meanwhile


def summarize(lat_ns: NDArray[np.int64], drop: int) -> dict[str, float | int | None]:
    x = lat_ns[drop:] if lat_ns.size > drop else lat_ns
    if x.size == 0:
        return {"samples": 0, "p50_us": None, "p99_us": None, "p999_us": None, "max_us": None}
    q = np.percentile(x, [50, 99, 99.9]) / 1e3
    return {"samples": int(x.size), "p50_us": float(q[0]), "p99_us": float(q[1]),
            "p999_us": float(q[2]), "max_us": float(x.max()) / 1e3}


def drop_count(cycles: int) -> int:
    return min(100, cycles // 10)


# ---- the worker side: one variant in this process ----------------------------------------

def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def set_slack1() -> None:
    _libc().prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0)


def set_fifo() -> bool:
    """SCHED_FIFO 80 and mlockall for this process's calling thread; False if denied."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    except (PermissionError, OSError):
        return False
    _libc().mlockall(3)  # MCL_CURRENT | MCL_FUTURE
    return True


@contextlib.contextmanager
def gil_hog(active: bool) -> Iterator[None]:
    """A busy pure-Python thread for the duration (it holds the GIL whenever it runs)."""
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    t = threading.Thread(target=spin, daemon=True)
    if active:
        t.start()
    try:
        yield
    finally:
        stop.set()
        if active:
            t.join()


def program() -> dict[str, Any]:
    """The program every variant runs: a PID-style motor position controller (1 kHz)."""
    import copapy as cp

    angle = cp.value(0.0, name="angle")
    velocity = cp.value(0.0, name="velocity")
    setpoint = cp.value(1.0, name="setpoint")
    err = setpoint - angle
    u = 20.0 * err - 0.8 * velocity + 3.0 * cp.integrate(err)
    u = cp.where(u > 12.0, 12.0, cp.where(u < -12.0, -12.0, u))
    task = cp.Task(u, period=PERIOD_NS * 1e-9, name="ctrl")
    return {"task": task, "angle": angle, "velocity": velocity, "setpoint": setpoint, "u": u}


def python_loop(cycles: int, step: Callable[[int], None] | None) -> tuple[NDArray[np.int64], int]:
    """A Python loop to absolute deadlines with cyclictest's overrun rule, for as long as
    ``cycles`` periods take (a loop that misses deadlines runs fewer cycles, not longer)."""
    lat = np.zeros(cycles, dtype=np.int64)
    missed = 0
    clock = time.monotonic_ns
    deadline = clock() + PERIOD_NS
    end = deadline + cycles * PERIOD_NS
    k = 0
    while deadline < end:
        now = clock()
        if deadline > now:
            time.sleep((deadline - now) * 1e-9)
        lat[k] = clock() - deadline
        if step is not None:
            step(k)
        k += 1
        deadline += PERIOD_NS
        done = clock()
        if done >= deadline:
            skip = (done - deadline) // PERIOD_NS + 1
            deadline += skip * PERIOD_NS
            missed += skip
    return lat[:k], missed


def worker(variant: str, policy: str, condition: str, seconds: float,
           out: Path) -> dict[str, Any]:
    """Runs one cell in this process; latencies (ns) go to ``out`` (.npy)."""
    cycles = max(int(seconds * 1e9 / PERIOD_NS), 20)
    fifo = policy == "fifo"
    info: dict[str, Any] = {"missed": 0, "note": ""}
    lat: NDArray[np.int64]
    hog = condition == "gilhog"
    if variant in ("py_sleep", "py_slack1", "py_copapy"):
        step = None
        if variant != "py_sleep":
            set_slack1()
        if variant == "py_copapy":
            import copapy as cp

            p = program()
            tg = cp.LocalTarget(tick=PERIOD_NS * 1e-9, measure=False)
            tg.deploy(p["task"])

            def step(k: int) -> None:
                tg.write(p["angle"], 0.001 * (k % 1000))
                tg.step(PERIOD_NS * 1e-9)
                tg.read(p["u"])

        if fifo and not set_fifo():
            info["note"] = "SCHED_FIFO denied"
        with gil_hog(hog):
            lat, info["missed"] = python_loop(cycles, step)
    elif variant == "c_ctypes":
        import copapy as cp
        from copapy.kits import abi

        p = program()
        tg = cp.LocalTarget(tick=PERIOD_NS * 1e-9)
        tg.deploy(p["task"])
        prog = abi.CProgram(tg.image)
        lat = np.zeros(cycles, dtype=np.int64)
        flags = abi.LOOP_SLACK1 | ((abi.LOOP_FIFO | abi.LOOP_MLOCK) if fifo else 0)
        with gil_hog(hog):
            result = prog.loop(cycles, flags=flags, priority=FIFO_PRIORITY, latencies=lat)
        info["missed"] = result.missed
        if fifo and not result.rt & 1:
            info["note"] = "SCHED_FIFO denied"
    elif variant == "cppyy_loop":
        from copapy.kits.control_loop import ControlLoop, dc_motor

        p = program()
        loop = ControlLoop(p["task"], states=[p["angle"], p["velocity"]], commands=[p["u"]],
                           parameters=[p["setpoint"]], hardware=dc_motor(PERIOD_NS * 1e-9),
                           fifo=fifo, priority=FIFO_PRIORITY, mlock=fifo, slack1=True,
                           latency_capacity=cycles)
        with gil_hog(hog):
            stats = loop.run(cycles)
        lat = loop.latencies()
        info["missed"] = stats.missed
        if fifo and not stats.rt & 1:
            info["note"] = "SCHED_FIFO denied"
    elif variant == "host_runner":
        with gil_hog(hog):
            info.update(host_runner(seconds, fifo))
        lat = np.zeros(0, dtype=np.int64)
    elif variant in ("ros2_control", "ros2_trivial"):
        with gil_hog(hog):
            lat, more = ros2(variant == "ros2_control", seconds, fifo)
        info.update(more)
    elif variant == "cyclictest":
        with gil_hog(hog):
            info.update(cyclictest(cycles, fifo))
        lat = info.pop("samples", np.zeros(0, dtype=np.int64))
    else:
        raise SystemExit(f"unknown variant {variant!r}; the variants: {', '.join(VARIANTS)}")
    np.save(out, lat)
    return info


def host_runner(seconds: float, fifo: bool, extra: Sequence[str] = ()) -> dict[str, Any]:
    """One run of the host runner (``extra``: more of its options, e.g. --no-seccomp)."""
    import copapy as cp
    from copapy.host_runner import runner_executable
    from copapy.target_common import TaskStats

    exe = runner_executable()
    argv = [str(exe), "--pty", *([] if fifo else ["--no-rt"]), *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        pty = proc.stdout.readline().split()[1]
        p = program()
        tg = cp.SerialTarget(pty, progress=False)
        tg.deploy(p["task"])
        tg.start()
        time.sleep(min(0.2, seconds / 5))
        tg.reset()  # the jitter histogram starts here
        time.sleep(seconds)
        s = tg.runner_stats()
        realtime = tg.info().realtime
        tg.stop()
        tg.close()
    finally:
        proc.kill()
        proc.wait()
    return {"summary": {"samples": int(s.ticks), "p50_us": s.jitter_p50_ns / 1e3,
                        "p99_us": s.jitter_p99_ns / 1e3, "p999_us": None,
                        "max_us": s.jitter_max_ns / 1e3},
            "missed": int(s.late_ticks),
            "exec_mean_ns": TaskStats.from_counters("ctrl", s.tasks[0]).mean_exec_ns,
            "note": ("" if realtime or not fifo else "real-time set-up denied; ") +
                    "the runner's histogram: no p99.9, no samples"}


def ros2(copapy_controller: bool, seconds: float, fifo: bool) -> tuple[NDArray[np.int64],
                                                                       dict[str, Any]]:
    from copapy.kits import ros2_control as rc

    priority = 50 if fifo else 0
    note = ""
    with tempfile.TemporaryDirectory() as d:
        kw: dict[str, Any] = {}
        if copapy_controller:
            import copapy as cp

            q = [cp.value(0.0, name=f"q{i}") for i in range(2)]
            u = [q[i] + 0.01 * (0.5 - q[i]) for i in range(2)]
            tg = cp.LocalTarget(tick=PERIOD_NS * 1e-9)
            tg.deploy(cp.Task(*u, period=PERIOD_NS * 1e-9, name="ctrl"))
            image = Path(d) / "ctrl.cpim"
            image.write_bytes(tg.image)
            kw = {"image": image, "state_ports": ["q0", "q1"],
                  "command_ports": ["ctrl.out0", "ctrl.out1"]}
        if rc.ros2_setup() is not None:
            prefix = Path(os.environ.get("COPAPY_BENCH_ROS2_PREFIX") or rc.build_package())
            run = rc.run_controller_manager(2, seconds, prefix=prefix, thread_priority=priority,
                                            **kw)
            note = "real controller_manager"
        else:
            run = rc.run_emulated(2, max(int(seconds * 1000), 20), thread_priority=priority,
                                  record=False, **kw)
            note = "emulated ros2_control_node loop (no ROS found)"
    if fifo and not run.fifo:
        note += "; SCHED_FIFO denied"
    lat = run.latencies_ns
    return lat, {"missed": int((lat >= PERIOD_NS).sum()), "note": note}


def cyclictest(cycles: int, fifo: bool) -> dict[str, Any]:
    exe = shutil.which("cyclictest")
    if exe is None:
        return {"error": "cyclictest not installed (apt-get install rt-tests)"}
    # --default-system: the bench holds /dev/cpu_dma_latency itself, alike for every variant
    argv = [exe, "-m", "-i", str(PERIOD_NS // 1000), "-l", str(cycles), "-q", "-h", "20000",
            "--default-system", *(["-p", str(FIFO_PRIORITY)] if fifo else ["--policy=other"])]
    proc = subprocess.run(argv, capture_output=True, text=True)
    counts = [(int(a), int(b)) for a, b in re.findall(r"^(\d+)\s+(\d+)\s*$", proc.stdout, re.M)]
    counts = [(us, c) for us, c in counts if c]
    total = sum(c for _, c in counts)
    overflow = re.search(r"# Histogram Overflows: (\d+)", proc.stdout)
    maximum = re.search(r"# Max Latencies: (\d+)", proc.stdout)
    if not total:
        return {"error": (proc.stderr or proc.stdout).strip()[-300:] or "no histogram"}
    over = int(overflow.group(1)) if overflow else 0
    # the histogram as samples (whole µs; an overflow as the histogram's end, 20 ms): the run
    # as a whole, its first cycles cannot be told apart
    us = np.repeat(np.array([u for u, _ in counts], dtype=np.int64),
                   [c for _, c in counts])
    lat = np.concatenate([us, np.full(over, 20000, dtype=np.int64)]) * 1000
    late = int((lat >= PERIOD_NS).sum())
    return {"samples": lat, "missed": late,
            "max_us": float(maximum.group(1)) if maximum else None,
            "note": "1 µs histogram, whole run"}


# ---- the parent side: cells, load, plots -------------------------------------------------

@contextlib.contextmanager
def stress(active: bool) -> Iterator[str]:
    if not active:
        yield ""
        return
    exe = shutil.which("stress-ng")
    if exe is None:
        raise SystemExit("the stress condition needs stress-ng (apt-get install stress-ng)")
    n = os.cpu_count() or 1
    proc = subprocess.Popen([exe, "--cpu", str(n), "--timeout", "0", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        yield f"stress-ng --cpu {n}"
    finally:
        proc.terminate()
        proc.wait()


@contextlib.contextmanager
def dma_latency0(active: bool) -> Iterator[bool]:
    """Hold /dev/cpu_dma_latency at 0 (PM QoS: the vCPU polls instead of halting)."""
    fd = -1
    if active:
        try:
            fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
            os.write(fd, (0).to_bytes(4, "little"))
        except OSError:
            fd = -1
    try:
        yield fd >= 0
    finally:
        if fd >= 0:
            os.close(fd)


def steal_ms() -> float:
    """All vCPUs' steal time so far (/proc/stat): a VM's stalls that no guest loop can avoid."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run_cell(variant: str, condition: str, policy: str, seconds: float,
             tmp: Path) -> tuple[dict[str, Any], NDArray[np.int64]]:
    """One cell in a fresh process: (what the worker reported, latencies in ns)."""
    out = tmp / f"{variant}-{condition}-{policy}.npy"
    argv = [sys.executable, "-m", "copapy.bench.jitter", "--worker", variant, policy,
            condition, str(seconds), str(out)]
    stolen = steal_ms()
    with stress(condition == "stress"), dma_latency0(policy == "fifo"):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600 + 5 * seconds)
    stolen = steal_ms() - stolen
    info: dict[str, Any] = {}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            info = json.loads(line)
            break
    if proc.returncode != 0 or not info:
        info = {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    info["steal_ms"] = stolen
    lat = np.load(out) if out.is_file() and "error" not in info else np.zeros(0, np.int64)
    if variant != "cyclictest":  # cyclictest's histogram is of the whole run
        lat = lat[drop_count(lat.size):]
    return info, lat


def combine(variant: str, condition: str, policy: str, infos: list[dict[str, Any]],
            lats: list[NDArray[np.int64]]) -> tuple[Cell, NDArray[np.int64]]:
    """The rounds of one cell: samples pooled; a variant that reports only a summary (the host
    runner's histogram) gives the median of its rounds' p50 and p99 and the largest max."""
    errors = [i["error"] for i in infos if "error" in i]
    good = [i for i in infos if "error" not in i]
    if not good:
        return Cell(variant, condition, policy, 0, None, None, None, None, 0,
                    str(errors[0])[:200], False), np.zeros(0, np.int64)
    notes = sorted({i.get("note", "") for i in good} - {""})
    if errors:
        notes.append(f"{len(errors)} of {len(infos)} rounds failed: {str(errors[0])[:80]}")
    missed = sum(int(i.get("missed", 0)) for i in good)
    stolen = sum(float(i.get("steal_ms", 0.0)) for i in infos)
    summaries = [i["summary"] for i in good if "summary" in i]
    if summaries:
        def med(key: str) -> float | None:
            v = [s[key] for s in summaries if s.get(key) is not None]
            return float(np.median(v)) if v else None

        maxes = [s["max_us"] for s in summaries if s.get("max_us") is not None]
        return Cell(variant, condition, policy, sum(int(s["samples"]) for s in summaries),
                    med("p50_us"), med("p99_us"), None, max(maxes) if maxes else None, missed,
                    "; ".join(notes), steal_ms=stolen), np.zeros(0, np.int64)
    lat = np.concatenate(lats) if lats else np.zeros(0, np.int64)
    st = summarize(lat, 0)
    maxes = [i["max_us"] for i in good if i.get("max_us") is not None]
    if maxes:  # cyclictest reports its exact maximum beside the histogram
        st["max_us"] = max(maxes)
    return Cell(variant, condition, policy, int(st["samples"] or 0), st["p50_us"], st["p99_us"],
                st["p999_us"], st["max_us"], missed, "; ".join(notes), steal_ms=stolen), lat


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def table(cells: Sequence[Cell]) -> str:
    lines = ["| variant | condition | policy | p50 µs | p99 µs | p99.9 µs | max µs | missed | "
             "samples | steal ms | note |", "|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|"]
    for c in cells:
        lines.append(f"| {c.variant} | {c.condition} | {c.policy} | {fmt(c.p50_us)} | "
                     f"{fmt(c.p99_us)} | {fmt(c.p999_us)} | {fmt(c.max_us)} | "
                     f"{c.missed if c.ok else '-'} | {c.samples} | {c.steal_ms:.0f} | "
                     f"{c.note} |")
    return "\n".join(lines)


def ratios(cells: Sequence[Cell]) -> dict[str, float | None]:
    """The acceptance ratios of issue 15 from one run's cells."""
    def p(variant: str, condition: str, policy: str, field: str = "p99_us") -> float | None:
        for c in cells:
            if (c.variant, c.condition, c.policy) == (variant, condition, policy) and c.ok:
                v: float | None = getattr(c, field)
                return v
        return None

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    out: dict[str, float | None] = {}
    for cond in CONDITIONS:
        out[f"cppyy_loop_fifo_p99_over_cyclictest_fifo_p99[{cond}]"] = ratio(
            p("cppyy_loop", cond, "fifo"), p("cyclictest", cond, "fifo"))
        out[f"ros2_copapy_p99_over_trivial_p99[{cond},fifo]"] = ratio(
            p("ros2_control", cond, "fifo"), p("ros2_trivial", cond, "fifo"))
    for pol in POLICIES:
        out[f"cppyy_loop_p99_gilhog_over_idle[{pol}]"] = ratio(
            p("cppyy_loop", "gilhog", pol), p("cppyy_loop", "idle", pol))
        out[f"py_slack1_p50_gilhog_over_idle[{pol}]"] = ratio(
            p("py_slack1", "gilhog", pol, "p50_us"), p("py_slack1", "idle", pol, "p50_us"))
    return out


def plot(samples: dict[tuple[str, str, str], NDArray[np.int64]], cells: Sequence[Cell],
         out_dir: Path) -> list[Path]:
    """The CCDF and histogram plots; none (with a note, the data is saved already) without
    matplotlib, which is an extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"copapy bench jitter: no plots (matplotlib is not installed: pip install "
              f"'copapy[plot]'); the data is in {out_dir / 'jitter.json'}", file=sys.stderr)
        return []
    conditions = sorted({c.condition for c in cells}, key=CONDITIONS.index)
    policies = sorted({c.policy for c in cells}, key=POLICIES.index)
    variants = sorted({c.variant for c in cells}, key=VARIANTS.index)
    paths = []
    for kind in ("ccdf", "hist"):
        fig, axes = plt.subplots(len(policies), len(conditions), squeeze=False,
                                 figsize=(4.6 * len(conditions), 3.6 * len(policies)),
                                 sharex=True, sharey=True)
        bins = np.logspace(0, 6, 121)  # 1 µs .. 1 s
        for i, pol in enumerate(policies):
            for j, cond in enumerate(conditions):
                ax = axes[i][j]
                for v in variants:
                    x = samples.get((v, cond, pol))
                    if x is None or x.size == 0:
                        continue
                    us = np.maximum(x / 1e3, 1.0)
                    if kind == "ccdf":
                        s = np.sort(us)
                        surv = 1.0 - np.arange(s.size) / s.size
                        ax.loglog(s, surv, label=v, lw=1.2)
                    else:
                        h, edges = np.histogram(us, bins=bins)
                        ax.stairs(h / us.size, edges, label=v)
                        ax.set_xscale("log")
                        ax.set_yscale("log")
                ax.set_title(f"{cond}, {pol.upper() if pol == 'fifo' else 'SCHED_OTHER'}")
                ax.grid(True, which="both", alpha=0.3)
                if i == len(policies) - 1:
                    ax.set_xlabel("wake-up latency (µs)")
                if j == 0:
                    ax.set_ylabel("P(latency > x)" if kind == "ccdf" else "fraction per bin")
        axes[0][0].legend(fontsize=7, loc="lower left")
        fig.suptitle("1 kHz wake-up latency" +
                     (", survival function" if kind == "ccdf" else ", log-binned histogram"),
                     fontsize=10)
        fig.tight_layout()
        path = out_dir / f"jitter_{kind}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cpus": os.cpu_count(), "kernel": os.uname().release,
                            "python": sys.version.split()[0]}
    with contextlib.suppress(OSError):
        info["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
    return info


def prepare_ros2() -> None:
    """Build the controller package once for all ros2_control cells (when ROS is found)."""
    from copapy.kits import ros2_control as rc

    if rc.ros2_setup() is not None and not os.environ.get("COPAPY_BENCH_ROS2_PREFIX"):
        os.environ["COPAPY_BENCH_ROS2_PREFIX"] = str(rc.build_package())


def run(variants: Sequence[str], conditions: Sequence[str], policies: Sequence[str],
        seconds: float, out_dir: Path, rounds: int = 1, quiet: bool = False) -> dict[str, Any]:
    """All cells, ``rounds`` times interleaved (every cell once per round, so slow drifts of
    the machine's load spread over all variants), then pooled per cell."""
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = [(v, c, p) for c in conditions for p in policies for v in variants]
    infos: dict[tuple[str, str, str], list[dict[str, Any]]] = {k: [] for k in keys}
    lats: dict[tuple[str, str, str], list[NDArray[np.int64]]] = {k: [] for k in keys}
    plan = [k for _ in range(rounds) for k in keys]
    if {"ros2_control", "ros2_trivial"} & set(variants):
        prepare_ros2()
    print(describe(variants, conditions, policies, seconds, rounds), file=sys.stderr,
          flush=True)
    started = time.time()
    with tempfile.TemporaryDirectory() as d, tqdm(total=len(plan), unit="cell", disable=quiet,
                                                  file=sys.stderr) as bar:
        for v, c, p in plan:
            bar.set_description(f"{v} {c} {p}")
            info, lat = run_cell(v, c, p, seconds, Path(d))
            infos[(v, c, p)].append(info)
            lats[(v, c, p)].append(lat)
            bar.update()
    cells, samples = [], {}
    for k in keys:
        cell, lat = combine(*k, infos[k], lats[k])
        cells.append(cell)
        samples[k] = lat
    # the same ratios from each round alone: how far one run's ratio can be trusted here
    per_round: dict[str, list[float | None]] = {}
    for r in range(rounds):
        round_cells = [combine(*k, infos[k][r:r + 1], lats[k][r:r + 1])[0] for k in keys]
        for name, value in ratios(round_cells).items():
            per_round.setdefault(name, []).append(value)
    result = {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
              "seconds_per_cell": seconds, "rounds": rounds, "period_us": PERIOD_NS / 1e3,
              "machine": machine(), "cells": [asdict(c) for c in cells],
              "ratios": ratios(cells),
              "ratio_rounds": {n: v for n, v in per_round.items()
                               if any(x is not None for x in v)}}
    (out_dir / "jitter.json").write_text(json.dumps(result, indent=1))
    arrays: dict[str, Any] = {"/".join(k): v for k, v in samples.items()}
    np.savez_compressed(out_dir / "jitter_samples.npz", **arrays)
    result["plots"] = [str(p) for p in plot(samples, cells, out_dir)]
    result["table"] = table(cells)
    return result


def spread(values: Sequence[float | None]) -> str:
    """The range of one ratio over the rounds, when there are several."""
    got = [v for v in values if v is not None]
    if len(got) < 2:
        return ""
    return f" (rounds alone: {min(got):.2f}-{max(got):.2f}, median {float(np.median(got)):.2f})"


def main_from_args(args: argparse.Namespace) -> int:
    result = run(parse_list(args.variants, VARIANTS, "variant"),
                 parse_list(args.conditions, CONDITIONS, "condition"),
                 parse_list(args.policies, POLICIES, "policy"), args.seconds, Path(args.out),
                 max(args.rounds, 1), args.quiet)
    print(result["table"])
    print()
    for name, value in result["ratios"].items():
        if value is not None:
            print(f"{name}: {value:.2f}{spread(result['ratio_rounds'].get(name, []))}")
    print(f"\nJSON: {Path(args.out) / 'jitter.json'}; plots: {', '.join(result['plots'])}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        variant, policy, condition, seconds, out = argv[1:6]
        try:
            info = worker(variant, policy, condition, float(seconds), Path(out))
        except Exception as exc:  # one failed cell must not end the whole bench
            info = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(info, default=float))  # the samples went to the .npy file
        return 0
    parser = argparse.ArgumentParser(prog="copapy bench jitter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return main_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
