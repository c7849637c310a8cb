"""`copapy bench jitter`: a short smoke run of every variant gives the table, the JSON and the
plots (no timing is asserted: the numbers are the benchmark's, benchmarks/RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from copapy.bench.jitter import VARIANTS


def bench(tmp_path: Path, *args: str) -> tuple[str, dict[str, object]]:
    proc = subprocess.run([sys.executable, "-m", "copapy", "bench", "jitter", "--quiet",
                           "--out", str(tmp_path), *args], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads((tmp_path / "jitter.json").read_text())


def test_every_variant(tmp_path: Path) -> None:
    out, result = bench(tmp_path, "--seconds", "0.3", "--conditions", "idle", "--policies",
                        "fifo")
    cells = result["cells"]
    assert isinstance(cells, list) and [c["variant"] for c in cells] == VARIANTS
    failed = [(c["variant"], c["note"]) for c in cells if not c["ok"]]
    assert failed == []
    for c in cells:
        assert c["samples"] > 0 and c["p50_us"] is not None and c["p99_us"] is not None
        assert c["max_us"] >= c["p99_us"] >= c["p50_us"] >= 0
    for v in VARIANTS:
        assert f"| {v} | idle | fifo |" in out
    assert "cppyy_loop_fifo_p99_over_cyclictest_fifo_p99[idle]" in out
    for name in ("jitter_ccdf.png", "jitter_hist.png", "jitter_samples.npz"):
        assert (tmp_path / name).stat().st_size > 1000


def test_conditions_and_policies(tmp_path: Path) -> None:
    _, result = bench(tmp_path, "--seconds", "0.2", "--variants", "c_ctypes",
                      "--conditions", "stress,gilhog", "--policies", "other,fifo")
    cells = result["cells"]
    assert isinstance(cells, list) and len(cells) == 4 and all(c["ok"] for c in cells)
    assert {(c["condition"], c["policy"]) for c in cells} == {
        (c, p) for c in ("stress", "gilhog") for p in ("other", "fifo")}


def test_unknown_names_are_named(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "copapy", "bench", "jitter", "--variants",
                           "py_turbo", "--out", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode != 0 and "unknown variant py_turbo" in proc.stderr
    assert "cppyy_loop" in proc.stderr


def test_rounds_give_each_ratio_per_round(tmp_path: Path) -> None:
    """With --rounds the ratios come with their range over the rounds alone (on a VM the
    pooled p99 ratio of one run can swing by 2x) and every cell with the vCPUs' steal time."""
    out, result = bench(tmp_path, "--seconds", "0.3", "--variants", "cppyy_loop,cyclictest",
                        "--conditions", "idle", "--policies", "fifo", "--rounds", "2")
    name = "cppyy_loop_fifo_p99_over_cyclictest_fifo_p99[idle]"
    rounds = result["ratio_rounds"]
    assert isinstance(rounds, dict) and len(rounds[name]) == 2
    assert all(isinstance(r, float) and r > 0 for r in rounds[name])
    assert f"{name}: " in out and "(rounds alone: " in out
    cells = result["cells"]
    assert isinstance(cells, list)
    assert all(c["steal_ms"] >= 0 for c in cells)
    assert "| steal ms |" in out


def test_without_matplotlib_the_data_is_saved_and_the_run_succeeds(tmp_path: Path) -> None:
    """matplotlib is an extra: a wheel installed without it ended the run with exit 1 after
    the data was written."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('hidden by the test')\n")
    proc = subprocess.run([sys.executable, "-m", "copapy", "bench", "jitter", "--quiet",
                           "--seconds", "0.2", "--variants", "py_sleep", "--conditions", "idle",
                           "--policies", "other", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(blocker), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr
    assert "no plots (matplotlib is not installed" in proc.stderr
    assert json.loads((tmp_path / "jitter.json").read_text())["cells"]
    assert not (tmp_path / "jitter_ccdf.png").exists()
