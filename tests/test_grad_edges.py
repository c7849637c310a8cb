"""cp.grad at the edges: random expression graphs (hypothesis) against central finite
differences of the same compiled expression in float64, the conventions of docs/semantics.md
at non-differentiable points, and arguments whose squares overflow or underflow."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp

from .support.checks import examples

F64 = cp.float64
Expr = Callable[[Any, Any], Any]

UNARY: list[tuple[str, Callable[[Any], Any]]] = [
    ("sin", cp.sin), ("cos", cp.cos), ("tanh", cp.tanh), ("atan", cp.atan),
    ("exp", lambda a: cp.exp(cp.clamp(a, -20.0, 20.0))), ("abs", cp.abs),
    ("sqrt", lambda a: cp.sqrt(a * a + 0.25)), ("log", lambda a: cp.log(a * a + 0.5)),
    ("neg", lambda a: -a), ("sq", lambda a: a * a), ("relu", cp.relu)]
BINARY: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (b * b + 0.5)), ("atan2", cp.atan2), ("hypot", cp.hypot),
    ("min", cp.min), ("max", cp.max), ("pow", lambda a, b: (a * a + 0.5) ** cp.tanh(b)),
    ("where", lambda a, b: cp.where(a > b, a * b, a - b))]


def expressions(depth: int) -> st.SearchStrategy[tuple[str, Expr]]:
    """A random expression of x and y, with its text."""
    leaves = st.sampled_from([("x", lambda x, y: x), ("y", lambda x, y: y),
                              ("0.7", lambda x, y: 0.7)])
    if depth == 0:
        return leaves
    sub = expressions(depth - 1)

    def unary(name_f: tuple[str, Callable[[Any], Any]], e: tuple[str, Expr]) -> tuple[str, Expr]:
        name, f = name_f
        text, g = e
        return f"{name}({text})", lambda x, y: f(g(x, y))

    def binary(name_f: tuple[str, Callable[[Any, Any], Any]], a: tuple[str, Expr],
               b: tuple[str, Expr]) -> tuple[str, Expr]:
        name, f = name_f
        return (f"{name}({a[0]}, {b[0]})",
                lambda x, y: f(a[1](x, y), b[1](x, y)))

    return st.one_of(leaves, st.builds(unary, st.sampled_from(UNARY), sub),
                     st.builds(binary, st.sampled_from(BINARY), sub, sub))


points = st.one_of(st.floats(-3, 3), st.sampled_from([0.0, 1.0, -1.0, 0.5, 1e-3]))


@settings(max_examples=examples(40), deadline=None)
@given(expressions(3), points, points)
def test_random_graphs_against_central_differences(expr: tuple[str, Expr], x0: float,
                                                    y0: float) -> None:
    """Where the expression is smooth around the point (both one-sided differences agree,
    and so do the gradients at the point and next to it: at a kink of abs, min or where the
    conventions of the next test apply instead), cp.grad equals the central difference of the
    compiled float64 expression."""
    text, f = expr
    x, y = cp.value(0.0, F64), cp.value(0.0, F64)
    out = cp.value(0.0, F64) + f(x, y)
    gx, gy = cp.grad(out, [x, y])
    tg = cp.LocalTarget()
    tg.compile(out, gx, gy)

    def at(a: float, b: float) -> tuple[float, float, float]:
        tg.write(x, a)
        tg.write(y, b)
        tg.run()
        return float(tg.read(out)), float(tg.read(gx)), float(tg.read(gy))

    f0, dx, dy = at(x0, y0)
    if not math.isfinite(f0):
        return
    h = 1e-6
    for k, (got, (a, b)) in enumerate(((dx, (1.0, 0.0)), (dy, (0.0, 1.0)))):
        plus, *g_plus = at(x0 + a * h, y0 + b * h)
        minus, *g_minus = at(x0 - a * h, y0 - b * h)
        right, left = (plus - f0) / h, (f0 - minus) / h
        if not (math.isfinite(right) and math.isfinite(left)):
            continue
        scale = max(1.0, abs(right), abs(left))
        if max(abs(right - left), abs(got - g_plus[k]), abs(got - g_minus[k])) > 1e-4 * scale:
            continue  # a kink (abs, min, where ...) at the point
        central = (plus - minus) / (2 * h)
        if abs(central) > 1e3 or (not math.isfinite(got) and 0.0 in (x0, y0)):
            continue  # a singularity (atan2 of two terms that vanish together, at a zero)
        assert math.isclose(got, central, rel_tol=1e-4, abs_tol=1e-4), text


@functools.cache
def conventions() -> tuple[cp.LocalTarget, Any, Any, dict[str, Any]]:
    a, b = cp.value(0.0), cp.value(0.0)
    outs = {
        "abs": cp.grad(cp.abs(a), a), "relu": cp.grad(cp.relu(a), a),
        "min_a": cp.grad(cp.min(a, b), a), "max_b": cp.grad(cp.max(a, b), b),
        "floor": cp.grad(cp.floor(a), a), "round": cp.grad(cp.round(a), a),
        "sign": cp.grad(cp.sign(a), a), "sqrt": cp.grad(cp.sqrt(a), a),
        "hypot": cp.grad(cp.hypot(a, b), a), "pow_a": cp.grad(a ** b, a),
        "pow_b": cp.grad(a ** b, b), "atan2_y": cp.grad(cp.atan2(a, b), a),
        "atan2_x": cp.grad(cp.atan2(a, b), b),
        "where_sqrt": cp.grad(cp.where(a > 0.0, cp.sqrt(a), 0.0), a),
        "where_safe": cp.grad(cp.where(a > 0.0, cp.sqrt(cp.where(a > 0.0, a, 1.0)), 0.0), a),
    }
    tg = cp.LocalTarget()
    tg.compile(*outs.values())
    return tg, a, b, outs


def gradients_at(a: float, b: float) -> dict[str, float]:
    tg, x, y, outs = conventions()
    tg.write(x, a)
    tg.write(y, b)
    tg.run()
    return {k: float(tg.read(v)) for k, v in outs.items()}


def test_conventions_at_non_differentiable_points() -> None:
    """docs/semantics.md, "Gradients": JAX's conventions."""
    g = gradients_at(0.0, 0.0)
    assert g["abs"] == 0.0 and g["relu"] == 0.0
    assert g["min_a"] == 0.5 and g["max_b"] == 0.5  # a tie splits the gradient
    assert g["floor"] == 0.0 and g["round"] == 0.0 and g["sign"] == 0.0
    assert g["sqrt"] == math.inf and g["hypot"] == 0.0
    assert g["pow_a"] == 0.0  # d(a**b)/da = 0 where b == 0 (JAX); it was NaN (0 * 0**-1)
    assert g["pow_b"] == 0.0  # d(a**b)/db = 0 where a == 0
    assert math.isnan(g["atan2_y"]) and math.isnan(g["atan2_x"])  # no direction at (0, 0)
    # where routes the gradient, but the untaken side's own derivative still multiplies it:
    # 0 * sqrt'(0) = 0 * inf = NaN, as in JAX; a guarded operand keeps it finite
    assert math.isnan(g["where_sqrt"]) and g["where_safe"] == 0.0
    g = gradients_at(2.0, 2.0)
    assert g["min_a"] == 0.5 and g["max_b"] == 0.5 and g["pow_a"] == 4.0


@pytest.mark.parametrize("b", [0.0, -0.0])
@pytest.mark.parametrize("a", [0.0, 2.0, -3.0, math.inf])
def test_pow_gradient_at_exponent_zero(a: float, b: float) -> None:
    """d(a**b)/da at b == 0 is 0 for every a (a**0 is 1); before, a = 0 gave NaN
    (0 * 0**-1 = 0 * inf)."""
    assert gradients_at(a, b)["pow_a"] == 0.0


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from([1e-30, 1e-23, 1e-19, 1e-10, 1.0, 1e10, 1e19, 1e25, 1e30]),
       st.floats(-1, 1).filter(lambda v: abs(v) > 1e-3),
       st.floats(-1, 1).filter(lambda v: abs(v) > 1e-3))
def test_atan2_gradient_at_any_magnitude(scale: float, u: float, v: float) -> None:
    """(x, -y) / (x² + y²) in float64 of the float32 arguments: the squares underflowed to 0
    (inf gradients) below ~1e-19 and overflowed (0 gradients) above ~1e19 before."""
    y, x = float(np.float32(u * scale)), float(np.float32(v * scale))
    g = gradients_at(y, x)
    r2 = x * x + y * y
    for got, want in ((g["atan2_y"], x / r2), (g["atan2_x"], -y / r2)):
        if abs(want) < 1e-38:  # below float32's normal range: the spacing of subnormals
            assert abs(got - want) <= 1e-44
        else:
            assert math.isclose(got, want, rel_tol=4 * 2.0 ** -24)


@settings(max_examples=examples(30), deadline=None)
@given(expressions(3), expressions(3), points, points)
def test_forward_and_reverse_jacobians_agree(e1: tuple[str, Expr], e2: tuple[str, Expr],
                                             x0: float, y0: float) -> None:
    """Both modes give the same finite entries (to rounding: sums group differently). Where an
    entry is NaN or inf in one mode, the other may give a finite value (documented: forward
    mode's products with a zero seed derivative fold away, docs/semantics.md's x * 0 → 0)."""
    x, y = cp.value(0.0, F64), cp.value(0.0, F64)
    ys = [cp.value(0.0, F64) + e1[1](x, y), cp.value(0.0, F64) + e2[1](x, y), x * y]
    rev = cp.jacobian(ys, [x, y], mode="reverse")
    fwd = cp.jacobian(ys, [x, y], mode="forward")
    tg = cp.LocalTarget()
    tg.compile(rev, fwd)
    tg.write(x, x0)
    tg.write(y, y0)
    tg.run()
    a, b = np.asarray(tg.read(rev)), np.asarray(tg.read(fwd))
    finite = np.isfinite(a) & np.isfinite(b)
    assert np.allclose(a[finite], b[finite], rtol=1e-12, atol=1e-12), (e1[0], e2[0])


def test_modes_differ_only_where_an_entry_is_not_finite() -> None:
    """The documented example: d atan2(x, x)/dx at the origin is NaN in reverse mode and 0 in
    forward mode (0 everywhere else: atan2(x, x) is constant on each side)."""
    x = cp.value(0.0)
    rev = cp.jacobian(cp.atan2(x, x), x, mode="reverse")
    fwd = cp.jacobian(cp.atan2(x, x), x, mode="forward")
    tg = cp.LocalTarget()
    tg.compile(rev, fwd)
    tg.run()
    assert np.isnan(tg.read(rev)).all() and not np.asarray(tg.read(fwd)).any()
