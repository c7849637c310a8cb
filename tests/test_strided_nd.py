"""Strided slices of N-D packed arrays (issue 31, item 1, the rest): ints and slices of any
step in any axes are one view, one 1-D strided copy (``sgather``) or one level gather
(``ngather``, up to three levels; four in two passes), whatever the size; gradients through
the adjoint ``nscatter``. Executed natively against NumPy bit for bit; the other
architectures: tests/test_index_cross_arch.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arrays import array_input
from copapy.compiler import compile_program
from copapy.graph import build, levels
from copapy.graph.ops import REGISTRY

from .test_strided import build_closure, cp_load, names_in, read, same_bits, values

DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32}


def shaped(shape: tuple[int, ...], dtype: str, seed: int = 0) -> Any:
    return values(math.prod(shape), dtype, seed).reshape(shape)


@st.composite
def shape_and_key(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=2, max_size=4)))
    keys: list[Any] = []
    for dim in shape[:draw(st.integers(1, len(shape)))]:
        if draw(st.booleans()) or not keys:
            step = draw(st.integers(-4, 4).filter(lambda s: s != 0))
            start = draw(st.none() | st.integers(-dim, dim))
            stop = draw(st.none() | st.integers(-dim - 1, dim + 1))
            keys.append(slice(start, stop, step))
        else:
            keys.append(draw(st.integers(-dim, dim - 1)))
    return shape, tuple(keys)


def is_empty(shape: tuple[int, ...], key: tuple[Any, ...]) -> bool:
    return any(isinstance(k, slice) and not len(range(*k.indices(d)))
               for k, d in zip(key, shape, strict=False))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=shape_and_key(), dtype=st.sampled_from(sorted(DTYPES)))
def test_nd_slices_equal_numpy_under_jit(case: tuple[tuple[int, ...], tuple[Any, ...]],
                                         dtype: str) -> None:
    shape, key = case
    x = shaped(shape, dtype)
    if is_empty(shape, key):
        with pytest.raises(IndexError, match="empty slice"):
            cp.jit(lambda a: a[key])(x)
        return
    assert same_bits(cp.jit(lambda a: a[key])(x), x[key])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=shape_and_key(), dtype=st.sampled_from(sorted(DTYPES)))
def test_nd_slices_in_a_compiled_program(case: tuple[tuple[int, ...], tuple[Any, ...]],
                                         dtype: str) -> None:
    """The same through compile_program and the verifying loader, an expression on top."""
    shape, key = case
    if is_empty(shape, key):
        return
    data = shaped(shape, dtype, 1)
    x = array_input(data, packed=True, dtype=dtype)
    y = x[key]
    out = (y * 2 if dtype == "int32" else y * 2.0).node()
    view = y.node()
    compiled = compile_program([out, view], "x86_64")
    prog = cp_load(compiled)
    prog.run(0)
    with np.errstate(all="ignore"):
        want = data[key] * (2 if dtype == "int32" else 2.0)
    assert same_bits(read(prog, compiled.ports[out]), np.ravel(want).astype(data.dtype))
    assert same_bits(read(prog, compiled.ports[view]), np.ravel(data[key]))


@pytest.mark.parametrize("fn", [lambda m: m[::2], lambda m: m[:, ::2], lambda m: m[::-1, 1::3],
                                lambda m: m[1:5, ::2], lambda m: m[:, 3],
                                lambda m: m[2:9, 1:4] + m[::-1, ::-1][2:9, 1:4]])
def test_the_issue_cases(fn: Any) -> None:
    m = shaped((11, 13), "float32", 2)
    assert same_bits(cp.jit(fn)(m), fn(m))


def ops_of(a: Any) -> list[str]:
    return [node.op for node in build_closure([a.node()])]


@pytest.mark.parametrize("side", [10, 100, 1000])
def test_node_and_stencil_counts_do_not_grow_with_the_size(side: int) -> None:
    m = array_input(np.zeros((side, side), np.float32), packed=True)
    cases = [m[::2], m[:, ::2], m[::-1, 1::3], m[1:5, ::2], m[::-1, ::-1]]
    for case in cases:
        ops = ops_of(case)
        assert len(ops) <= 4 and "stack" not in ops and "index" not in ops, ops
    used = names_in(compile_program([c.node() for c in cases], "x86_64"))
    # m[:, ::2] of an even side and m[::-1, ::-1] merge into one level: sgather
    assert sum(name.startswith(("ngather_", "sgather_")) for name in used) == 5
    assert sum(name.startswith("ngather_") for name in used) == 2
    assert len(used) < 20
    t = array_input(np.zeros((4, 5, 6, 8 * side // 10), np.float32), packed=True)
    ops = ops_of(t[:, ::2, ::2, ::-1])  # four levels: two passes
    assert ops.count("ngather") == 2 and len(ops) <= 5, ops


def test_levels_merge_and_contiguous_blocks_stay_views() -> None:
    m = array_input(np.zeros((6, 8), np.float32), packed=True)
    assert m[2:4].node().op == "reshape" and m[2:4].node().args[0].op == "slice"
    assert m[3, 2:7].node().op == "slice"
    assert m[:, 5].node().op == "sgather"
    assert m[::2, :].node().args[0].op == "ngather"
    assert levels.merged([(3, 16), (2, 8), (8, 1), (1, 5)]) == [(48, 1)]
    assert levels.merged([(3, -8), (4, 2)]) == [(3, -8), (4, 2)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_through_nd_slices_match_finite_differences(dtype: str) -> None:
    shape = (5, 7, 3)
    rng = np.random.default_rng(4)
    x0 = rng.uniform(0.5, 2.0, shape).astype(DTYPES[dtype])

    def f(v: Any) -> Any:
        return ((v[::2, ::-3] * v[1::2, 1::3][:, :, ::-1].sum()).sum() + (v[:, 2] ** 2).sum()
                + (cp.sin(v[::-1, 1:6:2, ::2]) * v[:, 1:6:2, ::2]).sum())

    def f_np(v: Any) -> float:
        return float((v[::2, ::-3] * v[1::2, 1::3][:, :, ::-1].sum()).sum()
                     + (v[:, 2] ** 2).sum()
                     + (np.sin(v[::-1, 1:6:2, ::2]) * v[:, 1:6:2, ::2]).sum())

    grad = np.asarray(cp.jit(lambda v: cp.grad(f(v), v))(x0), np.float64)
    x64 = x0.astype(np.float64)
    h = 1e-6
    fd = np.array([(f_np(x64 + h * e.reshape(shape)) - f_np(x64 - h * e.reshape(shape)))
                   / (2 * h) for e in np.eye(x0.size)]).reshape(shape)
    tol = 2e-3 if dtype == "float32" else 1e-7
    np.testing.assert_allclose(grad, fd, rtol=tol, atol=tol)


def test_the_adjoint_is_one_nscatter_and_its_adjoint_an_ngather() -> None:
    m = array_input(np.zeros((50, 40), np.float32), packed=True)
    g = cp.grad((m[::-3, 1::2] * m[::-3, 1::2]).sum(), m)
    ops = ops_of(g)
    assert ops.count("nscatter") == 1 and "stack" not in ops
    from copapy.graph.grad_rules import RULES

    y = m[::-3, 1::2].node().args[0]  # the ngather (the result is its reshape)
    back = RULES["ngather"](y, y, (True,))[0]
    assert back is not None and back.op in ("nscatter", "reshape")
    again = RULES["nscatter"](build.reshape(back, (back.size,)), y, (True,))[0]
    assert again is not None and again.op == "ngather" and again.attr == y.attr


def test_the_stencil_moves_nothing_for_levels_outside_its_block() -> None:
    """Verified loading: the steps and the inner count are writable slots, so the stencil
    checks the span against the block itself; levels the compiler would never emit (built
    here past levels.gather's check) leave the result untouched."""
    x = array_input(np.arange(1, 61, dtype=np.float32), packed=True).node()
    good = build.make(REGISTRY["ngather"], (x,), ((3, 4), (20, 2), 12))
    bad = [build.make(REGISTRY["ngather"], (x,), attr) for attr in
           (((3, 4), (27, 2), 12), ((4, 4), (-20, 2), 16), ((2, 2, 2), (30, 15, 15), 8))]
    compiled = compile_program([good, *bad], "x86_64")
    prog = cp_load(compiled)
    prog.run(0)
    got = [read(prog, compiled.ports[o]) for o in (good, *bad)]
    assert same_bits(got[0], np.arange(1, 61, dtype=np.float32).reshape(3, 20)[:, 0:8:2].ravel())
    for out in got[1:]:
        assert not out.any()


def test_out_of_range_levels_are_refused_naming_them() -> None:
    x = array_input(np.zeros(100, np.float32), packed=True).node()
    with pytest.raises(IndexError, match="out of range"):
        levels.gather(x, 9, [(10, 10), (2, 1)])
    with pytest.raises(IndexError, match="out of range"):
        levels.gather(x, 5, [(10, -10), (2, 1)])
    m = array_input(np.zeros((4, 5), np.float32), packed=True)
    with pytest.raises(IndexError, match="3 indices for an array of 2 dimensions"):
        m[1:2, ::2, 0]
    with pytest.raises(IndexError, match="out of range"):
        m[7, ::2]


def test_a_traced_index_beside_a_slice_is_refused_naming_the_fix() -> None:
    m = array_input(np.zeros((4, 5), np.float32), packed=True)
    with pytest.raises(TypeError, match=r"a traced index .* depend on run-time values"):
        m[::2, cp.value(1)]
    with pytest.raises(TypeError, match="a bool is not an index"):
        m[True, ::2]
