"""Ray as a second engine of cp.sweep (issue 33), through the same chunks as Dask: a local
Ray runtime of 2 CPUs gives the batched runner's bits for a Monte-Carlo of the motor PID, and
the same faults and bits for a sweep in which some scenarios fault."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.runtime.load import host_architecture
from copapy.sweeps import SweepResult

from .support.faults import inject_param_fault, with_fault_task
from .test_sweep_not_computed import check_not_computed

ray = pytest.importorskip("ray", reason="pip install 'copapy[ray]'")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import motor_pid  # noqa: E402

SRC = str(Path(cp.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def runtime() -> Iterator[None]:
    """A local Ray runtime of 2 CPUs whose workers import this checkout's copapy."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": SRC, "COPAPY_PROGRESS": "0"}})
    try:
        yield
    finally:
        ray.shutdown()


def motor_sweep(params: Any, program: Any = None, **kw: Any) -> SweepResult:
    program = program or motor_pid.sweep_program()
    names = program[2]
    kw.setdefault("progress", False)
    return cp.sweep(program, params, 0.1, record=["angle", "pwm"], sample=1e-2,
                    metrics={"iae": cp.sweep.iae(names["setpoint"] - names["angle"])}, **kw)


def test_ray_gives_the_batched_bits(runtime: None, capfd: pytest.CaptureFixture[str]) -> None:
    sc = cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                               "inertia": cp.sweep.around(2e-5, 0.2),
                               "seed": cp.sweep.seeds(), "noise": 2.0}, 3000, seed=8)
    here = motor_sweep(sc)
    there = motor_sweep(sc, engine="ray", chunk=200, progress=True)
    assert there.identical(here)
    assert len(np.unique(there["iae"])) > 0.99 * 3000
    assert "3.00k/3.00k" in capfd.readouterr().err  # the bar counted every chunk
    assert motor_sweep(sc, engine="ray").identical(here)  # chunks of chunk_size's size


@pytest.mark.skipif(host_architecture() != "x86_64",
                    reason="the injected fault is hand-assembled x86_64 code")
def test_ray_returns_the_faults(runtime: None, monkeypatch: pytest.MonkeyPatch) -> None:
    inject_param_fault(monkeypatch)
    program = with_fault_task(motor_pid.sweep_program())
    arm = np.random.default_rng(3).choice([0.0, 1.0, 2.0], 400, p=[0.8, 0.1, 0.1])
    sc = {"kp": np.linspace(0.002, 0.006, 400), "fault": arm}
    python = motor_sweep(sc, program, engine="python")
    there = motor_sweep(sc, program, engine="ray", chunk=30)
    assert [f.scenario for f in there.faults] == np.flatnonzero(arm).tolist()
    assert there.faults == python.faults
    assert there.identical(python)


def test_ray_rows_not_computed_are_nan(runtime: None) -> None:
    """The rows before a task first publishes are NaN from Ray tasks too."""
    check_not_computed(engine="ray", chunk=1)
