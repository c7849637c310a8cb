"""cp.sort / cp.argsort as one sort stencil (issue 31, item 4): a stable merge sort on integer
keys along the rows of a packed array (``argsort``), the values gathered by the permutation
(``pgather``), the gradient scattered back (``pscatter``). Against NumPy's stable sort bit for
bit natively, NaNs (any payload) last, -0.0 and 0.0 equal; the other architectures:
tests/test_index_cross_arch.py. The network path for short unpacked rows is in
tests/test_array_ops.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.array_ops import NETWORK_MAX
from copapy.arrays import array_input
from copapy.compiler import compile_program
from copapy.graph import build
from copapy.graph.ops import REGISTRY

from .test_strided import build_closure, cp_load, names_in, read, same_bits

DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32}
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.nan, -np.nan, np.inf, -np.inf, 1e-40, -1e-40, 2.5]


def data(shape: tuple[int, ...], dtype: str, seed: int) -> Any:
    """Many ties, ±0, NaNs of both signs and other payloads, infinities, subnormals."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "int32":
        pool = np.array([0, 1, -1, 2**31 - 1, -(2**31), 7, -7], np.int64)
        x = np.where(rng.random(n) < 0.5, rng.choice(pool, n), rng.integers(-(2**31), 2**31, n))
        return x.astype(np.int32).reshape(shape)
    x = np.where(rng.random(n) < 0.5, rng.choice(np.array(SPECIAL), n),
                 rng.standard_normal(n)).astype(DTYPES[dtype])
    bits = x.view(np.uint32 if dtype == "float32" else np.uint64)
    odd = np.isnan(x) & (rng.random(n) < 0.5)
    bits[odd] |= 1  # another NaN payload: the stable order keeps NaNs in place
    return x.reshape(shape)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple),
       dtype=st.sampled_from(sorted(DTYPES)), seed=st.integers(0, 2**16),
       axis=st.sampled_from([-1, 0, None]))
def test_sort_and_argsort_equal_numpys_stable_sort(shape: tuple[int, ...], dtype: str,
                                                   seed: int, axis: int | None) -> None:
    x = data(shape, dtype, seed)
    s, i = cp.jit(lambda a: (cp.sort(a, axis=axis), cp.argsort(a, axis=axis)))(x)
    assert same_bits(s, np.sort(x, axis=axis, kind="stable"))
    assert same_bits(i, np.argsort(x, axis=axis, kind="stable").astype(np.int32))


@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 31, 32, 33, 1000, 4097])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_run_and_merge_boundaries(n: int, dtype: str) -> None:
    x = data((n,), dtype, n)
    s, i = cp.jit(lambda a: (cp.sort(a), cp.argsort(a)))(x)
    assert same_bits(s, np.sort(x, kind="stable"))
    assert same_bits(i, np.argsort(x, kind="stable").astype(np.int32))


def test_in_a_compiled_program_over_rows() -> None:
    x0 = data((6, 50), "float32", 3)
    x = array_input(x0, packed=True)
    s, i = cp.sort(x), cp.argsort(x)
    compiled = compile_program([s.node(), i.node()], "x86_64")
    prog = cp_load(compiled)
    prog.run(0)
    assert same_bits(read(prog, compiled.ports[s.node()]), np.sort(x0, kind="stable").ravel())
    want = np.argsort(x0, kind="stable").astype(np.int32).ravel()
    assert same_bits(read(prog, compiled.ports[i.node()]), want)
    used = names_in(compiled)
    # sort and argsort share the one argsort node
    assert used.count("argsort_f32__v_v_v") == 1 and used.count("pgather_i32__v_v_v") == 1


@pytest.mark.parametrize("n", [64, 4096])
def test_one_sort_stencil_whatever_the_length(n: int) -> None:
    x = array_input(np.zeros(n, np.float32), packed=True)
    ops = [node.op for node in build_closure([cp.sort(x).node()])]
    assert sorted(ops) == ["argsort", "input", "pgather"]


def test_short_unpacked_rows_take_the_network_longer_ones_the_stencil() -> None:
    short = cp.vector([cp.value(float(v)) for v in range(NETWORK_MAX)], packed=False)
    assert "argsort" not in {n.op for n in build_closure(cp.sort(short).nodes())}
    long = cp.vector([cp.value(float(v)) for v in range(NETWORK_MAX + 1)], packed=False)
    assert "argsort" in {n.op for n in build_closure(cp.sort(long).nodes())}
    assert not cp.sort(long).packed


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_gradient_is_the_permutation(dtype: str) -> None:
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((3, 40)).astype(DTYPES[dtype])
    x0[0, :4] = 1.0  # ties: the stable order decides where each gradient goes
    w = np.arange(120, dtype=DTYPES[dtype]).reshape(3, 40)
    g = cp.jit(lambda v: cp.grad((cp.sort(v) * w).sum(), v))(x0)
    want = np.zeros_like(x0)
    np.put_along_axis(want, np.argsort(x0, axis=-1, kind="stable"), w, axis=-1)
    assert same_bits(g, want)
    # and against central differences of a smooth function of the sorted values
    y0 = rng.standard_normal(30)

    def f(v: Any) -> Any:
        return (cp.sin(cp.sort(v)) * np.linspace(0.0, 1.0, 30)).sum()

    grad = np.asarray(cp.jit(lambda v: cp.grad(f(v), v))(y0))
    h = 1e-6
    fd = np.array([(np.sum(np.sin(np.sort(y0 + h * e)) * np.linspace(0.0, 1.0, 30))
                    - np.sum(np.sin(np.sort(y0 - h * e)) * np.linspace(0.0, 1.0, 30))) / (2 * h)
                   for e in np.eye(30)])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_out_of_range_permutation_indices_move_nothing() -> None:
    """Verified loading: the permutation is data, so pgather/pscatter check every index
    against the row length; an index outside gives a zero, never a read or write outside."""
    a = array_input(np.arange(1, 9, dtype=np.float32), packed=True).node()
    p = array_input(np.array([7, -1, 8, 0, 2**31 - 1, 3, 3, 1], np.int32), packed=True).node()
    gathered = build.make(REGISTRY["pgather"], (p, a))
    scattered = build.make(REGISTRY["pscatter"], (p, a))
    compiled = compile_program([gathered, scattered], "x86_64")
    prog = cp_load(compiled)
    prog.run(0)
    assert same_bits(read(prog, compiled.ports[gathered]),
                     np.array([8, 0, 0, 1, 0, 4, 4, 2], np.float32))
    assert same_bits(read(prog, compiled.ports[scattered]),
                     np.array([4, 8, 0, 7, 0, 0, 0, 1], np.float32))


def test_bools_sort_as_numpy_and_refusals_name_the_fix() -> None:
    """Bools sort (False first, stable order of equal ones) as NumPy's do; they were refused
    ("cast bools first") until decision numpy-compositions."""

    @cp.jit
    def sort_bools(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.sort(a), np.argsort(a, kind="stable")

    b = np.array([True, False, True, False, False] * 4)
    values, order = sort_bools(b)
    assert values.dtype == np.bool_ and values.tolist() == np.sort(b).tolist()
    assert order.tolist() == np.argsort(b, kind="stable").tolist()
    a = array_input(np.zeros(20, np.float32), packed=True).node()
    p = array_input(np.zeros(10, np.int32), packed=True).node()
    with pytest.raises(Exception, match="rows of equal arrays"):
        build.make(REGISTRY["pgather"], (p, a))
