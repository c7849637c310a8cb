"""benchmarks/bench_soak.py keeps working: a few seconds of its 1 kHz PID loop on the host
runner (no stress load), so the recorded soak in benchmarks/RESULTS.md stays reproducible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import copapy as cp

ROOT = Path(__file__).resolve().parents[1]


def test_soak_script_runs_the_closed_loop(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(cp.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_soak.py"),
                           "--minutes", "0.05", "--sample", "1", "--stress", "0",
                           "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["fault"] in (None, "none")  # a runner without a fault record, or no fault
    assert result["skipped"] == [0, 0] or result["late_ticks"] > 0  # skips are late ticks
    ticks = [s["ticks"] for s in result["samples"]]
    assert len(ticks) >= 2 and ticks == sorted(ticks) and ticks[0] > 0
    # the plant is coupled through the simulated channels (PWM -> plant -> encoder): the PI
    # loop holds its speed at the setpoint 1.0; uncoupled (measured stuck at 0) it runs at 3.0
    assert abs(result["speed"] - 1.0) < 0.01, result["speed"]
    assert "plant speed at the end (setpoint 1.0)" in proc.stdout
