"""cp.jacobian and cp.hessian: compiled and run, against central finite differences of the
float64 NumPy reference (graph/reference.py) and against Jacobians derived by hand (a 2-link
arm's forward kinematics, the rotation of a vector by a quaternion)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arrays import Array
from copapy.graph.node import is_const
from copapy.graph.reference import evaluate_graph

F64 = cp.float64
MODES = ("reverse", "forward", "auto")


def run(*outputs: Any) -> list[Any]:
    tg = cp.LocalTarget()
    tg.compile(*outputs)
    tg.run()
    return [np.asarray(tg.read(o)) for o in outputs]


def finite_jacobian(ys: Array, xs: Array, at: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central differences of the float64 reference evaluation of the graph."""
    nodes = [v.node for v in ys.items()]
    inputs = [v.node for v in xs.items()]

    def f(point: np.ndarray) -> np.ndarray:
        env = dict(zip(inputs, point.tolist(), strict=True))
        return np.array([float(v) for v in evaluate_graph(nodes, env, kernels=False)])

    cols = []
    for j in range(len(at)):
        h = step * max(1.0, abs(at[j]))
        d = np.zeros(len(at))
        d[j] = h
        cols.append((f(at + d) - f(at - d)) / (2 * h))
    return np.stack(cols, axis=1)


def model(x: Array) -> Array:
    """A small non-linear model with structural zeros (output 2 ignores x[1] and x[2])."""
    a, b, c = x.items()
    return cp.vector([cp.sin(a) * b + c * c, cp.exp(0.3 * b) - cp.atan2(c, 2.0 + a * a),
                      a * a * 0.5, cp.sqrt(1.0 + b * b) * cp.cos(c), a * b * c])


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3))
def test_jacobian_against_finite_differences(mode: str, point: list[float]) -> None:
    x = cp.value(point, F64)
    y = model(x)
    jac = cp.jacobian(y, x, mode=mode)  # type: ignore[arg-type]
    assert jac.shape == (5, 3) and not jac.packed
    (got,) = run(jac)
    want = finite_jacobian(y, x, np.array(point))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_zero_entries_are_constants(mode: str) -> None:
    x = cp.value([0.1, 0.2, 0.3], F64)
    jac = cp.jacobian(model(x), x, mode=mode)  # type: ignore[arg-type]
    items = jac.items()
    row2 = items[6:9]  # d(a*a/2)/d(a, b, c)
    assert not is_const(row2[0].node)
    assert all(is_const(v.node) and float(evaluate_graph([v.node])[0]) == 0.0 for v in row2[1:])
    # so a product with the Jacobian drops those terms: J[2] @ w depends on w[0] only
    w = cp.value([1.0, 2.0, 3.0], F64)
    product = jac[2] @ w
    assert {v.node for v in w.items()[1:]}.isdisjoint(_leaves(product.node))


def _leaves(node: Any) -> set[Any]:
    from copapy.graph.traverse import live_nodes
    return {n for n in live_nodes([node]) if n.op == "input"}


def two_link(q: Array, l1: float, l2: float) -> Array:
    q1, q2 = q.items()
    return cp.vector([l1 * cp.cos(q1) + l2 * cp.cos(q1 + q2),
                      l1 * cp.sin(q1) + l2 * cp.sin(q1 + q2)])


def two_link_jacobian(q1: float, q2: float, l1: float, l2: float) -> np.ndarray:
    s1, c1 = math.sin(q1), math.cos(q1)
    s12, c12 = math.sin(q1 + q2), math.cos(q1 + q2)
    return np.array([[-l1 * s1 - l2 * s12, -l2 * s12], [l1 * c1 + l2 * c12, l2 * c12]])


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=10, deadline=None)
@given(st.floats(-3.0, 3.0), st.floats(-3.0, 3.0))
def test_two_link_arm_against_the_hand_derived_jacobian(mode: str, q1: float, q2: float) -> None:
    q = cp.value([q1, q2], F64)
    (got,) = run(cp.jacobian(two_link(q, 0.7, 0.4), q, mode=mode))  # type: ignore[arg-type]
    np.testing.assert_allclose(got, two_link_jacobian(q1, q2, 0.7, 0.4), rtol=1e-12,
                               atol=1e-12)


def skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def rotation_jacobians(q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """By hand, for Quaternion.rotate's v' = v + 2 w (u x v) + 2 u x (u x v)
    = v + 2 w (u x v) + 2 (u·v) u - 2 (u·u) v, q = (w, u) (any q, unit or not):
    d/dw = 2 u x v;  d/du = -2 w [v]ₓ + 2 (u vᵀ + (u·v) I) - 4 v uᵀ;
    d/dv = (1 - 2 u·u) I + 2 w [u]ₓ + 2 u uᵀ (R(q) for a unit q)."""
    w, u = q[0], q[1:]
    d_w = 2 * np.cross(u, v)
    d_u = -2 * w * skew(v) + 2 * (np.outer(u, v) + u @ v * np.eye(3)) - 4 * np.outer(v, u)
    d_v = (1 - 2 * u @ u) * np.eye(3) + 2 * w * skew(u) + 2 * np.outer(u, u)
    return np.column_stack([d_w, d_u]), d_v


@settings(max_examples=10, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=7, max_size=7))
def test_quaternion_rotation_against_the_hand_derived_jacobian(numbers: list[float]) -> None:
    qv, vv = np.array(numbers[:4]), np.array(numbers[4:])
    q = cp.quaternion(*(cp.value(float(c), F64) for c in qv))
    v = cp.value(vv.tolist(), F64)
    rotated = q.rotate(v)
    got_q, got_v, both = run(cp.jacobian(rotated, q), cp.jacobian(rotated, v, mode="forward"),
                             cp.jacobian(rotated, [q, v]))
    want_q, want_v = rotation_jacobians(qv, vv)
    np.testing.assert_allclose(got_q, want_q, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_v, want_v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(both, np.hstack([want_q, want_v]), rtol=1e-12, atol=1e-12)


def test_packed_inputs_and_outputs() -> None:
    a = np.arange(12.0).reshape(4, 3) / 7.0
    x = cp.value([0.5, -1.0, 2.0], F64, packed=True)
    y = cp.matrix(a, packed=True, dtype=F64) @ x
    assert x.packed and y.packed
    for mode in MODES:
        (got,) = run(cp.jacobian(y * y, x, mode=mode))  # type: ignore[arg-type]
        np.testing.assert_allclose(got, 2 * np.diag(a @ [0.5, -1.0, 2.0]) @ a, rtol=1e-12)


def test_float32_jacobian_is_float32() -> None:
    x = cp.value([0.25, 0.5])
    jac = cp.jacobian(two_link(x, 1.0, 1.0), x)
    assert jac.dtype is cp.float32
    (got,) = run(jac)
    np.testing.assert_allclose(got, two_link_jacobian(0.25, 0.5, 1.0, 1.0), rtol=1e-6)


HessFn = Callable[[Array], Any]
HESSIAN_CASES: list[HessFn] = [
    lambda x: (x * x * x).sum() * x[0],
    lambda x: cp.exp(x[0] * x[1]) + cp.sin(x[2]) * x[1] * x[1],
    lambda x: cp.log(1.0 + x[0] * x[0] + x[1] * x[1] * x[2] * x[2]),
]


@pytest.mark.parametrize("case", range(len(HESSIAN_CASES)))
@pytest.mark.parametrize("mode", MODES)
def test_hessian_against_finite_differences_of_the_gradient(case: int, mode: str) -> None:
    point = np.array([0.4, -0.7, 1.3])
    x = cp.value(point.tolist(), F64)
    y = HESSIAN_CASES[case](x)
    hess = cp.hessian(y, x, mode=mode)  # type: ignore[arg-type]
    gradient = cp.grad(y, x)
    (got,) = run(hess)
    want = finite_jacobian(gradient, x, point)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert np.array_equal(got, got.T)  # symmetric bit for bit by construction


def test_hessian_of_a_quadratic_form_is_exact() -> None:
    a = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, 0.0], [0.0, 0.0, 0.0]])
    x = cp.value([1.0, 2.0, 3.0], F64)
    hess = cp.hessian(x @ (cp.matrix(a, dtype=F64) @ x), x)
    assert all(is_const(v.node) for v in hess.items())  # folded at trace time
    (got,) = run(hess)
    assert np.array_equal(got, a + a.T)


def test_errors_name_the_problem() -> None:
    x = cp.value([1.0, 2.0])
    with pytest.raises(TypeError, match="int32 value"):
        cp.jacobian(x * 2.0, cp.value(3))
    with pytest.raises(ValueError, match="mode must be"):
        cp.jacobian(x, x, mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be"):
        cp.hessian(x.sum(), x, mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a scalar output"):
        cp.hessian(x, x)
    with pytest.raises(TypeError, match="got str"):
        cp.jacobian(x, "x")
    with pytest.raises(ValueError, match="at least one value"):
        cp.jacobian([], x)
    with pytest.raises(cp.NotDifferentiableError, match="int32 output"):
        cp.jacobian(cp.value(3) * 2, x)


def test_auto_mode_takes_the_smaller_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    from copapy import jacobians

    chosen: list[str] = []
    reverse, forward = jacobians._rows_reverse, jacobians._rows_forward
    monkeypatch.setattr(jacobians, "_rows_reverse",
                        lambda *a: chosen.append("reverse") or reverse(*a))
    monkeypatch.setattr(jacobians, "_rows_forward",
                        lambda *a: chosen.append("forward") or forward(*a))
    t = cp.value(0.3, F64)  # one input, 12 outputs sharing a long chain: forward (1 sweep)
    chain = t
    for _ in range(30):
        chain = cp.sin(chain) * 1.1 + t
    many = cp.jacobian([chain * k for k in range(1, 13)], t)
    x = cp.value(np.linspace(0.1, 1.0, 12).tolist(), F64)  # 12 inputs, one output: reverse
    one = cp.jacobian((x * x).sum() * cp.exp(x[0]), x)
    assert chosen == ["forward", "reverse"]
    got_many, got_one = run(many, one)
    (want,) = run(cp.jacobian([chain * k for k in range(1, 13)], t, mode="reverse"))
    np.testing.assert_allclose(got_many, want, rtol=1e-13)
    assert got_one.shape == (1, 12)


def test_hessian_with_respect_to_a_packed_vector() -> None:
    x = cp.value([0.5, -0.25, 2.0], F64, packed=True)
    m = np.array([[1.0, 2.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 1.0]])
    y = cp.matrix(m, packed=True, dtype=F64) @ x
    (got,) = run(cp.hessian((y * y).sum(), x))
    np.testing.assert_allclose(got, 2 * m.T @ m, rtol=1e-13)
