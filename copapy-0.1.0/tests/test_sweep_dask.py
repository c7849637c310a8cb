"""Issue 33's acceptance: a 10,000-scenario Monte-Carlo of the motor PID (plant ±20 %, noise
seeds) gives the same bits from the Python loop, the batched C runner, a Dask LocalCluster of
2 worker processes, and a `dask scheduler` + 2 `dask worker` processes on 127.0.0.1 started
here; a worker killed mid-sweep changes nothing. An aarch64 worker (a Debian userland of
tools/make_userland.sh) gives the same bits for 100 scenarios."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy.saved import build
from copapy.sweeps import SweepResult

distributed = pytest.importorskip("distributed", reason="pip install 'copapy[sweep]'")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import motor_pid  # noqa: E402

SRC = str(Path(cp.__file__).resolve().parents[1])
N = 10_000
SECONDS, SAMPLE = 0.1, 1e-2
USERLANDS = os.environ.get("COPAPY_USERLANDS")


@pytest.fixture(scope="module")
def motor() -> tuple[object, dict[str, object]]:
    """The tasks of the motor PID with its plant parameters and noise as inputs, and two
    metrics as traced values."""
    program = motor_pid.sweep_program()
    names = program[2]
    err = names["setpoint"] - names["angle"]
    return program, {"iae": cp.sweep.iae(err), "peak": cp.sweep.peak(names["angle"])}


@pytest.fixture(scope="module")
def scenarios() -> cp.sweep.Scenarios:  # type: ignore[name-defined]
    return cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                                 "inertia": cp.sweep.around(2e-5, 0.2),
                                 "friction": cp.sweep.around(1e-5, 0.2),
                                 "seed": cp.sweep.seeds(), "noise": 2.0}, N, seed=33)


def run(motor: tuple[object, dict[str, object]], sc: object, **kw: object) -> SweepResult:
    program, metrics = motor
    kw.setdefault("progress", False)
    return cp.sweep(program, sc, SECONDS, record=["angle", "pwm"], sample=SAMPLE,
                    metrics=metrics, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(motor: tuple[object, dict[str, object]], scenarios: object) -> SweepResult:
    """The Python loop over a LocalTarget."""
    return run(motor, scenarios, engine="python")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
            "COPAPY_PROGRESS": "0"}


def test_batched_c_equals_the_python_loop(motor: tuple[object, dict[str, object]],
                                          scenarios: object, reference: SweepResult) -> None:
    batch = run(motor, scenarios)
    assert batch.identical(reference)
    assert batch["angle"].shape == (N, 10)
    # ±20 % plant and the noise seeds give N different responses
    assert len(np.unique(batch["iae"])) > 0.99 * N


def test_local_cluster_of_two_processes(motor: tuple[object, dict[str, object]],
                                        scenarios: object, reference: SweepResult,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        assert run(motor, scenarios, client=client, progress=True).identical(reference)
    assert "10.0k/10.0k" in capfd.readouterr().err  # the tqdm bar counted every scenario


@pytest.fixture
def cli_cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """`dask scheduler` and two `dask worker` processes (no nanny: a killed worker stays
    dead) on 127.0.0.1; yields the scheduler address and the worker processes."""
    if shutil.which("dask", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("the dask command is missing: pip install 'copapy[sweep]'")
    dask = str(Path(sys.executable).parent / "dask")
    file = tmp_path / "scheduler.json"
    procs: list[subprocess.Popen[bytes]] = []
    log = open(tmp_path / "dask.log", "wb")
    try:
        procs.append(subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                       "--no-dashboard", "--scheduler-file", str(file)],
                                      env=_env(), stdout=log, stderr=log))
        for _ in range(600):
            if file.exists() and file.stat().st_size:
                break
            time.sleep(0.05)
        address = json.loads(file.read_text())["address"]
        workers = [subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--no-nanny",
                                     "--no-dashboard", "--host", "127.0.0.1"],
                                    env=_env(), stdout=log, stderr=log) for _ in range(2)]
        procs += workers
        yield address, workers
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()


def test_scheduler_and_workers_as_processes_and_a_killed_worker(
        motor: tuple[object, dict[str, object]], scenarios: object, reference: SweepResult,
        cli_cluster: tuple[str, list[subprocess.Popen[bytes]]]) -> None:
    address, workers = cli_cluster
    with distributed.Client(address) as client:
        client.wait_for_workers(2, timeout=60)
        assert run(motor, scenarios, client=client).identical(reference)
        # again, with one worker killed (SIGKILL) once some chunks are done: the scheduler
        # recomputes the lost chunks on the other worker, and the result is the same
        out: dict[str, SweepResult | BaseException] = {}

        def sweep() -> None:
            try:
                out["result"] = run(motor, scenarios, client=client, chunk=100)
            except BaseException as exc:
                out["result"] = exc

        thread = threading.Thread(target=sweep)
        thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and thread.is_alive():
            done = sum(1 for keys in client.has_what().values() for k in keys
                       if str(k).startswith("copapy-sweep-"))
            if done >= 4:
                break
            time.sleep(0.01)
        killed_mid_sweep = thread.is_alive()
        os.kill(workers[0].pid, signal.SIGKILL)
        thread.join(300)
        assert not thread.is_alive()
        result = out["result"]
        assert not isinstance(result, BaseException), result
        assert killed_mid_sweep, "the sweep ended before a worker could be killed"
        assert len(client.scheduler_info()["workers"]) == 1
        assert result.identical(reference)


def test_aarch64_code_on_the_emulator_100_scenarios() -> None:
    """Where no aarch64 machine is at hand: the aarch64 image of the same tasks on the unicorn
    emulator (the Python engine) gives the bits of the x86_64 batch, 100 scenarios."""
    pytest.importorskip("unicorn", reason="pip install 'copapy[emu]'")
    program = motor_pid.sweep_program()
    sc = cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                               "inertia": cp.sweep.around(2e-5, 0.2),
                               "seed": cp.sweep.seeds(), "noise": 2.0}, 100, seed=5)
    here = cp.sweep(program, sc, 0.01, record=["angle", "pwm"], sample=1e-3)
    there = cp.sweep(program, sc, 0.01, record=["angle", "pwm"], sample=1e-3,
                     engine="python", arch="aarch64")
    assert here.identical(there)


def test_aarch64_worker_gives_the_same_bits(tmp_path: Path) -> None:
    """100 scenarios of the aarch64 image in the aarch64 userland (qemu-user, chroot) against
    the x86_64 image here."""
    if not USERLANDS:
        pytest.skip("COPAPY_USERLANDS is not set: an aarch64 worker needs the Debian userland "
                    "of tools/make_userland.sh aarch64 with copapy installed "
                    "(tools/userland_test.sh; docs/architectures.md)")
    root = Path(USERLANDS) / "aarch64"
    if not (root / ".copapy-userland").exists():
        pytest.skip(f"no aarch64 userland in {USERLANDS}: tools/make_userland.sh aarch64")
    if os.geteuid() != 0:
        pytest.skip("running in the userland needs chroot, which needs root")
    tasks, bindings, names = motor_pid.sweep_program()
    sc = cp.sweep.monte_carlo({"resistance": cp.sweep.around(2.0, 0.2),
                               "seed": cp.sweep.seeds(), "noise": 2.0}, 100, seed=5)
    here = cp.sweep((tasks, bindings, names), sc, SECONDS, record=["angle"], sample=SAMPLE)
    from copapy.sweeps.plan import build_plan, encode

    plan = build_plan(build(*tasks, arch="aarch64", bindings=bindings, names=names),
                      list(sc.columns), SECONDS, ["angle"], {}, None, SAMPLE)
    job = root / "tmp" / "copapy-sweep-job"
    job.mkdir(parents=True, exist_ok=True)
    import pickle

    (job / "plan.pickle").write_bytes(pickle.dumps((plan, encode(plan, sc, list(sc.columns)))))
    code = ("import pickle; from copapy.sweeps.engines import run_batch; "
            "plan, params = pickle.load(open('/tmp/copapy-sweep-job/plan.pickle', 'rb')); "
            "open('/tmp/copapy-sweep-job/out', 'wb').write(run_batch(plan, params)[0])")
    pythons = ["/root/copapy-test/venv/bin/python", "/usr/bin/python3"]
    python = next((p for p in pythons if (root / p.lstrip("/")).exists()), None)
    if python is None:
        pytest.skip("the aarch64 userland has no python: tools/userland_test.sh aarch64")
    proc = subprocess.run(["chroot", str(root), python, "-c", code], capture_output=True,
                          text=True, timeout=1800)
    if "No module named 'copapy" in proc.stderr:
        pytest.skip(f"copapy is not installed for {python} in the userland: run "
                    f"tools/userland_test.sh aarch64 first")
    assert proc.returncode == 0, proc.stderr[-3000:]
    there = np.frombuffer((job / "out").read_bytes(), dtype=here["angle"].dtype)
    assert there.tobytes() == here["angle"].tobytes()
