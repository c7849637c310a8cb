"""cp.Quaternion at its edges, compiled and run against scipy's Rotation and float64 hand
formulas on the float32 inputs: tiny (subnormal) and huge magnitudes, the zero quaternion,
180° rotations (the branches of matrix → quaternion), gimbal lock, small angles between
orientations, and the sign convention q ≡ -q (docs/semantics.md, "Quaternions")."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import copapy as cp

from .support.checks import examples

F32 = np.float32
EPS = 2.0 ** -24
SCALES = [1e-40, 1e-30, 1e-20, 1e-3, 1.0, 1e3, 1e20, 1e30, 3e38]
directions = st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(
    lambda v: math.hypot(*v) > 0.1)


class Compiled:
    """One program with every operation under test; inputs are written per example."""

    def __init__(self) -> None:
        self.q = [cp.value(0.0) for _ in range(4)]
        self.p = [cp.value(0.0) for _ in range(4)]
        self.axis = cp.value(np.zeros(3, F32))
        self.angle = cp.value(0.0)
        self.m = cp.value(np.eye(3, dtype=F32))
        self.euler = [cp.value(0.0) for _ in range(3)]
        q = cp.quaternion(*self.q)
        self.outs: dict[str, Any] = {
            "normalize": cp.vector(list(q.normalize())),
            "norm": q.norm(),
            "from_axis_angle": cp.vector(list(cp.Quaternion.from_axis_angle(self.axis,
                                                                            self.angle))),
            "angle_to": q.angle_to(cp.quaternion(*self.p)),
            "from_matrix": cp.vector(list(cp.Quaternion.from_rotation_matrix(self.m))),
            "from_euler": cp.vector(list(cp.Quaternion.from_euler(
                roll=self.euler[0], pitch=self.euler[1], yaw=self.euler[2]))),
            "rotate": q.rotate(self.axis),
            "axis_angle": q.to_axis_angle(),
        }
        self.tg = cp.LocalTarget()
        self.tg.compile(*(o for v in self.outs.values()
                          for o in (v if isinstance(v, tuple) else (v,))))

    def run(self, q: Any = (1, 0, 0, 0), p: Any = (1, 0, 0, 0), axis: Any = (0, 0, 1),
            angle: float = 0.0, m: Any = None, euler: Any = (0, 0, 0)) -> dict[str, Any]:
        for port, v in [*zip(self.q, q, strict=True), *zip(self.p, p, strict=True),
                        *zip(self.euler, euler, strict=True), (self.angle, angle)]:
            self.tg.write(port, F32(v))
        self.tg.write(self.axis, np.asarray(axis, F32))
        self.tg.write(self.m, np.eye(3, dtype=F32) if m is None else np.asarray(m, F32))
        self.tg.run()
        out: dict[str, Any] = {}
        for k, v in self.outs.items():
            if isinstance(v, tuple):
                out[k] = tuple(np.asarray(self.tg.read(o), np.float64) for o in v)
            else:
                out[k] = np.asarray(self.tg.read(v), np.float64)
        return out


@functools.cache
def compiled() -> Compiled:
    return Compiled()


def wxyz(r: Rotation) -> np.ndarray:
    x, y, z, w = r.as_quat()
    return np.array([w, x, y, z])


def same_rotation(got: np.ndarray, want: np.ndarray, tol: float) -> bool:
    """q and -q are the same rotation."""
    return min(np.abs(got - want).max(), np.abs(got + want).max()) <= tol


@settings(max_examples=examples(60), deadline=None)
@given(directions, st.sampled_from(SCALES))
def test_normalize_and_norm_at_any_magnitude(d: list[float], scale: float) -> None:
    """The old code squared the components: 1e-30 gave inf/NaN, 1e20 gave 0 (norm 0 or inf)."""
    q = np.array([F32(v * scale) for v in d], np.float64)
    if not np.any(q):  # every component underflowed to 0 in float32
        return
    out = compiled().run(q=q)
    big = np.abs(q).max()
    length = big * np.linalg.norm(q / big)
    assert np.abs(out["normalize"] - q / length).max() <= 4 * EPS
    if length < 3.4e38:
        assert abs(out["norm"] - length) <= 4 * EPS * length + 3e-45  # subnormal spacing


def test_normalize_and_norm_of_zero_and_infinite_quaternions() -> None:
    """Documented: the zero quaternion normalises to NaN (no direction), its norm is 0; a
    component that is inf gives norm inf and a NaN normalisation."""
    out = compiled().run(q=(0, 0, 0, 0))
    assert np.isnan(out["normalize"]).all() and out["norm"] == 0.0
    out = compiled().run(q=(np.inf, 1, 0, 0))
    assert np.isnan(out["normalize"]).all() and out["norm"] == np.inf
    assert np.isnan(compiled().run(q=(np.nan, 1, 0, 0))["norm"])


@settings(max_examples=examples(60), deadline=None)
@given(directions, st.sampled_from(SCALES[:-1]), st.floats(-7.0, 7.0, width=32))
def test_from_axis_angle_at_any_axis_length(d: list[float], scale: float,
                                            angle: float) -> None:
    """The axis is normalised without squaring it: a 1e-30 or 1e20 axis was inf/0 before."""
    axis = np.array([F32(v * scale) for v in d[:3]], np.float64)
    if not np.any(axis):
        return
    got = compiled().run(axis=axis, angle=angle)["from_axis_angle"]
    want = wxyz(Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle))
    assert same_rotation(got, want, 8 * EPS * max(1.0, abs(angle)))


def test_from_axis_angle_of_a_zero_axis_is_nan() -> None:
    """Documented: a zero axis has no direction (x, y, z NaN; w is cos(angle/2))."""
    got = compiled().run(axis=(0, 0, 0), angle=1.0)["from_axis_angle"]
    assert np.isnan(got[1:]).all() and got[0] == F32(math.cos(0.5))


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from([0.0, 1e-6, 2e-4, 1e-3, 0.1, 1.0, 3.0, math.pi - 1e-3, math.pi]),
       st.lists(st.floats(-1, 1), min_size=3, max_size=3).filter(lambda v: math.hypot(*v) > 0.1),
       st.sampled_from([1.0, 1e-20, 1e20]), st.booleans())
def test_angle_to_small_and_large_angles(angle: float, axis: list[float], scale: float,
                                         flip: bool) -> None:
    """Against 2·atan2(|vec(d)|, |w(d)|) in float64 of the float32 inputs; acos of the dot
    product read 0 for 2e-4 rad before (and depended on the lengths)."""
    base = Rotation.from_rotvec([0.3, -0.2, 0.5])
    other = base * Rotation.from_rotvec(np.array(axis) / np.linalg.norm(axis) * angle)
    a = np.array([F32(v * scale) for v in wxyz(base)], np.float64)
    b = np.array([F32(v * (-1 if flip else 1)) for v in wxyz(other)], np.float64)
    got = float(compiled().run(q=a, p=b)["angle_to"])
    d = (Rotation.from_quat([*a[1:], a[0]]).inv() * Rotation.from_quat([*b[1:], b[0]]))
    want = float(np.linalg.norm(d.as_rotvec()))
    assert abs(got - want) <= 16 * EPS * max(want, 1e-3) + 2e-7


def test_angle_to_resolves_two_ten_thousandths_of_a_radian() -> None:
    """One-line reproducer of the old bug: q.angle_to(p) with p 2e-4 rad from q read 0.0."""
    p = (math.cos(1e-4), math.sin(1e-4), 0.0, 0.0)
    assert abs(float(compiled().run(p=p)["angle_to"]) - 2e-4) < 1e-9


HALF_TURNS = [Rotation.from_rotvec(np.array(a) / np.linalg.norm(a) * t)
              for a in [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, -1, 0), (0, 1, 1),
                        (1, 1, 1), (1, 0, 1e-4), (1e-4, 1, 0), (0, 1e-4, -1)]
              for t in (math.pi, math.pi - 1e-3, math.pi - 1e-6, -math.pi, 1e-7, 2.0)]


@pytest.mark.parametrize("r", HALF_TURNS, ids=lambda r: str(np.round(r.as_rotvec(), 6)))
def test_from_rotation_matrix_branches(r: Rotation) -> None:
    """Every branch of Shepperd's method (trace > 0, and the largest diagonal term of the
    three others) near and at 180°, against scipy on the float32 matrix: a unit quaternion,
    the same rotation up to q ≡ -q, and the documented sign: w > 0 where the trace is > 0,
    else x where m00 > m11 and m00 > m22, else y where m11 > m22, else z is positive."""
    m = r.as_matrix().astype(F32)
    got = compiled().run(m=m)["from_matrix"]
    want = wxyz(Rotation.from_matrix(m.astype(np.float64)))
    assert abs(np.linalg.norm(got) - 1.0) <= 8 * EPS
    assert same_rotation(got, want, 16 * EPS)
    d = np.diag(m)
    branch = (0 if d.sum() > 0 else 1 if d[0] > d[1] and d[0] > d[2] else 2 if d[1] > d[2]
              else 3)
    assert got[branch] > 0


@settings(max_examples=examples(60), deadline=None)
@given(st.floats(-4, 4, width=32),
       st.sampled_from([math.pi / 2, -math.pi / 2, 0.0, 1.0, math.pi, -math.pi, 1.5707]),
       st.floats(-4, 4, width=32))
def test_from_euler_at_gimbal_lock(roll: float, pitch: float, yaw: float) -> None:
    """Documented: from_euler(roll, pitch, yaw) is scipy's from_euler("ZYX", [yaw, pitch,
    roll]), also at pitch = ±90° (gimbal lock: the formula has no singularity)."""
    got = compiled().run(euler=(roll, pitch, yaw))["from_euler"]
    want = wxyz(Rotation.from_euler("ZYX", [yaw, float(F32(pitch)), roll]))
    assert same_rotation(got, want, 8 * EPS)


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.lists(st.floats(-1e3, 1e3, width=32), min_size=3,
                                              max_size=3))
def test_rotate_matches_scipy(seed: int, v: list[float]) -> None:
    r = Rotation.random(random_state=seed)
    q = np.array([F32(c) for c in wxyz(r)], np.float64)
    got = compiled().run(q=q, axis=v)["rotate"]
    want = Rotation.from_quat([*q[1:], q[0]]).apply(np.array(v, np.float64))
    assert np.abs(got - want).max() <= 16 * EPS * max(np.abs(v).max(), 1e-30)


@pytest.mark.parametrize("angle", [0.0, 1e-7, 1.0, 3.0, math.pi])
def test_to_axis_angle_of_q_and_minus_q(angle: float) -> None:
    """Documented: the angle is in [0, 2π]; -q gives 2π - θ about the opposite axis (the same
    rotation); the identity's axis is (1, 0, 0)."""
    axis = np.array([2.0, -1.0, 0.5]) / np.linalg.norm([2.0, -1.0, 0.5])
    q = wxyz(Rotation.from_rotvec(axis * angle)).astype(F32).astype(np.float64)
    a, t = compiled().run(q=q)["axis_angle"]
    b, u = compiled().run(q=-q)["axis_angle"]
    want = 2 * math.atan2(np.linalg.norm(q[1:]), q[0])
    assert abs(float(t) - want) <= 4 * EPS * max(want, 1.0)
    assert abs(float(u) - (2 * math.pi - want)) <= 8 * EPS * 2 * math.pi
    if angle == 0.0:
        assert a.tolist() == [1.0, 0.0, 0.0] and b.tolist() == [1.0, 0.0, 0.0]
    else:
        assert np.abs(a - axis).max() <= 1e-6 and np.abs(b + axis).max() <= 1e-6
