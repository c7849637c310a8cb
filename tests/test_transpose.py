"""Axis permutations of packed arrays (issue 31): ``a.T``, ``a.transpose(perm)``,
``cp.transpose``/``swapaxes``/``moveaxis`` and NumPy's functions on traced arrays are one level
gather (``ngather`` with the axes' strides permuted; two for the 4-D orders that leave four
levels), whatever the size; their adjoint is the inverse permutation's gather. Executed
natively against NumPy bit for bit; every other architecture: tests/test_index_cross_arch.py."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arrays import array_input
from copapy.compiler import compile_program
from copapy.graph import levels

from .support.checks import central_difference
from .test_strided import build_closure, cp_load, names_in, read, same_bits, values

DTYPES = ["float32", "float64", "int32"]


def shaped(shape: tuple[int, ...], dtype: str, seed: int = 0) -> Any:
    return values(math.prod(shape), dtype, seed).reshape(shape)


@st.composite
def shape_and_perm(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    return shape, tuple(draw(st.permutations(range(len(shape)))))


#: the NumPy spellings of a permutation, each with copapy's own function beside it
FORMS: list[tuple[str, Any, Any]] = [
    ("a.T", lambda a, p: a.T, lambda a, p: a.T),
    ("a.transpose(p)", lambda a, p: a.transpose(p), lambda a, p: a.transpose(p)),
    ("a.transpose(*p)", lambda a, p: a.transpose(*p), lambda a, p: a.transpose(*p)),
    ("np.transpose", lambda a, p: np.transpose(a, p), lambda a, p: cp.transpose(a, p)),
    ("np.transpose(a)", lambda a, p: np.transpose(a), lambda a, p: cp.transpose(a)),
    ("np.swapaxes", lambda a, p: np.swapaxes(a, p[0], -1),
     lambda a, p: cp.swapaxes(a, p[0], -1)),
    ("np.moveaxis", lambda a, p: np.moveaxis(a, p[0], -1),
     lambda a, p: cp.moveaxis(a, p[0], -1)),
    ("np.moveaxis(seq)", lambda a, p: np.moveaxis(a, p[:2], [-1, 0][:len(p[:2])]),
     lambda a, p: cp.moveaxis(a, p[:2], [-1, 0][:len(p[:2])])),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=shape_and_perm(), dtype=st.sampled_from(DTYPES),
       form=st.sampled_from(range(len(FORMS))))
def test_permutations_equal_numpy_under_jit(case: tuple[tuple[int, ...], tuple[int, ...]],
                                            dtype: str, form: int) -> None:
    shape, perm = case
    _, numpy_form, copapy_form = FORMS[form]
    x = shaped(shape, dtype)
    want = numpy_form(x, perm)
    assert same_bits(cp.jit(lambda a: numpy_form(a, perm))(x), want)
    assert same_bits(cp.jit(lambda a: copapy_form(a, perm))(x), want)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=shape_and_perm(), dtype=st.sampled_from(DTYPES))
def test_permutations_in_a_compiled_program(case: tuple[tuple[int, ...], tuple[int, ...]],
                                            dtype: str) -> None:
    """Through compile_program and the verifying loader, an expression on top and the
    permutation of a permutation (two gathers in a row)."""
    shape, perm = case
    data = shaped(shape, dtype, 1)
    x = array_input(data, packed=True, dtype=dtype)
    t = x.transpose(perm)
    out = (t * 2 if dtype == "int32" else t * 2.0).node()
    back = t.T.node()
    compiled = compile_program([out, t.node(), back], "x86_64")
    prog = cp_load(compiled)
    prog.run(0)
    with np.errstate(all="ignore"):
        want = data.transpose(perm) * (2 if dtype == "int32" else 2.0)
    assert same_bits(read(prog, compiled.ports[out]), np.ravel(want).astype(data.dtype))
    assert same_bits(read(prog, compiled.ports[t.node()]), np.ravel(data.transpose(perm)))
    assert same_bits(read(prog, compiled.ports[back]), np.ravel(data.transpose(perm).T))


def test_every_4d_order_is_at_most_two_gathers_of_at_most_three_levels() -> None:
    """The stencil walks three levels: a 4-D order that leaves four goes through an order
    between (levels._two_passes), and there is one for each of the 24."""
    shape = (2, 3, 5, 7)
    x = array_input(shaped(shape, "float32"), packed=True)
    for perm in itertools.permutations(range(4)):
        ops = [n for n in build_closure([x.transpose(perm).node()]) if n.op == "ngather"]
        assert 1 <= len(ops) <= 2 or perm == (0, 1, 2, 3), perm
        assert all(len(levels.level_attr(n)[0]) <= levels.MAX_LEVELS for n in ops), perm
        got = cp.jit(lambda a, perm=perm: a.transpose(perm))(x_data := shaped(shape, "float32"))
        assert same_bits(got, x_data.transpose(perm)), perm


def test_node_count_and_code_size_do_not_grow_with_the_size() -> None:
    """The same nodes, stencils and code bytes at every size: no per-element copy (the
    unrolled transpose emitted one load and store per element)."""
    seen = set()
    for n in (10, 100, 1000, 10_000):
        m = array_input(np.zeros((n, n // 10 + 3), np.float32), packed=True)
        t4 = array_input(np.zeros((2, 3, n // 10 + 2, 5), np.float32), packed=True)
        cases = [m.T, np.swapaxes(m, 0, 1), t4.transpose(3, 2, 1, 0), t4.transpose(0, 2, 1, 3),
                 np.moveaxis(t4, 1, -1)]
        nodes = tuple(len(build_closure([c.node()])) for c in cases)
        assert max(nodes) <= 5, nodes
        compiled = compile_program([(c * 2.0).node() for c in cases], "x86_64")
        used = names_in(compiled)
        # m.T and swapaxes(m, 0, 1) are one node; the 4-D reversal is two gathers
        assert sum(name.startswith("ngather_") for name in used) == 5 and len(used) < 30, used
        seen.add((nodes, compiled.op_count, compiled.stencil_count, compiled.code_bytes))
    assert len(seen) == 1, seen


def test_the_matrix_transpose_op_is_the_level_stencil() -> None:
    """build.apply("transpose") (the matmul gradient's) is lowered to one ngather, not one
    store per element."""
    for n in (8, 300):
        a = array_input(shaped((n, n + 1), "float32"), packed=True)
        b = array_input(shaped((n + 1, 3), "float32", 2), packed=True)
        g = cp.grad(((a @ b) * (a @ b)).sum(), a)
        used = names_in(compile_program([g.node()], "x86_64"))
        assert any(name.startswith("ngather_") for name in used), used
        assert not any(name.startswith("store") for name in used), used


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_through_permutations_match_finite_differences(dtype: str) -> None:
    shape = (2, 3, 4, 3)
    rng = np.random.default_rng(5)
    x0 = rng.uniform(0.5, 2.0, shape).astype(np.dtype(dtype))
    w = rng.uniform(-1.0, 1.0, (3, 4, 3, 2))

    def f(v: Any, xp: Any) -> Any:
        sin = cp.sin if xp is cp else np.sin
        return ((xp.transpose(v, (3, 2, 1, 0)) * w[::-1, ::-1].transpose(3, 2, 1, 0)
                 .transpose(3, 2, 1, 0)).sum()
                + (sin(xp.swapaxes(v, 1, 3)) * xp.moveaxis(v, 0, -1).transpose(
                    3, 0, 1, 2)[:, :, :, :1]).sum() + (v.T ** 2).sum())

    grad = np.asarray(cp.jit(lambda v: cp.grad(f(v, cp), v))(x0), np.float64)
    fd = central_difference(lambda v: float(f(v, np)), x0.astype(np.float64))
    tol = 2e-3 if dtype == "float32" else 1e-7
    np.testing.assert_allclose(grad, fd, rtol=tol, atol=tol)


def test_the_adjoint_is_the_inverse_gather() -> None:
    """No nscatter (zeros then the values) for a permutation: one gather back, whose levels
    are the inverse permutation's; a reversal's adjoint is itself."""
    for shape, perm in (((40, 30), (1, 0)), ((4, 5, 6), (2, 0, 1)), ((3, 4, 5, 6), (3, 2, 1, 0))):
        x = array_input(np.zeros(shape, np.float32), packed=True)
        g = cp.grad((x.transpose(perm) * x.transpose(perm)).sum(), x)
        ops = [n.op for n in build_closure([g.node()])]
        assert "nscatter" not in ops and ops.count("ngather") == 2 * (
            1 if len(shape) < 4 else 2), ops
    assert levels.inverse_levels((4, 5), (-5, 1), 20) == (15, [(4, -5), (5, 1)])
    assert levels.inverse_levels((5, 4), (1, 5), 20) == (0, [(4, 1), (5, 4)])
    assert levels.inverse_levels((3, 4), (8, 2), 12) is None  # not every element
    assert levels.inverse_levels((2, 3), (2, 1), 6) is None  # overlapping


def test_bad_axes_are_refused_naming_them() -> None:
    x = array_input(np.zeros((2, 3, 4), np.float32), packed=True)
    with pytest.raises(ValueError, match="axes must be a permutation"):
        x.transpose(0, 1, 1)
    with pytest.raises(np.exceptions.AxisError, match="axis 5 is out of bounds"):
        cp.swapaxes(x, 0, 5)
    with pytest.raises(TypeError, match="an axis is an int"):
        cp.swapaxes(x, 0, "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="as many distinct source as destination"):
        cp.moveaxis(x, [0, 1], [2])
