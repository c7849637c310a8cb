"""cp.linalg (solve, inv, det, cholesky): compiled and run against NumPy float64 on random
well-conditioned matrices, the singular rules of docs/semantics.md, and gradients through them
against central finite differences of the float64 reference (graph/reference.py).
Bit-identity across CPUs: tests/test_linalg_cross_arch.py."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import linalg
from copapy.arrays import Array
from copapy.graph.node import is_const
from copapy.graph.reference import evaluate_graph
from copapy.graph.traverse import live_nodes

F64 = cp.float64
SIZES = [1, 2, 3, 4, 6, 12]


def well_conditioned(seed: int, n: int) -> np.ndarray:
    """Q1 diag(s) Q2 with singular values in [0.5, 2] (condition number at most 4), so the
    pivoting of the elimination is exercised (the diagonal is not dominant)."""
    rng = np.random.default_rng(seed)
    q1, _ = np.linalg.qr(rng.normal(size=(n, n)))
    q2, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return q1 @ np.diag(rng.uniform(0.5, 2.0, n)) @ q2  # type: ignore[no-any-return]


def spd(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return q @ np.diag(rng.uniform(0.5, 2.0, n)) @ q.T  # type: ignore[no-any-return]


@functools.cache
def program(n: int, dtype: cp.DType) -> tuple[cp.LocalTarget, Array, Array, Array, list[Any]]:
    """One compiled program per size: inputs a, b, s (SPD); outputs solve, inv, det, cholesky."""
    a = cp.value(np.eye(n), dtype)
    b = cp.value(np.ones(n), dtype)
    s = cp.value(np.eye(n), dtype)
    outputs = [linalg.solve(a, b), linalg.inv(a), linalg.det(a), linalg.cholesky(s)]
    tg = cp.LocalTarget()
    tg.compile(*outputs)
    return tg, a, b, s, outputs


def run_all(n: int, dtype: cp.DType, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> list[Any]:
    tg, av, bv, sv, outputs = program(n, dtype)
    tg.write(av, a)
    tg.write(bv, b)
    tg.write(sv, s)
    tg.run()
    return [np.asarray(tg.read(o)) for o in outputs]


@pytest.mark.parametrize("n", SIZES)
@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_float64_against_numpy(n: int, seed: int) -> None:
    a, s = well_conditioned(seed, n), spd(seed, n)
    b = np.random.default_rng(seed + 2).normal(size=n)
    x, ai, d, low = run_all(n, F64, a, b, s)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(ai, np.linalg.inv(a), rtol=1e-11, atol=1e-12)
    assert math.isclose(float(d), np.linalg.det(a), rel_tol=1e-11)
    np.testing.assert_allclose(low, np.linalg.cholesky(s), rtol=1e-11, atol=1e-12)
    assert np.all(np.triu(low, 1) == 0.0)


@pytest.mark.parametrize("n", [3, 12])
@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_float32_against_numpy(n: int, seed: int) -> None:
    a, s = well_conditioned(seed, n), spd(seed, n)
    b = np.random.default_rng(seed + 2).normal(size=n)
    a32, b32, s32 = (m.astype(np.float32) for m in (a, b, s))
    x, ai, d, low = run_all(n, cp.float32, a32, b32, s32)
    a64, b64, s64 = (m.astype(np.float64) for m in (a32, b32, s32))
    tol = 2e-5 * n
    np.testing.assert_allclose(x, np.linalg.solve(a64, b64), rtol=tol, atol=tol)
    np.testing.assert_allclose(ai, np.linalg.inv(a64), rtol=tol, atol=tol)
    assert math.isclose(float(d), np.linalg.det(a64), rel_tol=tol)
    np.testing.assert_allclose(low, np.linalg.cholesky(s64), rtol=tol, atol=tol)


def documented_solve(a: np.ndarray, b: np.ndarray) -> tuple[list[float], float]:
    """The algorithm of the module docstring in Python floats: in column k the first row of
    largest |a_rk| is the pivot, rows are eliminated with factor = a_rk / pivot, back
    substitution sums left to right; det = sign * the pivots' product left to right."""
    n = len(a)
    rows = [[float(v) for v in a[r]] + [float(b[r])] for r in range(n)]
    sign = 1.0
    for k in range(n):
        p = max(range(k, n), key=lambda r: (abs(rows[r][k]), -r))
        if p != k:
            rows[k], rows[p] = rows[p], rows[k]
            sign = -sign
        for r in range(k + 1, n):
            f = rows[r][k] / rows[k][k]
            rows[r] = rows[r][:k + 1] + [rows[r][c] - f * rows[k][c] for c in range(k + 1, n + 1)]
    x = [0.0] * n
    for i in reversed(range(n)):
        total = rows[i][n]
        for j in range(i + 1, n):
            total = total - rows[i][j] * x[j]
        x[i] = total / rows[i][i]
    product = rows[0][0]
    for i in range(1, n):
        product = product * rows[i][i]
    return x, sign * product


@pytest.mark.parametrize("n", [3, 6])
@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_documented_algorithm_bit_for_bit(n: int, seed: int) -> None:
    # integer entries make ties of |a_rk| frequent: the first of the largest rows is the pivot
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(n, n)).astype(float) + np.eye(n) * 0.5
    b = rng.normal(size=n)
    want_x, want_det = documented_solve(a, b)
    x, _, d, _ = run_all(n, F64, a, b, np.eye(n))
    if np.isfinite(want_x).all():
        assert x.tolist() == want_x
    assert float(d) == want_det or (want_det == 0.0 and float(d) == 0.0)


def test_a_zero_leading_entry_is_pivoted() -> None:
    a = np.array([[0.0, 1.0, 2.0], [-2.0, 1.0, 0.0], [2.0, 3.0, 1.0]])
    b = np.array([1.0, 2.0, 3.0])
    x, ai, d, _ = run_all(3, F64, a, b, np.eye(3))
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-14)
    np.testing.assert_allclose(ai, np.linalg.inv(a), rtol=1e-14, atol=1e-15)
    assert float(d) == -14.0


@pytest.mark.parametrize("dtype", [cp.float32, F64])
def test_singular_matrices_follow_the_documented_rules(dtype: cp.DType) -> None:
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    not_spd = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    x, ai, d, low = run_all(3, dtype, singular, np.ones(3), not_spd)
    assert np.all(np.isnan(x)) and np.all(np.isnan(ai))
    assert float(d) == 0.0
    assert np.all(np.isnan(low[np.tril_indices(3)])) and np.all(np.triu(low, 1) == 0.0)
    zero = np.zeros((3, 3))
    x, ai, d, low = run_all(3, dtype, zero, np.ones(3), zero)
    assert np.all(np.isnan(x)) and np.all(np.isnan(ai)) and float(d) == 0.0
    assert np.all(np.isnan(low[np.tril_indices(3)]))
    # a NaN entry does not pass as positive definite
    nan_spd = np.eye(3)
    nan_spd[1, 1] = math.nan
    *_, low = run_all(3, dtype, np.eye(3), np.ones(3), nan_spd)
    assert np.all(np.isnan(low[np.tril_indices(3)]))


def test_constant_matrices_fold_at_trace_time() -> None:
    a = well_conditioned(7, 4)
    results = [linalg.inv(cp.matrix(a, dtype=F64)), linalg.cholesky(cp.matrix(spd(7, 4),
                                                                            dtype=F64))]
    for r in results:
        assert all(is_const(v.node) for v in r.items())
    d = linalg.det(cp.matrix(a, dtype=F64))
    assert is_const(d.node)
    inv, low = (np.array([float(evaluate_graph([v.node])[0]) for v in r.items()]).reshape(4, 4)
                for r in results)
    np.testing.assert_allclose(inv, np.linalg.inv(a), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(low, np.linalg.cholesky(spd(7, 4)), rtol=1e-12)


def test_solve_with_a_matrix_right_hand_side_and_packed_operands() -> None:
    a = well_conditioned(3, 5)
    b = np.random.default_rng(3).normal(size=(5, 2))
    av = cp.value(a, F64, packed=True)
    bv = cp.value(b, F64, packed=True)
    x = linalg.solve(av, bv)
    assert x.shape == (5, 2)
    tg = cp.LocalTarget()
    tg.compile(x)
    tg.run()
    np.testing.assert_allclose(tg.read(x), np.linalg.solve(a, b), rtol=1e-12, atol=1e-13)


def numeric_gradient(y: Any, x: Array, at: np.ndarray, step: float = 1e-6) -> np.ndarray:
    nodes = [v.node for v in x.items()]
    flat = at.reshape(-1)

    def f(point: np.ndarray) -> float:
        env = dict(zip(nodes, point.tolist(), strict=True))
        return float(evaluate_graph([y.node], env, kernels=False)[0])

    out = np.zeros(flat.size)
    for k in range(flat.size):
        d = np.zeros(flat.size)
        d[k] = step
        out[k] = (f(flat + d) - f(flat - d)) / (2 * step)
    return out.reshape(at.shape)


def gradient_at(y: Any, x: Array, at: np.ndarray) -> np.ndarray:
    g = cp.grad(y, x)
    tg = cp.LocalTarget()
    tg.compile(g)
    tg.write(x, at)
    tg.run()
    return np.asarray(tg.read(g))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradients_against_finite_differences(seed: int) -> None:
    n = 4
    a0, s0 = well_conditioned(seed, n), spd(seed, n)
    w = np.random.default_rng(seed).normal(size=(n, n))
    a = cp.value(a0, F64)
    s = cp.value(s0, F64)
    losses = [(a, a0, (linalg.solve(a, np.arange(1.0, n + 1)) * w[0]).sum()),
              (a, a0, (linalg.inv(a) * w).sum()),
              (a, a0, linalg.det(a)),
              (s, s0, (linalg.cholesky(s) * w).sum())]
    for x, x0, loss in losses:
        want = numeric_gradient(loss, x, x0)
        np.testing.assert_allclose(gradient_at(loss, x, x0), want, rtol=1e-6, atol=1e-7)


def test_det_gradient_is_jacobis_formula() -> None:
    a0 = well_conditioned(11, 5)
    a = cp.value(a0, F64)
    got = gradient_at(linalg.det(a), a, a0)
    np.testing.assert_allclose(got, np.linalg.det(a0) * np.linalg.inv(a0).T, rtol=1e-10,
                               atol=1e-12)


def test_shape_errors_name_the_problem() -> None:
    with pytest.raises(cp.ShapeError, match=r"linalg\.inv needs a square matrix, got shape \(2, 3"):
        linalg.inv(cp.value(np.ones((2, 3))))
    with pytest.raises(cp.ShapeError, match=r"linalg\.det needs a square matrix, got shape"):
        linalg.det(cp.value([1.0, 2.0]))
    with pytest.raises(cp.ShapeError, match="does not fit a of shape"):
        linalg.solve(cp.value(np.eye(3)), cp.value([1.0, 2.0]))
    with pytest.raises(cp.ShapeError, match=r"linalg\.cholesky needs a square matrix"):
        linalg.cholesky(cp.value(np.ones((3, 2))))


def test_results_stay_unpacked_at_every_size() -> None:
    a = cp.value(well_conditioned(1, 12), F64)
    for result in (linalg.inv(a), linalg.cholesky(a @ a.T), linalg.solve(a, np.ones(12))):
        assert not result.packed  # 144 elements: cp.matrix would pack them


def documented_positive_solve(s: np.ndarray, b: np.ndarray) -> list[list[float]]:
    """solve(assume_a="pos") as docs/semantics.md states it, in Python floats: Cholesky-
    Banachiewicz row by row, then L y = b and Lᵀ x = y, every sum left to right."""
    n, k = b.shape
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            total = float(s[i][j])
            for m in range(j):
                total = total - low[i][m] * low[j][m]
            low[i][j] = math.sqrt(total) if i == j else total / low[j][j]
    y = [[0.0] * k for _ in range(n)]
    for i in range(n):
        for c in range(k):
            total = float(b[i][c])
            for j in range(i):
                total = total - low[i][j] * y[j][c]
            y[i][c] = total / low[i][i]
    x = [[0.0] * k for _ in range(n)]
    for i in reversed(range(n)):
        for c in range(k):
            total = y[i][c]
            for j in range(i + 1, n):
                total = total - low[j][i] * x[j][c]
            x[i][c] = total / low[i][i]
    return x


@functools.cache
def positive_program(n: int, dtype: cp.DType) -> tuple[cp.LocalTarget, Array, Array, Array]:
    s = cp.value(np.eye(n), dtype)
    b = cp.value(np.ones((n, 2)), dtype)
    tg = cp.LocalTarget()
    x = linalg.solve(s, b, assume_a="pos")
    tg.compile(x)
    return tg, s, b, x


def run_positive(n: int, dtype: cp.DType, s: np.ndarray, b: np.ndarray) -> np.ndarray:
    tg, sv, bv, x = positive_program(n, dtype)
    tg.write(sv, s)
    tg.write(bv, b)
    tg.run()
    return np.asarray(tg.read(x))


@pytest.mark.parametrize("n", [1, 3, 6, 12])
@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_positive_solve_against_numpy_and_its_documented_algorithm(n: int, seed: int) -> None:
    s = spd(seed, n)
    b = np.random.default_rng(seed + 3).normal(size=(n, 2))
    x = run_positive(n, F64, s, b)
    assert x.tolist() == documented_positive_solve(s, b)
    np.testing.assert_allclose(x, np.linalg.solve(s, b), rtol=1e-11, atol=1e-12)
    s32, b32 = s.astype(np.float32), b.astype(np.float32)
    x32 = run_positive(n, cp.float32, s32, b32)
    np.testing.assert_allclose(x32, np.linalg.solve(s32.astype(np.float64), b32.astype(np.float64)),
                               rtol=2e-5 * n, atol=2e-5 * n)


def test_positive_solve_reads_the_lower_triangle_and_has_no_row_selects() -> None:
    s = spd(7, 6)
    b = np.arange(12.0).reshape(6, 2)
    upper_garbage = s + np.triu(np.full((6, 6), 5.0), 1)
    x = run_positive(6, F64, upper_garbage, b)
    assert x.tolist() == documented_positive_solve(s, b)
    sv, bv = cp.value(np.eye(6), cp.float32), cp.value(np.ones(6), cp.float32)
    selects = [n for n in live_nodes([v.node for v in linalg.solve(sv, bv, assume_a="pos").items()])
               if n.op == "where"]
    assert len(selects) == 12, len(selects)  # a root's guard per diagonal, a NaN rule per entry


@pytest.mark.parametrize("dtype", [F64, cp.float32])
def test_positive_solve_of_a_matrix_that_is_not_positive_definite_is_nan(dtype: cp.DType) -> None:
    for s in (np.diag([1.0, -1.0, 2.0]), np.zeros((3, 3)), np.diag([1.0, np.nan, 1.0])):
        x = run_positive(3, dtype, s, np.ones((3, 2)))
        assert np.isnan(x).all(), s


def test_solve_names_the_assumptions_it_knows() -> None:
    a = cp.value(np.eye(2), cp.float32)
    with pytest.raises(ValueError, match=r"assume_a is 'gen'.*or 'pos'.*'sym'"):
        linalg.solve(a, np.ones(2), assume_a="sym")
