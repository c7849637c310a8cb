"""Random cp.fori_loop bodies against an independent reference (docs/decisions/
2026-12-05-range-fuzz.md): the same body compiled alone as one step, run n times from Python
with its results written back as its inputs, must give the loop's bits (float32, float64 and
int32 scalars, packed and unpacked vectors, the iteration number, captures); cp.grad through
random smooth float64 loops must match central differences of the compiled loop."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp

#: LOOP_FUZZ_EXAMPLES=2000 for a long local hunt
EXAMPLES = int(os.environ.get("LOOP_FUZZ_EXAMPLES", "40"))
TYPES = {"f32": cp.float32, "f64": cp.float64, "i32": cp.int32}

#: an expression over the state (("s", k)), the captures (("c", k)) and constants
Expr = tuple[Any, ...]


def expression(n_state: int, n_captures: int, smooth: bool) -> st.SearchStrategy[Expr]:
    leaves = [st.tuples(st.just("s"), st.integers(0, n_state - 1)),
              st.tuples(st.just("k"), st.sampled_from([0.5, -1.25, 3.0, 0.1, 2.0]))]
    if n_captures:
        leaves.append(st.tuples(st.just("c"), st.integers(0, n_captures - 1)))
    unary = ["sin", "tanh", "neg", "sq"] + ([] if smooth else ["floor", "abs", "sqrtabs"])
    binary = ["add", "sub", "mul", "div"] + ([] if smooth else ["min", "max", "mod", "atan2"])

    def extend(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        out = [st.tuples(st.just("un"), st.sampled_from(unary), inner),
               st.tuples(st.just("bin"), st.sampled_from(binary), inner, inner)]
        if not smooth:
            out.append(st.tuples(st.just("where"), inner, inner, inner, inner))
        return st.one_of(out)
    return st.recursive(st.one_of(leaves), extend, max_leaves=6)


def _scalar(x: Any, dtype: Any) -> Any:
    if isinstance(x, cp.Array):
        x = x.sum()
    return x if x.dtype is dtype else cp.cast(x, dtype)


def evaluate(e: Expr, state: Any, captures: list[Any], dtype: Any, vector: bool) -> Any:
    """The expression in ``dtype`` (a vector state element stays a vector if ``vector``)."""
    tag = e[0]
    if tag == "s":
        x = state[e[1]]
        return x if vector and isinstance(x, cp.Array) else _scalar(x, dtype)
    if tag == "c":
        return _scalar(captures[e[1]], dtype)
    if tag == "k":
        return cp.constant(e[1], dtype)
    args = [evaluate(a, state, captures, dtype, vector) for a in e[2:]] if tag != "where" else \
        [evaluate(a, state, captures, dtype, vector) for a in e[1:]]
    if tag == "where":
        a, b, c, d = args
        return cp.where(a < b, c, d)
    ops: dict[str, Callable[..., Any]] = {
        "sin": cp.sin, "tanh": cp.tanh, "neg": lambda a: -a, "sq": lambda a: a * a * 0.5,
        "floor": cp.floor, "abs": cp.abs, "sqrtabs": lambda a: cp.sqrt(cp.abs(a)),
        "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "div": lambda a, b: a / (b * b + 0.5), "min": cp.min, "max": cp.max,
        "mod": lambda a, b: a % (cp.abs(b) + 1.0), "atan2": cp.atan2}
    return ops[e[1]](*args)


def make_body(kinds: list[str], exprs: list[Expr], captures: list[Any],
              index: bool) -> Callable[..., Any]:
    def body(*args: Any) -> Any:
        i, state = args if index else (None, args[0])
        out = []
        for k, (kind, e) in enumerate(zip(kinds, exprs, strict=True)):
            vector = kind in ("vp", "vu")
            dtype = TYPES.get(kind, cp.float32)
            v = evaluate(e, state, captures, dtype if dtype.is_float else cp.float32, vector)
            if i is not None:
                v = v + cp.cast(i, cp.float32 if vector else v.dtype) * 0.25
            if vector:
                if not isinstance(v, cp.Array):
                    v = state[k] * 0.5 + v
                out.append(v.to_packed() if kind == "vp" else v.to_unpacked())
            elif kind == "i32":  # wraps: int32 arithmetic on a saturating conversion
                out.append(cp.cast(v, cp.int32) * 65537 + (state[k] ^ 12345) + (state[k] >> 3))
            else:
                out.append(v)
        return tuple(out)
    return body


def _input(kind: str, value: Any) -> Any:
    if kind in ("vp", "vu"):
        return cp.value(np.asarray(value, np.float32), packed=kind == "vp")
    return cp.value(value, TYPES[kind])


def _read(tg: cp.LocalTarget, x: Any) -> Any:
    if not isinstance(x, cp.Array) and x.node.op == "const":  # the body made a constant
        return x.node.dtype.unpack(x.node.attr)
    return np.asarray(tg.read(x)) if isinstance(x, cp.Array) else tg.read(x)


def _bits(x: Any, kind: str) -> bytes:
    t = {"f32": np.float32, "f64": np.float64, "i32": np.int32}.get(kind, np.float32)
    a = np.atleast_1d(np.asarray(x, t))
    if kind == "i32":
        return a.tobytes()
    return np.where(a != a, t(np.nan), a).tobytes()  # (any NaN: its payload is the CPU's)


@st.composite
def loop_case(draw: st.DrawFn) -> dict[str, Any]:
    kinds = draw(st.lists(st.sampled_from(["f32", "f32", "f64", "i32", "vp", "vu"]),
                          min_size=1, max_size=3))
    n_captures = draw(st.integers(0, 2))
    length = draw(st.sampled_from([1, 3, 8, 9]))
    inits = []
    for kind in kinds:
        if kind == "i32":
            inits.append(draw(st.sampled_from([0, 1, -7, 123456, 2**31 - 1])))
        elif kind in ("vp", "vu"):
            inits.append([draw(st.floats(-2, 2, width=32)) for _ in range(length)])
        else:
            inits.append(draw(st.sampled_from([0.0, -0.0, 1.0, 0.3, -2.5, 1e-30])))
    return {"kinds": kinds, "inits": inits,
            "captures": [draw(st.floats(-2, 2, width=32)) for _ in range(n_captures)],
            "exprs": [draw(expression(len(kinds), n_captures, False)) for _ in kinds],
            "n": draw(st.sampled_from([0, 1, 2, 3, 5, 13])), "index": draw(st.booleans())}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=loop_case())
def test_a_random_loop_gives_the_bits_of_its_body_run_n_times(case: dict[str, Any]) -> None:
    kinds, inits, n = case["kinds"], case["inits"], case["n"]
    captures = [cp.value(c) for c in case["captures"]]
    body = make_body(kinds, case["exprs"], captures, case["index"])
    state = tuple(_input(k, v) for k, v in zip(kinds, inits, strict=True))
    results = cp.fori_loop(n, body, state, index=case["index"])
    tg = cp.LocalTarget()
    tg.compile(*results)
    tg.run()
    got = [_read(tg, x) for x in results]
    # the reference: one iteration compiled on its own, iterated here
    captures2 = [cp.value(c) for c in case["captures"]]
    inputs = tuple(_input(k, v) for k, v in zip(kinds, inits, strict=True))
    i = cp.value(0)
    step = make_body(kinds, case["exprs"], captures2, case["index"])(
        *((i, inputs) if case["index"] else (inputs,)))
    one = cp.LocalTarget()
    one.compile(*step)
    current = list(inits)
    for k in range(n):
        for x, v in zip(inputs, current, strict=True):
            try:
                one.write(x, v)
            except cp.TargetError:  # an input the step does not read
                pass
        if case["index"]:
            try:
                one.write(i, k)
            except cp.TargetError:
                pass
        one.run()
        current = [_read(one, x) for x in step]
    for k, kind in enumerate(kinds):
        assert _bits(got[k], kind) == _bits(current[k], kind), (k, kind, got[k], current[k])


def test_a_gradient_through_a_loop_whose_output_skips_an_array_state_element() -> None:
    """An output element that does not depend on an array operand of the loop (here x, not
    v) has the scalar 0 as its derivative with respect to it; the tangent table took it for
    one element, not one per element, and cp.grad failed with an IndexError. The gradient is
    the hand recurrence's: x3 = a^3 x0, v3 = v0/8 + x0 (1/4 + a/2 + a^2)."""
    a, x0 = cp.value(0.9, cp.float64), cp.value(1.0, cp.float64)
    for packed in (True, False):
        v0 = cp.vector([cp.value(0.5, cp.float64), cp.value(-1.0, cp.float64)], packed=packed)
        x, v = cp.fori_loop(3, lambda s: (s[0] * a, s[1] * 0.5 + s[0]), (x0, v0))
        grads = cp.grad(x + v.sum(), [a, x0, v0])
        tg = cp.LocalTarget()
        tg.compile(*grads)
        tg.run()
        da, dx0, dv0 = (np.asarray(tg.read(g)) for g in grads)
        assert math.isclose(float(da), 3 * 0.81 + 2 * (0.5 + 2 * 0.9), rel_tol=1e-12)
        assert math.isclose(float(dx0), 0.729 + 2 * (0.25 + 0.45 + 0.81), rel_tol=1e-12)
        assert np.allclose(dv0, [0.125, 0.125], rtol=1e-12)


@st.composite
def smooth_case(draw: st.DrawFn) -> dict[str, Any]:
    m = draw(st.integers(1, 3))
    n_captures = draw(st.integers(0, 2))
    return {"m": m, "captures": n_captures, "n": draw(st.sampled_from([0, 1, 2, 3, 6])),
            "vector": draw(st.sampled_from([None, 1, 3])), "packed": draw(st.booleans()),
            "index": draw(st.booleans()),
            "exprs": [draw(expression(m + 1, n_captures, True)) for _ in range(m)],
            "point": draw(st.lists(st.floats(-1.5, 1.5), min_size=m + n_captures + 3,
                                   max_size=m + n_captures + 3))}


def _smooth_program(case: dict[str, Any]) -> tuple[Any, list[Any]]:
    m, nc, vec = case["m"], case["captures"], case["vector"]
    params = [cp.value(v, cp.float64) for v in case["point"][:m + nc + (vec or 0)]]
    captures = params[m:m + nc]
    state: list[Any] = list(params[:m])
    if vec:
        state.append(cp.vector(params[m + nc:], packed=case["packed"]))
    else:
        state.append(cp.constant(0.25, cp.float64))  # (the expressions may read s[m])

    def body(*args: Any) -> Any:
        i, s = args if case["index"] else (None, args[0])
        out = [evaluate(e, s, captures, cp.float64, False) for e in case["exprs"]]
        if i is not None:
            out = [o * (1.0 + cp.cast(i, cp.float64) * 0.01) for o in out]
        if vec:
            w = s[m] * 0.9 + cp.sin(s[m]) * out[0] * 0.1
            out.append(w.to_packed() if case["packed"] else w.to_unpacked())
        else:
            out.append(s[m])
        return tuple(out)
    results = cp.fori_loop(case["n"], body, tuple(state), index=case["index"])
    loss = results[0] * 1.0
    for k, x in enumerate(results[1:]):
        loss = loss + (x.sum() if isinstance(x, cp.Array) else x) * (0.5 + k)
    return loss, params


@settings(max_examples=max(EXAMPLES * 2 // 3, 1), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(case=smooth_case())
def test_gradients_through_random_loops_match_central_differences(case: dict[str, Any]
                                                                   ) -> None:
    loss, params = _smooth_program(case)
    grads = cp.grad(loss, params)
    tg = cp.LocalTarget()
    tg.compile(loss, *grads)
    tg.run()
    got = [tg.read(g) for g in grads]
    if not math.isfinite(tg.read(loss)):
        return
    point = [float(tg.read(p)) for p in params]
    h = 1e-6
    for k, p in enumerate(params):
        sides = []
        for step in (h, -h):
            tg.write(p, point[k] + step)
            tg.run()
            sides.append(tg.read(loss))
        tg.write(p, point[k])
        fd = (sides[0] - sides[1]) / (2 * h)
        assert abs(got[k] - fd) <= 2e-5 * max(1.0, abs(fd)), (k, got[k], fd)


def test_a_count_from_an_input_is_refused_naming_the_where_form_which_works() -> None:
    """The count is fixed in the program; a count read at run time (a cp.value, or an int
    argument of a @cp.jit function, traced as an input) is refused with the form that does
    it: the largest count, the state kept where the iteration number is past the count."""
    with pytest.raises(TypeError, match=r"jit.*cp\.where\(i < n"):
        cp.fori_loop(cp.value(3), lambda s: s + 1.0, 0.0)
    f = cp.jit(lambda n, x: cp.fori_loop(n, lambda s: s * 0.5 + 1.0, x))
    with pytest.raises(TypeError, match=r"argument of a @cp\.jit function"):
        f(3, np.float32(1.0))
    count, x0 = cp.value(0), cp.value(1.0)
    a = cp.value(0.9)
    y = cp.fori_loop(8, lambda i, s: cp.where(i < count, a * s + 1.0, s), x0, index=True)
    tg = cp.LocalTarget()
    tg.compile(y)
    for k in (0, 1, 5, 8, 100):
        want = np.float32(1.0)
        for _ in range(min(k, 8)):
            want = np.float32(0.9) * want + np.float32(1.0)
        tg.write(count, k)
        tg.run()
        assert np.float32(tg.read(y)).tobytes() == want.tobytes(), (k, tg.read(y), want)
