"""Cold process: `import copapy` and the first @cp.jit call, in fresh interpreters.

Usage:
    python benchmarks/bench_cold.py [--runs 15] [--against /tmp/base/src] [--parts]

Programs run in fresh interpreters, interleaved (every round runs each once, shuffled):
*numpy* (`import numpy`, the baseline every jit user pays), *import* (numpy, then copapy) and
*first jit* (numpy, copapy, then the first call of the benchmark term
`sum((v1 + i) @ v2 for i in range(10))` at v_size 500: architecture choice, stencil table,
trace, compile, load, run). Wall time per process, medians; copapy's share is the difference
to *numpy*. Bytecode is cached in a temporary folder (warmed once), as for an installed wheel
(this machine sets PYTHONDONTWRITEBYTECODE, which would compile every module on every start).
Besides wall time, each process's CPU time (user + system, from ``os.wait4``) is reported: on
a loaded machine it stays close to what a quiet one measures, where wall time includes the
wait for a core.
``--against`` runs the copapy programs of another source tree too (see bench_compile.py), in
the same shuffled rounds. ``--parts`` also runs, in the same rounds, a process per tree that
reports the CPU time of each part inside the interpreter (``import numpy``, ``import copapy``,
the first call), without the interpreter's own start and exit. Goal of issue 13: import +
first jit call <= 150 ms; issue 32: copapy's share <= 50 ms. The anchors *numba first jit*
(explicit loop, np.dot) and *jax first jit* (jax.jit of the same term) run the same call with
their own imports in the same rounds (``--no-anchors`` leaves them out).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAMS = {
    "numpy": "import numpy",
    "import": "import numpy; import copapy",
    "first jit": (
        "import numpy as np; import copapy as cp\n"
        "f = cp.jit(lambda v1, v2: sum((v1 + i) @ v2 for i in range(10)))\n"
        "assert f(np.arange(500, dtype=np.float32), np.full(500, 5, np.float32)) == 6350000\n"),
}
#: the same first call through the anchors of issue 32 (item 4): numba's explicit loop and
#: JAX's jit, each with its own import; the share column is theirs above ``import numpy``
ANCHORS = {
    "numba first jit": (
        "import numpy as np; import numba\n"
        "@numba.njit\n"
        "def f(v1, v2):\n"
        "    s = np.float32(0)\n"
        "    for i in range(10):\n"
        "        s += np.dot(v1 + np.float32(i), v2)\n"
        "    return s\n"
        "assert f(np.arange(500, dtype=np.float32), np.full(500, 5, np.float32)) == 6350000\n"),
    "jax first jit": (
        "import numpy as np; import jax\n"
        "f = jax.jit(lambda v1, v2: sum((v1 + i) @ v2 for i in range(10)))\n"
        "assert float(f(np.arange(500, dtype=np.float32), np.full(500, 5, np.float32))) "
        "== 6350000\n"),
}
PARTS = (
    "import time\nt0 = time.process_time()\nimport numpy as np\nt1 = time.process_time()\n"
    "import copapy as cp\nt2 = time.process_time()\n" + PROGRAMS["first jit"].split("\n", 1)[1]
    + "t3 = time.process_time()\nprint(t1 - t0, t2 - t1, t3 - t2)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--against", metavar="SRC", help="another source tree to compare")
    parser.add_argument("--parts", action="store_true",
                        help="also CPU time per part, measured inside the interpreter")
    parser.add_argument("--no-anchors", action="store_true",
                        help="leave out numba's and JAX's first jit (they need the bench extra)")
    args = parser.parse_args()
    trees = {"": os.environ.get("PYTHONPATH", "")}
    if args.against:
        trees[" (other)"] = os.path.abspath(args.against)
    runs = {"numpy": (PROGRAMS["numpy"], trees[""])}
    for suffix, tree in trees.items():
        runs.update({k + suffix: (code, tree) for k, code in PROGRAMS.items() if k != "numpy"})
        if args.parts:
            runs["parts" + suffix] = (PARTS, tree)
    if not args.no_anchors:
        runs.update({k: (code, trees[""]) for k, code in ANCHORS.items()})
    parts: dict[str, list[list[float]]] = {k: [] for k in runs if k.startswith("parts")}
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache

        def start(name: str) -> tuple[float, float]:
            """Wall and CPU seconds of one fresh interpreter running ``name``."""
            code, tree = runs[name]
            t = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", code],
                                    env={**env, "PYTHONPATH": tree}, stdout=subprocess.PIPE)
            assert proc.stdout is not None
            out = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode:
                raise subprocess.CalledProcessError(proc.returncode, name)
            if name in parts:
                parts[name].append([float(x) for x in out.split()])
            return wall, usage.ru_utime + usage.ru_stime

        for name in runs:
            start(name)  # bytecode written once
        for rows in parts.values():
            rows.clear()  # the warm-up round
        times: dict[str, list[float]] = {k: [] for k in runs}
        cpu: dict[str, list[float]] = {k: [] for k in runs}
        order = list(runs)
        for _ in range(args.runs):
            random.shuffle(order)
            for name in order:
                wall, used = start(name)
                times[name].append(wall)
                cpu[name].append(used)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    med_cpu = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    print(f"load average {os.getloadavg()[0]:.2f}, {args.runs} runs each")
    print("| process | wall ms (median) | min | share (minus numpy) | CPU ms (median) "
          "| CPU share |")
    print("|---|---:|---:|---:|---:|---:|")
    for k, v in med.items():
        if k in parts:
            continue
        share = "" if k == "numpy" else f"{v - med['numpy']:.0f}"
        cpu_share = "" if k == "numpy" else f"{med_cpu[k] - med_cpu['numpy']:.0f}"
        print(f"| {k} | {v:.0f} | {min(times[k]) * 1e3:.0f} | {share} | {med_cpu[k]:.0f} "
              f"| {cpu_share} |")

    if parts:
        print("\n| CPU ms inside the interpreter (median) | import numpy | import copapy | "
              "first jit call | copapy's part |")
        print("|---|---:|---:|---:|---:|")
        for k, rows in parts.items():
            n, c, f = (statistics.median(col) * 1e3 for col in zip(*rows, strict=True))
            print(f"| {k} | {n:.1f} | {c:.1f} | {f:.1f} | {c + f:.1f} |")


if __name__ == "__main__":
    main()
