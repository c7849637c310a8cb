"""Reverse-mode gradients against central finite differences in float64."""

from __future__ import annotations

import gc
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph import _sweep, build
from copapy.graph import grad as grad_module
from copapy.graph.errors import NotDifferentiableError
from copapy.graph.grad_rules import RULES, rule_for
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_graph
from copapy.value import Value

from .support.registry_ops import elementwise

F64 = cp.float64


def compile_with_grad(f, n_args: int):  # type: ignore[no-untyped-def]
    xs = [cp.value(0.5, F64) for _ in range(n_args)]
    y = f(*xs)
    grads = cp.grad(y, xs)
    tg = cp.LocalTarget()
    tg.compile(y, *grads)
    return xs, y, grads, tg


def differences(y: Value, xs: list[Value], at: list[float], k: int,
                step: float = 1e-6) -> tuple[float, list[float]]:
    """The central difference of y in the direction of operand k, and the differences that
    judge whether y is smooth there: left and right ones, and the central one of half the
    step."""
    h = step * max(1.0, abs(at[k]))

    def value_at(delta: float) -> float:
        point = list(at)
        point[k] += delta
        env = {x.node: p for x, p in zip(xs, point, strict=True)}
        return float(evaluate_graph([y.node], env)[0])

    below, here, above = value_at(-h), value_at(0.0), value_at(h)
    central = (above - below) / (2 * h)
    half = (value_at(h / 2) - value_at(-h / 2)) / h
    return central, [(here - below) / h, (above - here) / h, central, half]


def smooth(judges: list[float]) -> bool:
    """Differentiable here as far as differences can tell: finite values, one-sided differences
    that agree (a kink or pole makes them differ) and a central difference that does not change
    with the step (a jump makes it grow as the step shrinks)."""
    return (all(math.isfinite(d) for d in judges)
            and abs(judges[0] - judges[1]) <= 1e-3 * max(1.0, abs(judges[0]), abs(judges[1]))
            and abs(judges[2] - judges[3]) <= 1e-3 * max(1.0, abs(judges[2])))


def check(f, point: list[float], step: float = 1e-6,  # type: ignore[no-untyped-def]
          only_smooth: bool = False) -> None:
    """The compiled gradient of f at point against central differences; with only_smooth,
    points where f is not smooth are skipped (hypothesis.assume)."""
    xs, y, grads, tg = compile_with_grad(f, len(point))
    for x, p in zip(xs, point, strict=True):
        tg.write(x, p)
    tg.run()
    for k, g in enumerate(grads):
        got = tg.read(g)
        want, judges = differences(y, xs, point, k, step)
        if only_smooth:
            assume(smooth(judges))
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-6), (k, point, got, want)


#: every differentiable element-wise operation of the registry (zero gradients included)
DIFFERENTIABLE = [n for n in elementwise() if rule_for(n) is not None
                  and REGISTRY[n].arity in (1, 2) and REGISTRY[n].operands in ("num", "float")]
DEFAULT = (-5.0, 5.0)
#: narrower sampling ranges of some operations (where the smooth part is small or the values
#: grow fast); every other operand is sampled on DEFAULT, and points where an operation is not
#: smooth (kinks, jumps, outside its domain) are skipped
DOMAINS: dict[str, tuple[tuple[float, float], ...]] = {
    "abs": ((0.1, 5),), "relu": ((0.1, 5),), "sqrt": ((0.1, 5),), "tan": ((-1.2, 1.2),),
    "asin": ((-0.9, 0.9),), "acos": ((-0.9, 0.9),), "log": ((0.1, 5),), "tanh": ((-3, 3),),
    "div": (DEFAULT, (0.2, 5)), "pow": ((0.2, 3), (-2, 2)), "atan2": ((0.2, 3), (0.2, 3)),
    "mod": ((0.1, 5), (0.7, 2)), "log1p": ((-0.9, 5),),
    # near b = 0 the steps of a // b are closer than the difference step: they look smooth
    "floordiv": (DEFAULT, (0.7, 2)),
}


def test_every_narrower_domain_is_of_a_differentiable_operation() -> None:
    assert set(DOMAINS) <= set(DIFFERENTIABLE)
    assert all(len(d) == REGISTRY[n].arity for n, d in DOMAINS.items())


def test_every_float_operation_has_a_derivative_rule() -> None:
    """A row whose result can be a float needs a rule in graph/grad_rules.py (or is listed
    there as zero almost everywhere); rules name existing rows only."""
    floats = {n for n, s in REGISTRY.items()
              if s.result in ("same", "float32", "float64")
              and s.operands in ("num", "float", "any")}
    assert floats - set(RULES) == set()
    assert set(RULES) <= set(REGISTRY)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@given(st.floats(0, 1), st.floats(0, 1))
def test_gradient(name: str, s: float, t: float) -> None:
    domains = DOMAINS.get(name, (DEFAULT,) * REGISTRY[name].arity)
    point = [lo + u * (hi - lo) for (lo, hi), u in zip(domains, (s, t), strict=False)]
    check(lambda *xs: Value(build.apply(name, *(x.node for x in xs))), point, only_smooth=True)


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


def test_grad_runs_without_the_collector_and_restores_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """cp.grad switches the cyclic GC off while it builds (copapy/_gc.py) and restores the
    caller's setting, also when it raises."""
    seen: list[bool] = []

    def rule_spy(name: str) -> object:
        seen.append(gc.isenabled())
        return rule_for(name)

    monkeypatch.setattr(grad_module, "rule_for", rule_spy)
    x = cp.value(2.0)
    y = cp.sin(x) * x + 1.0  # sin: a rule (the sweep builds + and * itself)
    assert gc.isenabled()
    assert cp.grad(y, x) is not None
    assert seen and not any(seen)  # off while the gradient graph was built
    assert gc.isenabled()
    with pytest.raises(NotDifferentiableError):
        cp.grad(cp.value(1) + 1, x)
    assert gc.isenabled()
    gc.disable()
    try:
        cp.grad(y, x)
        assert not gc.isenabled()
    finally:
        gc.enable()


ARITH_STEPS = ["add", "sub", "mul", "neg", "sin", "const_mul", "const_add", "cast", "square"]


@st.composite
def arith_graph(draw: st.DrawFn) -> tuple[list[Value], Value]:
    """Scalar graphs of mostly +, -, * and negation (the sweep's own path), mixed with a rule
    (sin), constants (folded gradients), casts between float32 and float64 and x * x."""
    dtype = draw(st.sampled_from([cp.float32, F64]))
    xs = [cp.value(float(i) + 0.5, dtype) for i in range(draw(st.integers(1, 4)))]
    pool: list[Value] = list(xs)
    for op, i, j in draw(st.lists(st.tuples(st.sampled_from(ARITH_STEPS), st.integers(0, 99),
                                            st.integers(0, 99)), min_size=1, max_size=30)):
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        if op in ("add", "sub", "mul"):
            b = cp.cast(b, a.dtype)
            pool.append(Value(build.apply(op, a.node, b.node)))
        elif op == "neg":
            pool.append(-a)
        elif op == "sin":
            pool.append(cp.sin(a))
        elif op == "const_mul":
            pool.append(a * 0.75)
        elif op == "const_add":
            pool.append(2.0 + a)
        elif op == "cast":
            pool.append(cp.cast(a, cp.float32 if a.dtype is F64 else F64))
        else:
            pool.append(a * a)
    y = pool[-1]
    for extra in pool[-4:-1]:
        y = y + cp.cast(extra, y.dtype)
    return xs, y


def rules_only_gradients(y: build.Node, xs: list[build.Node]) -> list[build.Node]:
    """The sweep in plain Python with every node's rule (what graph/grad.py did before the
    sweep moved to C and built +, -, * and negation itself)."""
    order = build.live_nodes([y])
    relevant = set(xs)
    for node in order:
        if any(a in relevant for a in node.args):
            relevant.add(node)
    wanted = {n for n in relevant if n.dtype.is_float}
    adjoint = {y: build.const(1.0, y.dtype)}
    for node in reversed(order):
        g = adjoint.get(node)
        rule = rule_for(node.op)
        if g is None or not node.args or rule is None:
            continue
        need = tuple(a in wanted for a in node.args)
        for arg, needed, c in zip(node.args, need, rule(node, g, need), strict=True):
            if c is None or not needed:
                continue
            if c.shape != arg.shape:
                c = build.apply("rsum", c) if not arg.shape else build.broadcast_to(c, arg.shape)
            adjoint[arg] = c if arg not in adjoint else build.apply("add", adjoint[arg], c)
    return [adjoint.get(x, build.const(0.0, x.dtype)) for x in xs]


@given(arith_graph())
def test_the_sweep_builds_the_nodes_of_the_rules(case) -> None:  # type: ignore[no-untyped-def]
    """The C sweep (graph/_sweep.c) builds the gradients of scalar +, -, * and negation itself:
    they must be the very nodes the rules build (nodes are hash-consed, so the same structure
    is the same object), in graphs that mix them with other rules, folded constants, casts,
    x * x and operands used many times."""
    xs, y = case
    fast = cp.grad(y, xs)
    assert [g.node for g in fast] == rules_only_gradients(y.node, [x.node for x in xs])


def test_the_sweep_reports_a_rules_error_and_keeps_the_collector_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An error raised by a rule called back from the C sweep reaches the caller as it is."""
    real = grad_module.rule_for

    def refusing(n: Any, g: Any, need: Any) -> Any:
        raise NotDifferentiableError("this rule refuses")

    monkeypatch.setattr(grad_module, "rule_for",
                        lambda op: refusing if op == "index" else real(op))
    v = cp.value(np.arange(4, dtype=np.float32), packed=True)
    x = cp.value(2.0)
    y = v[1] * x + x * x  # index of a packed array: its rule is called back from C
    with pytest.raises(NotDifferentiableError, match="this rule refuses"):
        cp.grad(y, [v, x])
    assert gc.isenabled()


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 70), data=st.data())
def test_gradient_through_packed_views_matches_the_hand_derivative(
        rows: int, cols: int, data: st.DataObject) -> None:
    """A row broadcast (M + v), rows, columns, elements and slices of packed arrays: their
    gradient is g at the view's place in zeros (it was a NotDifferentiableError that named
    indexing even where the user wrote M + v)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    mv = rng.uniform(-2, 2, (rows, cols)).astype(np.float32)
    vv = rng.uniform(-2, 2, cols).astype(np.float32)
    m, v = cp.value(mv, packed=True), cp.value(vv, packed=True)
    r, c = data.draw(st.integers(0, rows - 1)), data.draw(st.integers(0, cols - 1))
    lo = data.draw(st.integers(0, cols - 1))
    hi = data.draw(st.integers(lo + 1, cols))
    y = (cp.sin(m + v).sum() + v[c] * 2.0 + (v[lo:hi] * v[lo:hi]).sum() + m[r].sum() * 3.0
         + m[:, c].sum() * 5.0 + m.reshape(-1)[0] * 7.0)
    gm, gv = cp.grad(y, [m, v])
    tg = cp.LocalTarget()
    tg.compile(gm, gv)
    tg.run()
    cos = np.cos(mv.astype(np.float64) + vv)
    want_m = cos.copy()
    want_m[r] += 3.0
    want_m[:, c] += 5.0
    want_m[0, 0] += 7.0
    want_v = cos.sum(axis=0)
    want_v[c] += 2.0
    want_v[lo:hi] += 2.0 * vv[lo:hi]
    assert np.allclose(tg.read(gm), want_m, rtol=1e-5, atol=1e-5)
    assert np.allclose(tg.read(gv), want_v, rtol=1e-5, atol=1e-4)


def test_the_c_sweep_refuses_wrong_arguments() -> None:
    with pytest.raises(TypeError, match="float_dependents"):
        _sweep.float_dependents((), [])
    with pytest.raises(TypeError, match="specs: tuple of 4"):
        _sweep.sweep([], {}, set(), build.make, (), lambda n, g: None)
    x = cp.value(1.0)
    with pytest.raises(TypeError, match=r"node\.args must be a tuple"):
        _sweep.float_dependents([type("NotANode", (), {"args": [x.node]})()], [x.node])
