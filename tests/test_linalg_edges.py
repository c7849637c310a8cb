"""cp.linalg at the edges: matrices that need pivoting (zero diagonal, permutations, a tiny
first column), badly scaled (1e-30 .. 1e30) and graded (condition up to 1e5) ones, 1x1,
against float64 NumPy on the float32 inputs with a condition-number tolerance; cholesky of
indefinite, semi-definite and NaN matrices (the documented all-NaN lower triangle); and the
gradient through solve against central differences in float64."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import linalg

from .support.checks import examples

F32 = np.float32
EPS = 2.0 ** -24
KINDS = ["normal", "zero_diagonal", "permutation", "tiny_column", "scaled", "graded",
         "triangular"]


def matrix(kind: str, n: int, seed: int, scale: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, n))
    if kind == "zero_diagonal" and n > 1:
        np.fill_diagonal(m, 0.0)
    elif kind == "permutation":
        m = np.eye(n)[rng.permutation(n)] * rng.uniform(0.5, 2.0, n)
    elif kind == "tiny_column":
        m[:, 0] *= 1e-3
    elif kind == "scaled":
        m *= scale
    elif kind == "graded":
        u, _ = np.linalg.qr(rng.normal(size=(n, n)))
        v, _ = np.linalg.qr(rng.normal(size=(n, n)))
        m = u @ np.diag(np.logspace(0, -5, n)) @ v
    elif kind == "triangular":
        m = np.triu(m) + np.eye(n) * np.sign(np.diag(m))
    return m.astype(F32)  # type: ignore[no-any-return]


@functools.cache
def program(n: int) -> tuple[cp.LocalTarget, Any, Any, dict[str, Any]]:
    a = cp.value(np.eye(n, dtype=F32))
    b = cp.value(np.ones(n, F32))
    outs = {"solve": linalg.solve(a, b), "inv": linalg.inv(a), "det": linalg.det(a),
            "cholesky": linalg.cholesky(a)}
    tg = cp.LocalTarget()
    tg.compile(*outs.values())
    return tg, a, b, outs


def run(m: np.ndarray, rhs: np.ndarray) -> dict[str, np.ndarray]:
    tg, a, b, outs = program(m.shape[0])
    tg.write(a, m)
    tg.write(b, rhs)
    tg.run()
    return {k: np.asarray(tg.read(v), np.float64) for k, v in outs.items()}


@settings(max_examples=examples(80), deadline=None)
@given(st.sampled_from(KINDS), st.integers(1, 6), st.integers(0, 2 ** 32 - 1),
       st.sampled_from([1e-30, 1e-12, 1e12, 1e30]))
def test_solve_inv_det_against_float64(kind: str, n: int, seed: int, scale: float) -> None:
    """Backward-stable elimination: the error relative to the solution's size is at most
    ~ cond · n · eps (a factor 8 of slack), and det within cond · n² · eps."""
    m = matrix(kind, n, seed, scale)
    rhs = np.random.default_rng(seed + 1).normal(size=n).astype(F32)
    ref = m.astype(np.float64)
    if np.linalg.matrix_rank(ref) < n:
        return
    cond = np.linalg.cond(ref)
    got = run(m, rhs)
    x = np.linalg.solve(ref, rhs.astype(np.float64))
    tol = 8 * cond * n * EPS
    assert np.abs(got["solve"] - x).max() <= tol * np.abs(x).max()
    inverse = np.linalg.inv(ref)
    assert np.abs(got["inv"] - inverse).max() <= tol * np.abs(inverse).max()
    d = np.linalg.det(ref)
    if 1e-37 < abs(d) < 3e38:  # inside float32's normal range
        assert abs(got["det"] - d) <= 8 * cond * n * n * EPS * abs(d)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_singular_rules(n: int) -> None:
    """An exactly zero pivot: solve and inv all NaN, det ±0.0 (docs/semantics.md)."""
    m = np.ones((n, n), F32)
    if n == 1:
        m[0, 0] = 0.0
    got = run(m, np.ones(n, F32))
    assert np.isnan(got["solve"]).all() and np.isnan(got["inv"]).all()
    assert got["det"] == 0.0


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 6), st.integers(0, 2 ** 32 - 1),
       st.sampled_from([1e-30, 1e-6, 1.0, 1e6, 1e30]))
def test_cholesky_of_spd_matrices_at_any_scale(n: int, seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    m = (q @ np.diag(rng.uniform(0.1, 2.0, n)) @ q.T * scale).astype(F32)
    m = np.tril(m) + np.tril(m, -1).T  # exactly symmetric in float32
    ref = m.astype(np.float64)
    if np.linalg.eigvalsh(ref).min() <= 0:
        return
    low = np.linalg.cholesky(ref)
    got = run(m, np.ones(n, F32))["cholesky"]
    cond = np.linalg.cond(ref)
    assert np.abs(got - low).max() <= 8 * np.sqrt(cond) * n * EPS * np.abs(low).max()
    assert not np.triu(got, 1).any()


@pytest.mark.parametrize("m", [
    [[-1.0]], [[0.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]],
    [[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [[np.nan, 0.0], [0.0, 1.0]],
    [[1.0, 0.0], [0.0, -1e-30]]], ids=lambda m: str(np.asarray(m).shape))
def test_cholesky_of_matrices_that_are_not_positive_definite(m: list[list[float]]) -> None:
    """Indefinite, semi-definite (an exactly zero pivot), NaN: the whole lower triangle NaN,
    the upper triangle 0 (docs/semantics.md)."""
    a = np.array(m, F32)
    got = run(a, np.ones(a.shape[0], F32))["cholesky"]
    assert np.isnan(got[np.tril_indices(a.shape[0])]).all() and not np.triu(got, 1).any()


@settings(max_examples=examples(20), deadline=None)
@given(st.sampled_from(["normal", "zero_diagonal", "permutation", "tiny_column"]),
       st.integers(2, 4), st.integers(0, 2 ** 32 - 1))
def test_gradient_through_solve(kind: str, n: int, seed: int) -> None:
    """d(w·solve(A, b))/dA and /db in float64 against the adjoint formula on NumPy's solve
    (pivoting happens inside: the gradient follows the chosen rows)."""
    m = matrix(kind, n, seed, 1.0).astype(np.float64)
    if np.linalg.cond(m) > 1e4:
        return
    rng = np.random.default_rng(seed + 2)
    rhs, w = rng.normal(size=n), rng.normal(size=n)
    a = cp.value(m, cp.float64)
    b = cp.value(rhs, cp.float64)
    loss = (linalg.solve(a, b) * cp.vector(w, dtype=cp.float64)).sum()
    ga, gb = cp.grad(loss, [a, b])
    tg = cp.LocalTarget()
    tg.compile(ga, gb)
    tg.run()
    # the adjoint: λ = A^-T w; dL/db = λ, dL/dA = -λ xᵀ (x = A^-1 b), in float64
    lam = np.linalg.solve(m.T, w)
    fd_a = -np.outer(lam, np.linalg.solve(m, rhs))
    fd_b = lam
    cond = np.linalg.cond(m)
    assert np.allclose(np.asarray(tg.read(ga)), fd_a, rtol=1e-12 * cond, atol=0)
    assert np.allclose(np.asarray(tg.read(gb)), fd_b, rtol=1e-12 * cond, atol=0)
