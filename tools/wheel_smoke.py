"""What a user does with an installed copapy wheel, with no C compiler on PATH: LocalTarget runs
native code of this CPU, @cp.jit, the packaged host runner (`copapy runner --pty`) serves a
SerialTarget, and a saved program runs in `copapy runner --image --start`. Prints one line
``SMOKE {json}``. Run by tests/test_wheel.py (fresh venv), tools/userland_test.sh (Debian
userlands of other CPUs) and cibuildwheel (pyproject.toml: on machines with a compiler, so
with --allow-compiler).

    python tools/wheel_smoke.py [--transport pty|tcp] [--allow-compiler]
        # in a scratch directory (writes twice.cpimg, and runner.key for tcp)

The runner is reached over a pty, or over TCP on 127.0.0.1 with a key (the default on Windows,
which has no pty; tests/test_cross_wheels.py runs that path with the Linux runner).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from typing import Any

import numpy as np

import copapy as cp
from copapy.runtime.load import host_architecture, is_native

KEY = bytes(range(32))


def _runner(transport: str, *args: str) -> tuple[str, subprocess.Popen[str]]:
    """(the port SerialTarget opens, the runner process) of ``copapy runner``."""
    if transport == "pty":
        how = ["--pty"]
    else:
        fd = os.open("runner.key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(KEY)
        how = ["--tcp", "0", "--key-file", "runner.key"]
    proc = subprocess.Popen([sys.executable, "-m", "copapy", "runner", *how, "--no-rt", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[:1] == [transport.upper()], (line, proc.stderr.read() if proc.stderr else "")
    return (line[1] if transport == "pty" else f"socket://{line[1]}"), proc


def _target(transport: str, port: str) -> cp.SerialTarget:
    return cp.SerialTarget(port, timeout=5.0, key=KEY if transport == "tcp" else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transport", choices=("pty", "tcp"),
                    default="tcp" if sys.platform == "win32" else "pty")
    ap.add_argument("--allow-compiler", action="store_true",
                    help="do not require that no C compiler is on PATH")
    args = ap.parse_args(argv)
    if not args.allow_compiler:
        assert shutil.which("cc") is None and shutil.which("gcc") is None, \
            "a C compiler is on PATH"
    out: dict[str, Any] = {"machine": platform.machine(), "arch": host_architecture(),
                           "copapy": cp.__file__}
    assert is_native(out["arch"]), "LocalTarget would not run native code"

    x = cp.value(2.0, name="x")
    y = cp.sqrt(x * x + 1.0) + cp.sin(x)
    tg = cp.LocalTarget()
    tg.compile(y)
    tg.write(x, 2.0)
    tg.run()
    out["local"] = tg.read(y)
    assert abs(out["local"] - 3.1453655) < 1e-6

    @cp.jit
    def rms(a: Any, b: Any) -> Any:
        e = a - b
        return cp.sqrt((e * e).sum() / e.size)

    a = np.arange(8, dtype=np.float32)
    out["jit"] = float(rms(a, a + 2.0))
    assert abs(out["jit"] - 2.0) < 1e-6

    setpoint = cp.value(1.0, name="setpoint")
    doubled = 2.0 * setpoint
    task = cp.Task(doubled, period=1e-2)
    port, proc = _runner(args.transport)
    try:
        with _target(args.transport, port) as st:
            st.deploy(task)
            st.start()
            st.write(setpoint, 21.0)
            time.sleep(0.5)
            out["serial"] = st.read(doubled)
            out["runner_arch"] = st.info().arch
    finally:
        proc.kill()
        proc.wait()
    assert out["serial"] == 42.0 and out["runner_arch"] == out["arch"]

    prog = cp.save("twice.cpimg", task, names={"doubled": doubled})
    port, proc = _runner(args.transport, "--image", "twice.cpimg", "--start")
    try:
        with _target(args.transport, port) as st:
            st.deploy(prog)  # the same image: attaches
            out["image_state"] = st.info().state
            deadline = time.monotonic() + 5.0
            while st.read("doubled") != 2.0 and time.monotonic() < deadline:
                time.sleep(0.02)  # the first period has not ended yet
            out["image_doubled"] = st.read("doubled")
    finally:
        proc.kill()
        proc.wait()
    assert out["image_state"] == "running" and out["image_doubled"] == 2.0
    out["transport"] = args.transport
    print("SMOKE " + json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
