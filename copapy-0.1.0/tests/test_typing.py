"""The public API is typed: mypy --strict accepts correct use and rejects misuse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def mypy(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--config-file", "/dev/null", str(path)],
                          capture_output=True, text=True, timeout=300)


def test_correct_use_type_checks() -> None:
    proc = mypy(HERE / "typing" / "good.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_misuse_is_reported_on_every_marked_line() -> None:
    proc = mypy(HERE / "typing" / "bad.py")
    source = (HERE / "typing" / "bad.py").read_text().splitlines()
    expected = {n for n, line in enumerate(source, 1) if "# E:" in line}
    reported = {int(line.split(":")[1]) for line in proc.stdout.splitlines()
                if "bad.py:" in line and ": error:" in line}
    assert expected <= reported, proc.stdout
