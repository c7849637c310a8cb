"""Reverse-mode gradients against central finite differences in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import copapy as cp
from copapy.graph import build
from copapy.graph.grad_rules import RULES, ZERO_GRADIENT, rule_for
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_graph
from copapy.value import Value

F64 = cp.float64


def compile_with_grad(f, n_args: int):  # type: ignore[no-untyped-def]
    xs = [cp.value(0.5, F64) for _ in range(n_args)]
    y = f(*xs)
    grads = cp.grad(y, xs)
    tg = cp.LocalTarget()
    tg.compile(y, *grads)
    return xs, y, grads, tg


def finite_difference(y: Value, xs: list[Value], at: list[float], k: int,
                      step: float = 1e-6) -> float:
    h = step * max(1.0, abs(at[k]))

    def value_at(delta: float) -> float:
        point = list(at)
        point[k] += delta
        env = {x.node: p for x, p in zip(xs, point, strict=True)}
        return float(evaluate_graph([y.node], env)[0])

    return (value_at(h) - value_at(-h)) / (2 * h)


def check(f, point: list[float], step: float = 1e-6) -> None:  # type: ignore[no-untyped-def]
    xs, y, grads, tg = compile_with_grad(f, len(point))
    for x, p in zip(xs, point, strict=True):
        tg.write(x, p)
    tg.run()
    for k, g in enumerate(grads):
        got = tg.read(g)
        want = finite_difference(y, xs, point, k, step)
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-6), (k, point, got, want)


# every differentiable operation, with a domain where it is smooth
UNARY_DOMAINS = {
    "neg": (-5, 5), "abs": (0.1, 5), "relu": (0.1, 5), "sqrt": (0.1, 5), "sin": (-5, 5),
    "cos": (-5, 5), "tan": (-1.2, 1.2), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9),
    "atan": (-5, 5), "exp": (-5, 5), "log": (0.1, 5), "tanh": (-3, 3),
}
BINARY_DOMAINS = {
    "add": ((-5, 5), (-5, 5)), "sub": ((-5, 5), (-5, 5)), "mul": ((-5, 5), (-5, 5)),
    "div": ((-5, 5), (0.2, 5)), "pow": ((0.2, 3), (-2, 2)), "atan2": ((0.2, 3), (0.2, 3)),
    "min": ((-5, 5), (-5, 5)), "max": ((-5, 5), (-5, 5)), "mod": ((0.1, 5), (0.7, 2)),
}


def test_every_differentiable_operation_has_a_domain() -> None:
    smooth = {n for n, s in REGISTRY.items() if rule_for(n) is not None and 0 < s.arity < 3
              and s.operands in ("num", "float") and s.shape_rule == "elementwise"}
    assert smooth - ZERO_GRADIENT == set(UNARY_DOMAINS) | set(BINARY_DOMAINS)


def test_every_float_operation_has_a_derivative_rule() -> None:
    """A row whose result can be a float needs a rule in graph/grad_rules.py (or is listed
    there as zero almost everywhere); rules name existing rows only."""
    floats = {n for n, s in REGISTRY.items()
              if s.result in ("same", "float32", "float64")
              and s.operands in ("num", "float", "any")}
    assert floats - set(RULES) == set()
    assert set(RULES) <= set(REGISTRY)


@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
@given(st.floats(0, 1))
def test_unary_gradient(name: str, t: float) -> None:
    lo, hi = UNARY_DOMAINS[name]
    check(lambda x: Value(build.apply(name, x.node)), [lo + t * (hi - lo)])


@pytest.mark.parametrize("name", sorted(BINARY_DOMAINS))
@given(st.floats(0, 1), st.floats(0, 1))
def test_binary_gradient(name: str, s: float, t: float) -> None:
    (a0, a1), (b0, b1) = BINARY_DOMAINS[name]
    a, b = a0 + s * (a1 - a0), b0 + t * (b1 - b0)
    if name in ("min", "max"):
        assume(abs(a - b) > 1e-3)
    if name == "mod":
        assume(abs(a / b - round(a / b)) > 1e-3)
    check(lambda x, y: Value(build.apply(name, x.node, y.node)), [a, b])


def test_where_and_casts_route_gradients() -> None:
    check(lambda x, y: cp.where(x > y, x * y, cp.sin(y)), [1.5, 0.3])
    check(lambda x, y: cp.where(x > y, x * y, cp.sin(y)), [0.2, 0.3])
    # linear through a float32 round trip: a coarse step is exact and avoids float32 noise
    check(lambda x: cp.cast(cp.cast(x, cp.float32) * 2.0, cp.float64) + x, [0.75], step=1e-2)


def test_nondifferentiable_conventions() -> None:
    x = cp.value(0.0, F64)
    y = cp.value(0.0, F64)
    outs = [cp.grad(cp.abs(x), x), cp.grad(cp.relu(x), x), *cp.grad(cp.min(x, y), [x, y]),
            cp.grad(cp.floor(x) + x, x)]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    assert [tg.read(o) for o in outs] == [0.0, 0.0, 0.5, 0.5, 1.0]


def test_gradient_of_int_input_raises() -> None:
    with pytest.raises(TypeError, match="float values"):
        cp.grad(cp.value(1.0) * cp.value(2), cp.value(2))


def test_micrograd_reference() -> None:
    a = cp.value(-4.0, F64)
    b = cp.value(2.0, F64)
    c = a + b
    d = a * b + b**3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + cp.relu(b + a)
    d += 3 * d + cp.relu(b - a)
    e = c - d
    f = e**2
    g = f / 2.0
    g += 10.0 / f
    ga, gb = cp.grad(g, [a, b])
    tg = cp.LocalTarget()
    tg.compile(g, ga, gb)
    tg.run()
    assert round(tg.read(g), 4) == 24.7041
    assert round(tg.read(ga), 4) == 138.8338
    assert round(tg.read(gb), 4) == 645.5773


SMOOTH = ["add", "sub", "mul", "sin", "cos", "tanh", "atan", "exp_small", "square_root"]


@st.composite
def composite(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    steps = draw(st.lists(st.tuples(st.sampled_from(SMOOTH), st.integers(0, 50),
                                    st.integers(0, 50)), min_size=1, max_size=12))

    def f(*xs: Value) -> Value:
        pool = list(xs)
        for op, i, j in steps:
            a, b = pool[i % len(pool)], pool[j % len(pool)]
            if op in ("add", "sub", "mul"):
                pool.append(Value(build.apply(op, a.node, b.node)))
            elif op == "exp_small":
                pool.append(cp.exp(cp.tanh(a)))
            elif op == "square_root":
                pool.append(cp.sqrt(a * a + 1.0))
            else:
                pool.append(Value(build.apply(op, a.node)))
        return pool[-1] + 0.0 * xs[0]

    point = draw(st.lists(st.floats(-2, 2), min_size=2, max_size=3))
    return f, point


@given(composite())
def test_random_composite_graphs(case) -> None:  # type: ignore[no-untyped-def]
    f, point = case
    check(f, point)


def test_gradient_graphs_compile_on_float32() -> None:
    x = cp.value(0.3)
    g = cp.grad(cp.sin(x) * x, x)
    tg = cp.LocalTarget()
    tg.compile(g)
    tg.run()
    want = np.cos(np.float32(0.3)) * np.float32(0.3) + np.sin(np.float32(0.3))
    assert math.isclose(tg.read(g), float(want), rel_tol=1e-6)
