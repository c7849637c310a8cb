"""Small dense linear algebra on traced values: ``cp.linalg.solve``, ``inv``, ``det``,
``cholesky`` (docs/semantics.md, "Linear algebra").

Every function unrolls into a scalar graph of +, -, *, /, sqrt and ``where`` (no loops, no
library calls), so the result is the same bits on every CPU and constants fold: a constant
matrix gives a constant result at compile time, and a zero entry removes its terms. Results are
unpacked arrays at every size. Meant for the small fixed sizes of estimators and controllers
(1 to about 16; the graph grows as n³).

* ``solve``, ``inv``, ``det``: Gaussian elimination with partial pivoting (LU). In column k
  the pivot is the first row r ≥ k of largest |a_rk| (strictly larger wins, as LAPACK's
  idamax); the rows are swapped by ``where`` selects. Back substitution sums left to right.
* ``cholesky``: Cholesky-Banachiewicz, row by row, sums left to right; reads the lower
  triangle of its operand only.
* ``solve(a, b, assume_a="pos")``: ``cholesky``'s factor, then L y = b and Lᵀ x = y (sums left
  to right); no pivoting, so no row selects (a 6x6 system: 12 selects instead of LU's ~200).

Singular rules (no fault is raised, nothing traps):

* ``det``: the product of the pivots times the sign of the row permutation; a matrix whose
  elimination meets an exactly zero pivot gives ±0.0 (the zero pivot is replaced by 1 as a
  divisor, so no NaN arises in the elimination).
* ``solve`` / ``inv``: if any pivot is exactly zero, every entry of the result is NaN. A
  nearly singular matrix is not detected: its result is what IEEE arithmetic gives.
* ``cholesky``: if a diagonal term before its square root is not > 0 (the matrix is not
  positive definite, or is NaN), every entry of the lower triangle is NaN (the upper triangle
  is the constant 0 always); ``solve(assume_a="pos")``: then every entry of x is NaN.

Gradients flow through all four (the selects route them to the chosen side).
"""

from __future__ import annotations

import math
from typing import Any

from . import dtypes as dt
from .arrays import Array, asarray
from .functions import abs as abs_
from .functions import logical_or, sqrt, where
from .graph.errors import ShapeError
from .value import Value, wrap

__all__ = ["cholesky", "det", "inv", "solve"]

Rows = list[list[Value[Any]]]


def _square(a: Any, function: str) -> tuple[Rows, dt.DType]:
    m = asarray(a)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ShapeError(f"linalg.{function} needs a square matrix, got shape {m.shape}")
    kind = m.dtype if m.dtype.is_float else dt.float32
    items = [v if v.dtype is kind else v.astype(kind) for v in m.items()]
    n = m.shape[0]
    return [items[r * n:(r + 1) * n] for r in range(n)], kind


def _eliminate(rows: Rows, width: int) -> tuple[Rows, Value[float], Value[bool]]:
    """Forward elimination with partial pivoting of rows n x (n + extra columns) in place.

    Returns the upper-triangular rows (with the transformed extra columns), the sign of the
    permutation (±1.0) and whether a pivot was exactly zero."""
    n = len(rows)
    kind = rows[0][0].dtype
    sign: Value[float] = wrap(1.0).astype(kind)
    singular: Value[bool] = wrap(False)
    for k in range(n):
        best = abs_(rows[k][k])
        choice: Value[int] = wrap(k)
        for r in range(k + 1, n):
            size = abs_(rows[r][k])
            larger = size > best
            best = where(larger, size, best)
            choice = where(larger, r, choice)
        picked = [choice == r for r in range(k, n)]
        top = rows[k]
        new_top = list(top)
        for r, is_it in zip(range(k + 1, n), picked[1:], strict=True):
            new_top = [where(is_it, b, t) for b, t in zip(rows[r], new_top, strict=True)]
            rows[r] = [where(is_it, t, b) for t, b in zip(top, rows[r], strict=True)]
        rows[k] = new_top
        sign = where(picked[0], sign, -sign)
        pivot = rows[k][k]
        zero = pivot == 0.0
        singular = logical_or(singular, zero)
        divisor = where(zero, 1.0, pivot)
        for r in range(k + 1, n):
            factor = rows[r][k] / divisor
            rows[r] = (rows[r][:k + 1] + [rows[r][c] - factor * rows[k][c]
                                          for c in range(k + 1, width)])
    return rows, sign, singular


def _nan_if(flag: Value[bool], values: list[Value[Any]]) -> list[Value[Any]]:
    return [where(flag, math.nan, v) for v in values]


def solve(a: Any, b: Any, assume_a: str = "gen") -> Array:
    """x with a @ x = b, for a square matrix a and a vector (n,) or matrix (n, k) b.

    ``assume_a="gen"``: LU with partial pivoting, all-NaN if elimination meets an exactly zero
    pivot (see the module's singular rules). ``assume_a="pos"`` (as SciPy's): a is symmetric
    positive definite (its lower triangle is read): Cholesky, then two triangular solves, no
    pivoting, so none of LU's row selects (a Kalman gain's S, a damped least squares step's
    J Jᵀ + λ² I); all-NaN if a diagonal term is not > 0 before its square root."""
    if assume_a not in ("gen", "pos"):
        raise ValueError(f"linalg.solve: assume_a is 'gen' (any square a) or 'pos' (symmetric "
                         f"positive definite), not {assume_a!r}")
    rows, kind = _square(a, "solve")
    n = len(rows)
    rhs = asarray(b, kind)
    if rhs.shape[0] != n or rhs.ndim not in (1, 2):
        raise ShapeError(f"linalg.solve: b of shape {rhs.shape} does not fit a of shape "
                         f"{(n, n)} (b is (n,) or (n, k))")
    k = 1 if rhs.ndim == 1 else rhs.shape[1]
    extra = [v if v.dtype is kind else v.astype(kind) for v in rhs.items()]
    if assume_a == "pos":
        return _solve_positive(rows, [extra[r * k:(r + 1) * k] for r in range(n)], rhs.shape)
    augmented = [rows[r] + extra[r * k:(r + 1) * k] for r in range(n)]
    upper, _, singular = _eliminate(augmented, n + k)
    x: Rows = [[] for _ in range(n)]
    for i in reversed(range(n)):
        divisor = where(upper[i][i] == 0.0, 1.0, upper[i][i])
        for c in range(k):
            total = upper[i][n + c]
            for j in range(i + 1, n):
                total = total - upper[i][j] * x[j][c]
            x[i].append(total / divisor)
    flat = _nan_if(singular, [v for row in x for v in row])
    return Array(rhs.shape, items=flat)


def _solve_positive(rows: Rows, rhs: Rows, shape: tuple[int, ...]) -> Array:
    """solve(assume_a="pos"): L Lᵀ x = b by L y = b, then Lᵀ x = y (sums left to right)."""
    low, failed = _cholesky(rows)
    n, k = len(rows), len(rhs[0])
    y: Rows = [[] for _ in range(n)]
    for i in range(n):
        for c in range(k):
            total = rhs[i][c]
            for j in range(i):
                total = total - low[i][j] * y[j][c]
            y[i].append(total / low[i][i])
    x: Rows = [[] for _ in range(n)]
    for i in reversed(range(n)):
        for c in range(k):
            total = y[i][c]
            for j in range(i + 1, n):
                total = total - low[j][i] * x[j][c]
            x[i].append(total / low[i][i])
    return Array(shape, items=_nan_if(failed, [v for row in x for v in row]))


def _cholesky(rows: Rows) -> tuple[Rows, Value[bool]]:
    """The Cholesky factor (Banachiewicz, row by row; a failed diagonal's root taken of 1.0)
    and whether a diagonal term was not > 0 before its square root."""
    n = len(rows)
    zero = wrap(0.0).astype(rows[0][0].dtype)
    low: Rows = [[zero] * n for _ in range(n)]
    failed: Value[bool] = wrap(False)
    for i in range(n):
        for j in range(i + 1):
            total = rows[i][j]
            for m in range(j):
                total = total - low[i][m] * low[j][m]
            if i == j:
                positive = total > 0.0
                failed = logical_or(failed, ~positive)
                low[i][i] = sqrt(where(positive, total, 1.0))
            else:
                low[i][j] = total / low[j][j]
    return low, failed


def inv(a: Any) -> Array:
    """The inverse of a square matrix: solve(a, I). All-NaN if singular (see solve)."""
    n = len(_square(a, "inv")[0])
    identity = [[1.0 if r == c else 0.0 for c in range(n)] for r in range(n)]
    return solve(a, identity)


def det(a: Any) -> Value[float]:
    """The determinant: the product of the LU pivots (left to right) times the permutation's
    sign; ±0.0 for a matrix with an exactly zero pivot."""
    rows, _ = _square(a, "det")
    upper, sign, _ = _eliminate([list(r) for r in rows], len(rows))
    product = upper[0][0]
    for i in range(1, len(rows)):
        product = product * upper[i][i]
    result: Value[float] = sign * product
    return result


def cholesky(a: Any) -> Array:
    """Lower-triangular L with L @ L.T = a for a symmetric positive definite a (its lower
    triangle is read). Its lower triangle is NaN if a diagonal term is not > 0 before
    its square root."""
    rows, _ = _square(a, "cholesky")
    n = len(rows)
    low, failed = _cholesky(rows)
    flat = [v for row in low for v in row]
    guarded = [v if r < c else where(failed, math.nan, v)
               for (r, c), v in zip(((r, c) for r in range(n) for c in range(n)), flat,
                                    strict=True)]
    return Array((n, n), items=guarded)
