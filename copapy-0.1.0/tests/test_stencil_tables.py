"""The committed stencil tables are exactly what the sources produce (reproducible build)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from copapy.arch.targets import arch_names

ROOT = Path(__file__).resolve().parent.parent


def test_tables_are_reproducible_from_sources() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build_stencils.py"), "--check"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (
        "stencil tables differ from a rebuild: run `python tools/build_stencils.py` and commit\n"
        + proc.stdout + proc.stderr)


def test_every_target_has_a_table() -> None:
    targets = set(arch_names())
    tables = {p.stem for p in (ROOT / "src" / "copapy" / "_tables").glob("*.cpst")}
    assert targets == tables
