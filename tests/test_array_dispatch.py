"""Scalars and arrays mix in every entry point: Value operators, cp.pow, cp.logical_*,
cp.min/max/where, with vectors packed or unpacked, compared with NumPy (float32)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph.lanes import np_compare
from copapy.graph.reference import evaluate_graph

from .support.checks import examples

F32 = np.float32
element = st.floats(-100, 100, width=32) | st.sampled_from([0.0, -0.0, 1.0, 2.0, 3.0, -1.5])
vectors = st.lists(element, min_size=1, max_size=24)

def _exact(ufunc: str) -> Callable[[Any, Any], Any]:
    compare = np_compare(ufunc)
    return lambda x, y: compare(np, x, y)


EXACT: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "add": (operator.add, np.add),
    "sub": (operator.sub, np.subtract),
    "mul": (operator.mul, np.multiply),
    "div": (operator.truediv, np.divide),
    # comparisons on exact (float64) operands: NumPy 1.24's float32 loops on armv7 run on NEON,
    # which flushes subnormals (np.equal(0, 5.9e-39) is True there from 16 elements on)
    "lt": (operator.lt, _exact("less")),
    "le": (operator.le, _exact("less_equal")),
    "gt": (operator.gt, _exact("greater")),
    "ge": (operator.ge, _exact("greater_equal")),
    "eq": (operator.eq, _exact("equal")),
    "ne": (operator.ne, _exact("not_equal")),
    "min": (cp.min, np.minimum),
    "max": (cp.max, np.maximum),
}


def run(out: Any) -> Any:
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.run()
    return tg.read(out)


def vector_input(xs: list[float], packed: bool) -> cp.Array:
    return cp.value(np.array(xs, F32), packed=packed)


def assert_same(got: Any, want: Any) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
    np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("name", sorted(EXACT))
@settings(max_examples=examples(12), deadline=None)
@given(xs=vectors, s0=element)
def test_scalar_value_with_vector(name: str, packed: bool, xs: list[float], s0: float) -> None:
    op, np_op = EXACT[name]
    s, v = cp.value(s0), vector_input(xs, packed)
    x = np.array(xs, F32)
    with np.errstate(all="ignore"):
        left, right = np_op(F32(s0), x), np_op(x, F32(s0))
    out_left, out_right = op(s, v), op(v, s)
    assert isinstance(out_left, cp.Array) and isinstance(out_right, cp.Array)
    assert out_left.packed == packed and out_right.packed == packed
    assert_same(run(out_left), left)
    assert_same(run(out_right), right)


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(12), deadline=None)
@given(xs=vectors, s0=element)
def test_python_and_numpy_operands_with_value(packed: bool, xs: list[float], s0: float) -> None:
    s = cp.value(s0)
    x = np.array(xs, F32)
    with np.errstate(all="ignore"):
        assert_same(run(s + x), F32(s0) + x)  # NumPy array on the right of a Value
        assert_same(run(x - s), x - F32(s0))  # NumPy array on the left
        assert_same(run(s * xs), F32(s0) * x)  # a list of floats: a float32 vector
        assert_same(run(2.5 - vector_input(xs, packed)), F32(2.5) - x)


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(12), deadline=None)
@given(xs=st.lists(st.floats(0.0625, 20, width=32), min_size=1, max_size=24),
       e0=st.floats(-3, 3, width=32))
def test_pow_with_arrays(packed: bool, xs: list[float], e0: float) -> None:
    x = np.array(xs, F32)
    v = vector_input(xs, packed)
    assert_same(run(cp.pow(v, 2.0)), x * x)  # x**2 is x*x exactly
    e = cp.value(e0)
    for out, want in [(cp.pow(v, e), np.power(x, F32(e0))), (cp.pow(e, v), np.power(F32(e0), x)),
                      (v ** e, np.power(x, F32(e0))), (e ** v, np.power(F32(e0), x))]:
        assert isinstance(out, cp.Array) and out.packed == packed
        got = run(out)
        # the kernels are bit-exact with the graph reference, and close to NumPy
        assert_same(got, np.asarray(evaluate_graph(out.nodes())).reshape(out.shape)
                    if not packed else evaluate_graph(out.nodes())[0])
        np.testing.assert_allclose(got, want, rtol=4e-6)


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(12), deadline=None)
@given(xs=vectors, ys=vectors)
def test_logical_functions_on_arrays(packed: bool, xs: list[float], ys: list[float]) -> None:
    n = min(len(xs), len(ys))
    x, y = np.array(xs[:n], F32), np.array(ys[:n], F32)
    v, w = vector_input(xs[:n], packed), vector_input(ys[:n], packed)
    a, b = (x > 1) , (y < 3)
    assert_same(run(cp.logical_and(v > 1.0, w < 3.0)), a & b)
    assert_same(run(cp.logical_or(v > 1.0, w < 3.0)), a | b)
    assert_same(run(cp.logical_xor(v > 1.0, w < 3.0)), a ^ b)
    assert_same(run(cp.logical_not(v > 1.0)), ~a)
    assert_same(run(cp.logical_and(v, True)), x != 0)  # numbers become bool first
    assert_same(run(cp.logical_or(cp.value(False), w < 3.0)), b)


def test_scalars_still_give_values() -> None:
    s = cp.value(2.0)
    for out in (s + 1.0, cp.pow(s, 3.0), cp.logical_and(s > 1.0, s < 3.0), cp.logical_not(s)):
        assert isinstance(out, cp.Value)
    assert run(cp.pow(s, 3.0)) == 8.0
    assert run(cp.logical_and(s > 1.0, s < 3.0)) is True
    with pytest.raises(TypeError, match="unsupported operand str"):
        s + "a"  # type: ignore[operator]


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(12), deadline=None)
@given(xs=vectors, lo=element, hi=element)
def test_numpy_where_and_clip_are_copapys(xs: list[float], lo: float, hi: float,
                                           packed: bool) -> None:
    """np.where and np.clip on traced vectors and values compute cp.where and cp.clamp (they
    asked each element for its truth value: "the truth value of a traced copapy value")."""
    a = np.array(xs, F32)
    v = vector_input(xs, packed)
    x = cp.value(float(a[0]))
    assert_same(run(np.where(v > lo, v, hi)), np.where(a > F32(lo), a, F32(hi)))
    assert_same(run(np.clip(v, lo, hi)), np.clip(a, F32(lo), F32(hi)))
    assert_same(run(np.clip(v, a_min=lo, a_max=hi)), np.clip(a, F32(lo), F32(hi)))
    assert run(np.where(x > lo, x, hi)) == np.where(a[0] > F32(lo), a[0], F32(hi))
    assert run(np.clip(x, lo, hi)) == np.clip(a[0], F32(lo), F32(hi))
    assert_same(run(np.clip(v, lo, None)), np.clip(a, F32(lo), None))
    assert_same(run(np.clip(v, None, hi)), np.clip(a, None, F32(hi)))
    assert run(np.sum(v)) == run(v.sum())  # other NumPy functions run as before
    with pytest.raises(TypeError, match=r"cp\.clamp"):
        np.clip(v, None, None)


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(12), deadline=None)
@given(xs=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=12), data=st.data())
def test_numpy_constants_beside_float64_values_keep_float64(xs: list[float], packed: bool,
                                                             data: st.DataObject) -> None:
    """A NumPy float64 array (or list of floats) beside float64 values is float64, weak as a
    Python float is: d + np.array([0.1]) rounded 0.1 to float32 first, and d == that array was
    False for d = 0.1."""
    a = np.array(xs)
    c = np.array(data.draw(st.lists(st.floats(-1e3, 1e3), min_size=len(xs), max_size=len(xs))))
    d = cp.value(a, cp.float64, packed=packed)
    m = np.outer(c[:2], c)  # (2, n) @ (n,)
    outs = [d + c, c * d, d - c.tolist(), d == a.copy(), cp.where(d > 0, c, d), m @ d,
            cp.dot(c, d), cp.max(d, c), cp.cross(d[:3], c[:3]) if len(xs) >= 3 else d]
    wants = [a + c, c * a, a - c, a == a, np.where(a > 0, c, a), m @ a, np.dot(c, a),
             np.maximum(a, c), np.cross(a[:3], c[:3]) if len(xs) >= 3 else a]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    for out, want in zip(outs, wants, strict=True):
        got = np.asarray(tg.read(out))
        if out.dtype is cp.bool_:
            assert np.array_equal(got, want)
        else:
            assert out.dtype is cp.float64
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-3)


SPECIAL = st.floats(width=32) | st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38])


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(12), deadline=None)
@given(xs=st.lists(SPECIAL, min_size=1, max_size=12), ints=st.lists(
    st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=5))
def test_numpy_isnan_isinf_isfinite_square(xs: list[float], ints: list[int],
                                           packed: bool) -> None:
    """np.isnan / isinf / isfinite / square of traced values are NumPy's (they raised "cannot
    compute on traced copapy values")."""
    a, i = np.array(xs, F32), np.array(ints, np.int32)
    v, w = vector_input(xs, packed), cp.value(i, packed=packed)
    x = cp.value(float(a[0]))
    funcs = (np.isnan, np.isinf, np.isfinite, np.square)
    outs = [f(t) for t in (v, w, x) for f in funcs]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    with np.errstate(all="ignore"):
        wants = [f(t) for t in (a, i, a[0]) for f in funcs]
    for out, want in zip(outs, wants, strict=True):
        assert np.array_equal(tg.read(out), want, equal_nan=True), (out, want)


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(12), deadline=None)
@given(xs=st.lists(st.floats(-100, 100, width=32), min_size=2, max_size=24),
       ddof=st.integers(0, 1))
def test_numpy_var_and_std_of_arrays(xs: list[float], ddof: int, packed: bool) -> None:
    """np.var / np.std of a traced array are NumPy's (AttributeError: 'DType' object has no
    attribute 'type')."""
    a = np.array(xs, F32)
    v = vector_input(xs, packed)
    outs = [np.var(v, ddof=ddof), np.std(v, ddof=ddof), np.var(v, axis=0)]  # axis= computes
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    for out, want in zip(outs, [a.var(ddof=ddof), a.std(ddof=ddof), a.var(axis=0)], strict=True):
        assert math.isclose(tg.read(out), float(want), rel_tol=1e-4, abs_tol=1e-3)
    with pytest.raises(TypeError, match="takes axis=, ddof="):
        np.var(v, dtype=np.float64)
