"""The robot programs of benchmarks/bench_robot.py (attitude EKF, DLS IK of a 6-DOF arm, LQR
steps) compiled by copapy agree with a float64 NumPy reference, and the jitted and the
compiled program give the same bits; a Jacobian by the elements of a packed input stays
scalar (no array adjoint built from one-hot pieces)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph.traverse import live_nodes
from copapy.runtime.load import fastest_host_architecture, host_architecture

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "examples"))
import arm_ik  # noqa: E402
import bench_robot  # noqa: E402

PROGRAMS = {p.name: p for p in bench_robot.programs()}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_copapy_matches_float64_reference(name: str) -> None:
    prog = PROGRAMS[name]
    want = bench_robot.reference(prog)
    got = bench_robot.as_tuple(cp.jit(prog.step)(*prog.args))
    bench_robot.check(f"{name} jit", got, want)
    for arch in dict.fromkeys((fastest_host_architecture(), host_architecture())):
        tg, outs = bench_robot.traced_program(prog, arch)
        ran = tuple(np.asarray(tg.read(o)) for o in outs)
        bench_robot.check(f"{name} {arch}", ran, want)
        for a, b in zip(got, ran, strict=True):
            assert a.tobytes() == b.astype(a.dtype).tobytes(), (name, arch)


def test_the_checks_catch_a_wrong_result() -> None:
    prog = PROGRAMS["lqr4"]
    want = bench_robot.reference(prog)
    wrong = (want[0] * (1 + 10 * bench_robot.TOLERANCE),)
    with pytest.raises(AssertionError, match="relative error"):
        bench_robot.check("lqr4", wrong, want)


def test_ik_converges_to_a_reachable_pose() -> None:
    p_target, r_target = arm_ik.target_pose(arm_ik.GOAL)
    q = arm_ik.HOME.copy()
    for _ in range(15):
        q = arm_ik.step(q, p_target, r_target)
    flange = arm_ik.reference_frames(q)[-1]
    assert np.linalg.norm(flange[:3, 3] - p_target) < 1e-5
    assert np.abs(flange[:3, :3] - r_target).max() < 1e-5


def _quad(v: list[cp.Value]) -> cp.Array:
    w, x, y, z = v
    return cp.vector([w * x - y * z, 2.0 * (x * z - w * y), cp.sin(w) * z + x * x])


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(-2.0, 2.0, width=32), min_size=4, max_size=4))
def test_jacobian_by_packed_elements_is_scalar(values: list[float]) -> None:
    """By the elements of a packed input the Jacobian is the one by scalar inputs, bit for
    bit, and no node of it is an array (before: one-hot arrays summed by vector loops)."""
    data = np.array(values, np.float32)
    packed = cp.value(data, cp.float32, packed=True).to_unpacked()
    jac = cp.jacobian(_quad(packed.items()), packed)
    assert not any(n.shape for n in live_nodes([v.node for v in jac.items()])
                   if n.op != "input")
    scalars = [cp.value(float(x), cp.float32) for x in data]
    ref = cp.jacobian(_quad(scalars), scalars)
    tg = cp.LocalTarget()
    tg.compile(jac, ref)
    tg.run()
    assert tg.read(jac).tobytes() == tg.read(ref).tobytes()
    w, x, y, z = data.astype(np.float64)
    want = np.array([[x, w, -z, -y], [-2 * y, 2 * z, -2 * w, 2 * x],
                     [np.cos(w) * z, 2 * x, 0.0, np.sin(w)]])
    np.testing.assert_allclose(tg.read(jac), want, rtol=1e-5, atol=1e-5)


def test_jacobian_by_a_packed_input_read_whole_still_works() -> None:
    """An input read as an array as well as by element keeps the array gradient."""
    data = np.array([0.5, -1.0, 2.0], np.float32)
    v = cp.value(data, cp.float32, packed=True)
    y = cp.vector([(v * v).sum(), v.to_unpacked()[0] * 3.0])
    jac = cp.jacobian(y, v.to_unpacked())
    tg = cp.LocalTarget()
    tg.compile(jac)
    tg.run()
    np.testing.assert_allclose(tg.read(jac), [2 * data, [3.0, 0.0, 0.0]], rtol=1e-6)
