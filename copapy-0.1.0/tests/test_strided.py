"""Strided, reversed and stepped slices of packed arrays (issue 31, item 1): one strided copy
stencil (``sgather``) per slice whatever its length, its adjoint (``sscatter``) for gradients;
executed natively (x86_64 and its variants) against NumPy bit for bit. The other
architectures: tests/test_strided_cross_arch.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arrays import array_input
from copapy.compiler import compile_program
from copapy.graph import build
from copapy.graph.node import Node
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_graph

DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32}


def values(n: int, dtype: str, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(DTYPES[dtype])
    x[rng.random(n) < 0.05] = np.nan  # a NaN's bits must survive the move
    return x


def same_bits(got: Any, want: Any) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


slices = st.tuples(st.none() | st.integers(-300, 300), st.none() | st.integers(-300, 300),
                   st.none() | st.integers(-7, 7).filter(lambda s: s != 0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(65, 300), key=slices, dtype=st.sampled_from(sorted(DTYPES)))
def test_a_slice_of_any_step_equals_numpy(n: int, key: tuple[int | None, ...],
                                          dtype: str) -> None:
    x = values(n, dtype)
    s = slice(*key)
    if len(range(*s.indices(n))) == 0:
        with pytest.raises(IndexError, match="empty slice"):
            cp.jit(lambda a: a[s])(x)
        return
    got = cp.jit(lambda a: a[s])(x)
    assert same_bits(got, x[s])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(65, 400), a=slices, b=slices, dtype=st.sampled_from(sorted(DTYPES)))
def test_strided_slices_in_element_wise_expressions(n: int, a: tuple[int | None, ...],
                                                    b: tuple[int | None, ...],
                                                    dtype: str) -> None:
    """Two slices of one argument of the same length combined, as x[::2] + x[1::2]."""
    x = values(n, dtype, 1)
    sa, sb = slice(*a), slice(*b)
    la, lb = len(range(*sa.indices(n))), len(range(*sb.indices(n)))
    if not la or not lb:
        return
    k = min(la, lb)
    with np.errstate(all="ignore"):
        want = x[sa][:k] * x[sb][:k] + x[sa][:k]
    got = cp.jit(lambda v: v[sa][:k] * v[sb][:k] + v[sa][:k])(x)
    assert same_bits(got, want)


@pytest.mark.parametrize("fn", [lambda x: x[::2] + x[1::2], lambda x: x[::-1] * 2.0,
                                lambda x: x[1::3], lambda x: x[-2:3:-5] - x[4:-1:5][::-1]])
def test_the_benchmark_cases_and_a_view_of_a_view(fn: Any) -> None:
    x = values(1000, "float32", 2)
    assert same_bits(cp.jit(fn)(x), fn(x))


def names_in(compiled: Any) -> list[str]:
    from copapy import image as im
    from copapy.compiler.manifest import decode
    from copapy.compiler.runner_table import runner_table

    img = im.parse(compiled.image)
    ids = {i: name for name, i in runner_table("x86_64").ids.items()}
    return [ids[sid] for chain in decode(img.blocks) for sid, _ in chain]


@pytest.mark.parametrize("n", [100, 10_000, 1_000_000])
def test_one_stencil_per_slice_whatever_the_length(n: int) -> None:
    x = array_input(np.zeros(n, np.float32), packed=True)
    y = x[::2] + x[1::2]
    z = x[::-1] * 2.0
    nodes = [y.node(), z.node()]
    ops = [node.op for node in build_closure(nodes)]
    assert ops.count("sgather") == 3 and "stack" not in ops and "index" not in ops
    used = names_in(compile_program(nodes, "x86_64"))
    assert sum(name.startswith("sgather_i32__v_v_m_m") for name in used) == 3
    assert len(used) < 20  # the same handful of blocks at every length


def build_closure(roots: list[Node]) -> list[Node]:
    seen: dict[Node, None] = {}
    todo = list(roots)
    while todo:
        node = todo.pop()
        if node not in seen:
            seen[node] = None
            todo.extend(node.args)
    return list(seen)


def test_a_step_of_one_stays_a_view_and_a_constant_folds() -> None:
    x = array_input(np.zeros(100, np.float32), packed=True)
    assert x[3:50:1].node().op == "slice"
    assert x[::1].node() is x.node()
    c = cp.vector(np.arange(100, dtype=np.float32))
    folded = c[::-3].node()
    assert folded.op == "const"
    assert same_bits(evaluate_graph([folded], {})[0], np.arange(100, dtype=np.float32)[::-3])


def test_out_of_range_strided_views_are_refused_naming_them() -> None:
    x = array_input(np.zeros(100, np.float32), packed=True).node()
    for start, step, count in ((0, 2, 51), (-1, 1, 2), (99, -1, 101), (0, 0, 3), (5, 3, 0)):
        with pytest.raises(IndexError, match="out of range"):
            build.strided(x, start, step, count)
    with pytest.raises(IndexError, match="out of range for size 10"):
        build.scatter(x, 0, 1, 10)


def test_the_stencil_moves_nothing_for_a_range_outside_its_array() -> None:
    """Verified loading: the start and step slots are writable, so the stencil checks the
    first and the last index against the array's length itself; a range the compiler would
    never emit (built here past build.strided's check) leaves the result untouched."""
    x = array_input(np.arange(1, 101, dtype=np.float32), packed=True).node()
    good = build.make(REGISTRY["sgather"], (x,), (10, 3, 30))
    bad = [build.make(REGISTRY["sgather"], (x,), attr) for attr in
           ((10, 3, 31), (-1, 1, 5), (99, -1, 101), (2, 40, 4))]
    back = build.make(REGISTRY["sscatter"], (build.slice_(x, 0, 5),), (97, 1, 100))
    compiled = compile_program([good, *bad, back], "x86_64")
    prog = cp_load(compiled)
    prog.run(0)
    got = [read(prog, compiled.ports[o]) for o in (good, *bad, back)]
    assert same_bits(got[0], np.arange(1, 101, dtype=np.float32)[10:100:3])
    for out in got[1:-1]:
        assert not out.any()
    assert not got[-1].any()  # zero-filled, nothing scattered


def cp_load(compiled: Any) -> Any:
    from copapy import _runner  # type: ignore[attr-defined]

    return _runner.load(compiled.image)  # format 2: the verifying path


def read(prog: Any, port: Any) -> Any:
    return np.array([prog.read(port.offset + i * port.dtype.size, port.dtype.code)
                     for i in range(port.count)], dtype=port.dtype.numpy)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_through_strided_slices_match_finite_differences(dtype: str) -> None:
    n = 97
    rng = np.random.default_rng(3)
    x0 = rng.uniform(0.5, 2.0, n).astype(DTYPES[dtype])

    def f(v: Any) -> Any:
        return ((cp.sin(v[:-1:2]) * v[1::2]).sum() + (v[::-1] * v[::-3][0]).sum()
                + (v[2::5] * v[2::5]).sum())

    def f_np(v: Any) -> float:
        return float((np.sin(v[:-1:2]) * v[1::2]).sum() + (v[::-1] * v[::-3][0]).sum()
                     + (v[2::5] * v[2::5]).sum())

    grad = cp.jit(lambda v: cp.grad(f(v), v))(x0)
    x64 = x0.astype(np.float64)
    h = 1e-6
    fd = np.array([(f_np(x64 + h * e) - f_np(x64 - h * e)) / (2 * h) for e in np.eye(n)])
    tol = 1e-3 if dtype == "float32" else 1e-7
    np.testing.assert_allclose(np.asarray(grad, np.float64), fd, rtol=tol, atol=tol)


def test_the_adjoint_is_one_scatter_and_its_adjoint_a_gather() -> None:
    x = array_input(np.zeros(1000, np.float32), packed=True)
    g = cp.grad((x[990::-7] * x[990::-7]).sum(), x)
    ops = [node.op for node in build_closure([g.node()])]
    assert ops.count("sscatter") == 1 and "concat" not in ops
    y = build.scatter(build.strided(x.node(), 3, 7, 10), 3, 7, 1000)
    from copapy.graph.grad_rules import RULES

    back = RULES["sscatter"](y, x.node(), (True,))[0]
    assert back is not None and back.op == "sgather" and back.attr == (3, 7, 10)
