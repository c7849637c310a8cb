"""Every script in benchmarks/ still imports: a renamed helper module once broke bench_soak and
bench_serial while no test ran them (CI: "No module named 'runners'")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import copapy as cp

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))

# A script runs with its own folder first on sys.path (bench_lone imports bench_elementwise);
# the third-party baselines of the `bench` extra (numba, scipy) may be absent from a dev venv.
IMPORT_EACH = """
import importlib.util, os, sys
failed = []
optional = {"numba", "scipy"}
for path in sys.argv[1:]:
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("bench_under_test", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in optional:
            failed.append(f"{path}: {type(exc).__name__}: {exc}")
    except BaseException as exc:  # report every script, not only the first
        failed.append(f"{path}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_there_are_benchmark_scripts() -> None:
    assert len(SCRIPTS) >= 10, SCRIPTS


def test_every_benchmark_script_imports() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(cp.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", IMPORT_EACH, *map(str, SCRIPTS)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
