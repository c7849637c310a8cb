"""The copapy ros2_control controller: in the loop that reproduces ros2_control_node's timing
(always; cppyy builds it) and in the real controller_manager where a ROS 2 + ros2_control
install is found through COPAPY_ROS2_SETUP (docs/kits.md). Commands equal LocalTarget's for the
same states, bit for bit."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy.kits import KitError
from copapy.kits import ros2_control as rc

JOINTS = 2
TARGET = [0.75, -0.5]


def controller(tmp_path: Path) -> tuple[Path, cp.Task, list[cp.Value[float]], list[object]]:
    q = [cp.value(0.0, name=f"q{i}") for i in range(JOINTS)]
    err = [TARGET[i] - q[i] for i in range(JOINTS)]
    u = [q[i] + 0.02 * err[i] + 0.001 * cp.integrate(err[i]) for i in range(JOINTS)]
    task = cp.Task(*u, period=1e-3, name="ctrl")
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    image = tmp_path / "ctrl.cpim"
    image.write_bytes(tg.image)
    return image, task, q, u


def replay(task: cp.Task, q: list[cp.Value[float]], u: list[object],
           states: np.ndarray) -> np.ndarray:
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(task)
    out = np.zeros_like(states)
    for k, s in enumerate(states):
        for i in range(JOINTS):
            tg.write(q[i], float(s[i]))
        tg.step(1e-3)
        out[k] = [tg.read(v) for v in u]  # type: ignore[arg-type]
    return out


def same_float32(a: np.ndarray, b: np.ndarray) -> bool:
    return struct.pack(f"{a.size}f", *a.ravel()) == struct.pack(f"{b.size}f", *b.ravel())


PORTS = {"state_ports": [f"q{i}" for i in range(JOINTS)],
         "command_ports": [f"ctrl.out{i}" for i in range(JOINTS)]}


def test_emulated_ros2_control_loop(tmp_path: Path) -> None:
    image, task, q, u = controller(tmp_path)
    run = rc.run_emulated(JOINTS, 600, image=image, **PORTS)  # type: ignore[arg-type]
    assert run.updates == 600 and run.states.shape == (600, JOINTS)
    assert run.latencies_ns.size == 599 and (run.latencies_ns >= 0).all()
    # the mock system reflects each command into the next state, as GenericSystem does
    assert np.array_equal(run.states[1:], run.commands[:-1])
    assert same_float32(run.commands, replay(task, q, u, run.states))
    assert abs(run.states[-1, 0] - TARGET[0]) < abs(TARGET[0])  # moved toward the target
    trivial = rc.run_emulated(JOINTS, 100)
    assert trivial.controller == "passthrough" and trivial.updates == 100
    assert np.allclose(trivial.commands[0], 0.01)  # 0 + 0.01 * (1 - 0)


def test_emulated_loop_names_a_missing_port(tmp_path: Path) -> None:
    image, *_ = controller(tmp_path)
    with pytest.raises(KitError, match=r'NO_PORT.*"speed"'):
        rc.run_emulated(JOINTS, 10, image=image, state_ports=["speed", "q1"],
                        command_ports=PORTS["command_ports"])
    with pytest.raises(KitError, match="IMAGE"):
        bad = tmp_path / "bad.cpim"
        bad.write_bytes(b"CPIM" + bytes(60))
        rc.run_emulated(JOINTS, 10, image=bad, **PORTS)  # type: ignore[arg-type]


needs_ros = pytest.mark.skipif(rc.ros2_setup() is None, reason=rc.skip_reason())


@needs_ros
def test_real_controller_manager(tmp_path: Path) -> None:
    image, task, q, u = controller(tmp_path)
    prefix = rc.build_package()
    run = rc.run_controller_manager(JOINTS, 2.0, prefix=prefix, image=image, **PORTS)  # type: ignore[arg-type]
    assert run.real and "copapy program" in run.log, run.log[-2000:]
    assert run.updates > 100 and run.latencies_ns.size > 50
    assert same_float32(run.commands, replay(task, q, u, run.states))
    trivial = rc.run_controller_manager(JOINTS, 0.5, prefix=prefix)
    assert trivial.updates > 10 and np.allclose(trivial.commands[0], 0.01)
