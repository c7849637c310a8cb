"""Wheels for the machines robots use: in a Debian bookworm userland of aarch64, armv7l and
i686 (tools/make_userland.sh), the wheel is built from the sdist and tested by
tools/userland_test.sh: LocalTarget runs native code of that CPU, `copapy runner` serves a
SerialTarget, and a representative subset of the test suite passes (docs/architectures.md,
"Wheels for other CPUs").

Heavy (emulated builds, minutes per CPU): runs only with COPAPY_USERLANDS set to the directory
holding the userlands, as root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USERLANDS = os.environ.get("COPAPY_USERLANDS")
NATIVE = {"aarch64": "aarch64", "armv7l": "armv7a", "i686": "x86"}


@pytest.mark.parametrize("machine", sorted(NATIVE))
def test_wheel_in_userland(machine: str, tmp_path: Path) -> None:
    if not USERLANDS:
        pytest.skip("COPAPY_USERLANDS is not set: make userlands with tools/make_userland.sh "
                    "(docs/architectures.md, 'Wheels for other CPUs')")
    if not (Path(USERLANDS) / machine / ".copapy-userland").exists():
        pytest.skip(f"no {machine} userland in {USERLANDS}: tools/make_userland.sh {machine} "
                    f"(docs/architectures.md)")
    if os.geteuid() != 0:
        pytest.skip("the userland tests chroot, which needs root (docs/architectures.md)")
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist",
                           "--outdir", str(tmp_path), str(ROOT)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    run = subprocess.run([str(ROOT / "tools" / "userland_test.sh"), machine, str(sdist),
                          str(Path(USERLANDS) / machine)], capture_output=True, text=True,
                         timeout=4 * 3600)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-6000:]
    smoke = json.loads(next(line for line in run.stdout.splitlines()
                            if line.startswith("SMOKE "))[6:])
    assert smoke["arch"] == NATIVE[machine] and smoke["runner_arch"] == NATIVE[machine]
    assert smoke["serial"] == 42.0
    result = next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))
    assert " failed" not in result and " passed" in result, result
    print(result)
