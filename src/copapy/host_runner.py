"""Where the host runner executable is: a source checkout's ``runner/build/copapy-runner``
(rebuilt with ``make -C runner host`` when the sources changed) or the one a wheel carries in
``copapy/_bin``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["PACKAGED_RUNNER", "repo_root", "runner_executable", "runner_status"]

#: the runner a wheel carries (tools/cross_wheel.py builds the Windows and macOS wheels)
PACKAGED_RUNNER = Path("_bin") / ("copapy-runner.exe" if sys.platform == "win32"
                                  else "copapy-runner")


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def runner_executable(rebuild: bool = False) -> Path:
    """The host runner, kept up to date with `make -C runner host` in a source checkout; the
    one built into the wheel (copapy/_bin) in an installed copapy."""
    root = repo_root()
    packaged = Path(__file__).resolve().parent / PACKAGED_RUNNER
    if not (root / "runner" / "Makefile").exists() and packaged.exists() and not rebuild:
        return packaged
    exe = root / "runner" / "build" / "copapy-runner"
    can_build = (root / "runner" / "Makefile").exists() and shutil.which("make") is not None \
        and shutil.which("cc") is not None
    if not can_build:
        if exe.exists() and not rebuild:
            return exe
        if packaged.exists() and not rebuild:
            return packaged
        if not (root / "runner" / "Makefile").exists():
            raise SystemExit("this copapy has no host runner (copapy/_bin/copapy-runner): "
                             "reinstall it from a wheel or a source checkout")
        raise SystemExit("building the host runner needs make and a C compiler "
                         "(Debian: apt-get install build-essential)")
    argv = ["make", "-C", str(root / "runner"), *(["-B"] if rebuild else []), "host"]
    proc = subprocess.run(argv, capture_output=True, text=True)  # a no-op when up to date
    if proc.returncode or not exe.exists():
        raise SystemExit(f"building the host runner failed:\n{proc.stdout}\n{proc.stderr}")
    return exe


def runner_status() -> tuple[Path | None, str]:
    """(the runner there is now, or None; how ``runner_executable`` will get one), without
    building anything: ``copapy doctor`` only reports (a build took it 15 s)."""
    root = repo_root()
    packaged = Path(__file__).resolve().parent / PACKAGED_RUNNER
    checkout = (root / "runner" / "Makefile").exists()
    if not checkout:
        return (packaged, "") if packaged.exists() else (None, "no copapy/_bin/copapy-runner")
    exe = root / "runner" / "build" / "copapy-runner"
    can_build = shutil.which("make") is not None and shutil.which("cc") is not None
    if exe.exists():
        return exe, "rebuilt on use when its sources change" if can_build else ""
    if can_build:
        return None, "not built yet: the first use builds it (make -C runner host)"
    return (packaged, "") if packaged.exists() else (None, "not built, and no make and C compiler")
