"""Vectors and matrices, packed and unpacked, against NumPy and against each other."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph.reference import evaluate_graph

from .support.checks import examples, same_bits
from .support.registry_ops import elementwise

#: the element-wise operations on float32 (registry rows; conversions are tested apart)
ELEMENTWISE_BINARY = elementwise(arity=2, dtype="float32", cast=False)
ELEMENTWISE_UNARY = elementwise(arity=1, dtype="float32", cast=False)


def build_binary(name: str) -> Callable[[Any, Any], Any]:
    from copapy.arrays import elementwise

    return lambda a, b: elementwise(name, a, b)


def build_unary(name: str) -> Callable[[Any], Any]:
    from copapy.arrays import elementwise

    return lambda a: elementwise(name, a)


EXPRESSIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    **{f"v_{n}": (2, build_binary(n)) for n in ELEMENTWISE_BINARY},
    **{f"u_{n}": (1, build_unary(n)) for n in ELEMENTWISE_UNARY},
    "scalar_broadcast": (1, lambda a: a * 2.5 - 1.0),
    "sum": (1, lambda a: a.sum()),
    "mean": (1, lambda a: a.mean()),
    "min": (1, lambda a: a.min()),
    "max": (1, lambda a: a.max()),
    "dot": (2, lambda a, b: a @ b),
    "norm": (1, lambda a: cp.norm(a)),
    "where": (2, lambda a, b: cp.where(a > b, a, b)),
    "index_slice": (1, lambda a: a[len(a) // 2] + a[: max(1, len(a) // 2)].sum()),
    "cast_int": (1, lambda a: cp.cast(cp.cast(a, cp.int32) * 3, cp.float32)),
    "benchmark_term": (2, lambda a, b: sum((a + i) @ b for i in range(3))),
}


def floats(n: int) -> st.SearchStrategy[np.ndarray]:
    element = st.floats(-100, 100, width=32) | st.sampled_from([0.0, -0.0, 1.0, 0.5, -2.0])
    return st.lists(element, min_size=n, max_size=n).map(lambda v: np.array(v, np.float32))


def compiled_values(expr: Callable[..., Any], inputs: list[np.ndarray], packed: bool) -> Any:
    arrays = [cp.value(x).to_packed() if packed else cp.value(x).to_unpacked() for x in inputs]
    out = expr(*arrays)
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.run()
    return out, tg.read(out)


def reference(out: Any) -> Any:
    if isinstance(out, cp.Array):
        nodes = out.nodes()
        values = evaluate_graph(nodes)
        return values[0] if out.packed else np.array(values).reshape(out.shape)
    return evaluate_graph([out.node])[0]


def check_bits(got: Any, want: Any) -> None:
    g = np.asarray(got)
    w = np.asarray(want, dtype=g.dtype)
    assert g.shape == w.shape
    for x, y in zip(g.reshape(-1), w.reshape(-1), strict=True):
        assert same_bits(x, y, g.dtype.name), (got, want)


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
@settings(max_examples=examples(25))
@given(data=st.data())
def test_array_operation(name: str, data: st.DataObject) -> None:
    arity, expr = EXPRESSIONS[name]
    n = data.draw(st.integers(1, 200))
    inputs = [data.draw(floats(n)) for _ in range(arity)]
    _out_u, unpacked = compiled_values(expr, inputs, packed=False)
    out_p, packed = compiled_values(expr, inputs, packed=True)
    check_bits(packed, unpacked)  # same documented order: bit for bit
    check_bits(packed, reference(out_p))  # NumPy reference (kernels for sin, exp, ...)


@settings(max_examples=examples(40))
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 12), st.data())
def test_matrix_products(m: int, k: int, j: int, data: st.DataObject) -> None:
    a = data.draw(floats(m * k)).reshape(m, k)
    b = data.draw(floats(k * j)).reshape(k, j)
    v = data.draw(floats(k))
    u = data.draw(floats(m))
    results = []
    for packed in (False, True):
        def conv(x: np.ndarray, packed: bool = packed) -> Any:
            value = cp.value(x)
            return value.to_packed() if packed else value.to_unpacked()

        ma, mb, vv, uu = conv(a), conv(b), conv(v), conv(u)
        outs = [ma @ mb, ma @ vv, uu @ ma, ma.T, (ma @ mb).sum()]
        tg = cp.LocalTarget()
        tg.compile(*outs)
        tg.run()
        results.append([tg.read(o) for o in outs])
    for p, q in zip(*results, strict=True):
        check_bits(p, q)
    np.testing.assert_allclose(results[1][0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(results[1][1], a.astype(np.float64) @ v, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(results[1][2], u.astype(np.float64) @ a, rtol=1e-4, atol=1e-2)
    assert np.array_equal(results[1][3], a.T)


@pytest.mark.parametrize("packed", [False, True])
def test_reshape_infers_one_dimension_as_numpy(packed: bool) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = cp.value(x, packed=packed)
    for shape in [(-1,), (2, -1), (-1, 6), (12, -1)]:
        got = m.reshape(*shape)
        assert got.shape == x.reshape(*shape).shape
        tg = cp.LocalTarget()
        tg.compile(got)
        tg.run()
        assert np.array_equal(tg.read(got), x.reshape(*shape))
    for bad in [(5, -1), (-1, -1), (0, -1), (0, 12), (7,)]:
        with pytest.raises(cp.arrays.build.ShapeError, match="cannot reshape"):
            m.reshape(*bad)
    with pytest.raises(TypeError):
        m.reshape(2.0, 6)
    f = cp.jit(lambda a: a.reshape(-1) * 2.0)
    assert np.array_equal(f(x), x.reshape(-1) * 2)


def test_shapes_and_errors() -> None:
    v = cp.vector([1.0, 2.0, 3.0])
    m = cp.matrix([[1.0, 2.0], [3.0, 4.0]])
    assert v.shape == (3,) and len(v) == 3 and v.size == 3
    assert m.shape == (2, 2) and m.T.shape == (2, 2) and m.flatten().shape == (4,)
    assert [type(x) for x in v] == [cp.Value] * 3
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        v + cp.vector([1.0, 2.0])
    with pytest.raises(ValueError, match="inner dimensions"):
        m @ v
    with pytest.raises(IndexError):
        v[3]
    with pytest.raises(TypeError, match="truth value"):
        bool(v > 1.0)
    v[0] = 5.0  # refused before ("copapy arrays are immutable"): NumPy's item assignment
    assert v.shape == (3,) and repr(v[0]).startswith("<copapy")


@pytest.mark.parametrize("packed", [False, True])
def test_numpy_spellings_of_matmul_reshape_and_astype(packed: bool) -> None:
    """a @ 2 names the scalar (it said "cp.matrix needs a 2-D sequence, got shape ()"), ndarray
    @ a and a list @ a multiply, a.reshape([3, 4]) takes a list as NumPy's does,
    a.astype(dtype) is cp.cast (an AttributeError), and m.dot(v) is m @ v as NumPy's ("dot
    needs two vectors")."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    m = cp.value(data, packed=packed)
    v = cp.value(data[0], packed=packed)
    for bad in (lambda: m @ 2, lambda: 2 @ m, lambda: cp.value(2.0) @ v,
                lambda: np.float32(2) @ v):
        with pytest.raises(cp.arrays.build.ShapeError, match=r"scalar: multiply by it with \*"):
            bad()
    eye = np.eye(3, dtype=np.float32)
    outs = [eye @ m, data[0].tolist() @ v, m.reshape([4, 3]), m.astype(np.int32),
            v.astype("bool"), v[1].astype(cp.int32), cp.cast(m, cp.int32), m.dot(v),
            v.dot(v), m.T.dot(m)]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    wants = [eye @ data, data[0] @ data[0], data.reshape([4, 3]), data.astype(np.int32),
             data[0].astype(bool), np.int32(data[0][1]), data.astype(np.int32),
             data.dot(data[0]), data[0].dot(data[0]), data.T.dot(data)]
    for out, want in zip(outs, wants, strict=True):
        got = tg.read(out)
        assert np.array_equal(got, want), (got, want)
        assert np.asarray(got).dtype == np.asarray(want).dtype or np.ndim(want) == 0


def test_array_construction_errors_and_options() -> None:
    """cp.matrix of a copapy vector is refused (it returned the vector), of a matrix it applies
    dtype= and packed= (ignored); ragged input says so (NumPy's "inhomogeneous shape after 1
    dimensions")."""
    v = cp.vector([1.0, 2.0])
    m = cp.matrix([[1, 2], [3, 4]])
    with pytest.raises(cp.arrays.build.ShapeError, match=r"2-D array.*reshape\(1, -1\)"):
        cp.matrix(v)
    f = cp.matrix(m, dtype=cp.float32, packed=True)
    assert f.dtype is cp.float32 and f.packed and f.shape == (2, 2)
    tg = cp.LocalTarget()
    tg.compile(f / 2)
    tg.run()
    assert np.array_equal(tg.read(f / 2), np.array([[1, 2], [3, 4]], np.float32) / 2)
    with pytest.raises(cp.arrays.build.ShapeError, match="rectangular"):
        cp.value([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="nested arrays"):
        cp.vector([cp.value(1.0), v])


@pytest.mark.parametrize("packed", [False, True])
@settings(max_examples=examples(10), deadline=None)
@given(xs=st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, 3.0, np.nan, np.inf]), min_size=1,
                   max_size=12), ints=st.lists(st.integers(-50, 50), min_size=1, max_size=9))
def test_numpy_array_methods(xs: list[float], ints: list[int], packed: bool) -> None:
    """prod, any, all, clip, ravel and copy as NumPy's array methods (AttributeError), and
    np.prod / np.any / np.all through them."""
    a, i = np.array(xs, np.float32), np.array(ints, np.int32)
    v, w = cp.value(a, packed=packed), cp.value(i, packed=packed)
    outs = [v.prod(), w.prod(), np.prod(w), v.any(), v.all(), np.any(w), np.all(w),
            (v > 1.0).any(), v.clip(-1.0, 1.0), w.clip(0, None), v.reshape(1, -1).ravel(),
            v.copy()]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    with np.errstate(all="ignore"):
        wants = [a.prod(), i.prod(dtype=np.int32), np.prod(i, dtype=np.int32), a.any(), a.all(),
                 np.any(i), np.all(i), (a > 1.0).any(), a.clip(-1.0, 1.0), i.clip(0, None),
                 a.ravel(), a]
    for k, (out, want) in enumerate(zip(outs, wants, strict=True)):
        got = tg.read(out)
        if k == 0:  # the lane order rounds the product differently from NumPy's loop
            np.testing.assert_allclose(got, want, rtol=1e-6)
        else:
            assert np.array_equal(got, want, equal_nan=True), (k, got, want)


INDEX_KEYS: list[Any] = [
    (slice(None), 0), (slice(None), -1), (slice(None), slice(1, 3)), (slice(0, 2), 1),
    (slice(None, None, -1), slice(None, None, 2)), (1, slice(1, None)), (-1, -1), 1,
    slice(1, 3), (slice(1, 2),), (2,),
]


@pytest.mark.parametrize("packed", [False, True])
def test_matrix_indexing_as_numpy(packed: bool) -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = cp.value(data)
    m = m.to_packed() if packed else m.to_unpacked()
    outs = [m[key] for key in INDEX_KEYS]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    for key, out in zip(INDEX_KEYS, outs, strict=True):
        want = data[key]
        got = np.asarray(tg.read(out))
        assert got.shape == want.shape and np.array_equal(got, want), (key, got, want)


def test_indices_are_integers() -> None:
    v = cp.vector([1.0, 2.0, 3.0])
    assert v[np.int64(1)].node is v[1].node
    with pytest.raises(TypeError, match="integers"):
        v[1.7]
    # v[True] was v[1] (NumPy reads it as a new axis); a traced mask names the way; constant
    # index lists and masks gather (tests/test_numpy_coverage.py)
    for key in (True, np.bool_(False)):
        with pytest.raises(TypeError, match="a bool is not an index"):
            v[key]
    with pytest.raises(TypeError, match=r"traced boolean mask.*cp\.where"):
        v[v > 1.0]
    assert [x.node for x in v[[0, 2]].items()] == [v[0].node, v[2].node]
    assert [x.node for x in v[np.array([True, False, True])].items()] == [v[0].node, v[2].node]


def test_array_of_values_and_numbers_promotes_as_operations() -> None:
    """Numbers beside traced values are weak, as in ``i + 1.5``: they raise the type when they
    need a higher kind, and are never truncated to the values' type."""
    i, b = cp.value(1), cp.value(True)
    mixed = [cp.vector([i, 1.5]), cp.vector([b, 2]), cp.matrix([[i, 0.5], [2, 3]])]
    assert [m.dtype for m in mixed] == [cp.float32, cp.int32, cp.float32]
    tg = cp.LocalTarget()
    tg.compile(*mixed)
    tg.run()
    assert tg.read(mixed[0]).tolist() == [1.0, 1.5]
    assert tg.read(mixed[1]).tolist() == [1, 2]
    assert tg.read(mixed[2]).tolist() == [[1.0, 0.5], [2.0, 3.0]]


@pytest.mark.parametrize("n", [3, 100])
def test_constant_arrays_are_checked_as_constants(n: int) -> None:
    """``cp.vector(..., dtype=cp.int32)`` refuses what ``cp.constant(1.5, cp.int32)`` refuses."""
    with pytest.raises(TypeError, match="integer"):
        cp.vector([1.5] * n, dtype=cp.int32)
    with pytest.raises(OverflowError, match="int32"):
        cp.vector([2**40] * n)
    with pytest.raises(OverflowError, match="int32"):
        cp.vector([1e20] * n, dtype=cp.int32)
    with pytest.raises(OverflowError, match="int32"):
        cp.vector([cp.value(1)] + [2**40] * (n - 1))


@pytest.mark.parametrize("packed", [False, True])
def test_mean_and_norm_of_ints_do_not_wrap(packed: bool) -> None:
    """mean and norm are floats (as NumPy's): int32 elements are summed and squared as
    float32, not in wrapping int32 (mean of three 2**30 was negative)."""
    big = np.array([2**30, 2**30, 2**30, 2**30], np.int32)
    v = cp.value(big, packed=packed)
    w = cp.value(np.array([50000, 50000, 0, 0], np.int32), packed=packed)
    b = cp.value(np.array([True, False, True, True]), packed=packed)
    outs = [v.mean(), cp.norm(w), cp.norm(w.reshape(2, 2)), b.mean(), cp.norm(b)]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    got = [tg.read(o) for o in outs]
    want = [big.mean(), np.linalg.norm([50000, 50000]), np.linalg.norm([50000, 50000]), 0.75,
            math.sqrt(3)]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_numpy_reductions_of_whole_arrays() -> None:
    """np.sum(a), np.mean, np.max, np.min reduce a traced array as a.sum() ... do (they pass
    axis=None, out=None); an argument copapy does not take is an error that says what to do
    (axis= and keepdims= work: test_numpy_semantics.py)."""
    data = np.linspace(-1.0, 2.0, 6, dtype=np.float32).reshape(2, 3)
    m = cp.value(data)
    outs = [np.sum(m), np.mean(m), np.max(m), np.min(m), m.sum(keepdims=False)]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    want = [data.sum(), data.mean(), data.max(), data.min(), data.sum()]
    np.testing.assert_allclose([tg.read(o) for o in outs], want, rtol=1e-6)
    with pytest.raises(TypeError, match=r"sum\(initial=1.0\).*axis= and keepdims= only"):
        np.sum(m, initial=1.0)


@pytest.mark.parametrize("n", [4, 100])
def test_np_round_of_traced_values(n: int) -> None:
    """np.round(a) and np.around(a) are cp.round (they failed inside NumPy: 'no callable rint
    method); decimals as NumPy's (tests/test_numpy_scan.py), negative decimals of ints an
    error that says what to do."""
    data = np.tile(np.array([0.5, 1.5, 2.5, -0.5], np.float32), n // 4)
    a = cp.value(data)
    x = cp.value(2.5)
    outs = [np.round(a), np.around(a), np.round(x)]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    assert tg.read(outs[0]).tolist() == np.round(data).tolist()
    assert tg.read(outs[1]).tolist() == np.round(data).tolist()
    assert tg.read(outs[2]) == 2.0
    with pytest.raises(ValueError, match=r"decimals=-1.*cast to floats"):
        np.round(cp.value(np.int32([15, 25])), -1)


def test_numpy_constants_and_readback() -> None:
    v = cp.vector(np.array([1.0, 2.0, 3.0]))  # constants
    x = cp.value(np.array([1.0, 1.0, 1.0]))  # an input vector
    tg = cp.LocalTarget()
    tg.compile(v * x, (v * x).sum())
    tg.write(x, np.array([2.0, 3.0, 4.0]))
    tg.run()
    out = tg.read(v * x)
    assert isinstance(out, np.ndarray) and out.tolist() == [2.0, 6.0, 12.0]
    assert tg.read((v * x).sum()) == 20.0


def test_unpacked_zero_element_removes_branch() -> None:
    x = cp.value(np.array([1.0, 2.0, 3.0]))
    sparse = cp.vector([0.0, 1.0, 0.0])
    y = sparse * cp.exp(x)
    items = y.items()
    assert items[0].node.op == "const" and items[2].node.op == "const"


def test_auto_packing_threshold() -> None:
    assert cp.value(np.zeros(64)).packed is False
    assert cp.value(np.zeros(65)).packed is True
    assert cp.vector(np.zeros(100), packed=False).packed is False


def test_packed_compile_time_does_not_grow_with_size() -> None:
    import time

    def compile_time(n: int) -> tuple[float, int]:
        a = cp.value(np.zeros(n, np.float32), packed=True)
        b = cp.value(np.ones(n, np.float32), packed=True)
        term = sum((a + i) @ b for i in range(10))
        tg = cp.LocalTarget()
        t = time.perf_counter()
        tg.compile(term)
        return time.perf_counter() - t, tg.program_info.stencil_count

    _, small = compile_time(10)
    _, large = compile_time(5000)
    assert small == large  # the same stencils whatever the length
    assert small < 40


def test_quaternions() -> None:
    angle = cp.value(0.7)
    q = cp.Quaternion.from_axis_angle([0.0, 0.0, 1.0], angle)
    rotated = q.rotate([1.0, 0.0, 0.0])
    r = q.to_rotation_matrix()
    back = cp.Quaternion.from_rotation_matrix(r)
    e = cp.Quaternion.from_euler(roll=0.1, pitch=0.2, yaw=0.3)
    composed = (e * e.conjugate()).normalize()
    axis, ang = q.to_axis_angle()
    tg = cp.LocalTarget()
    tg.compile(rotated, r, back, composed, axis, ang)
    tg.run()
    assert np.allclose(tg.read(rotated), [math.cos(0.7), math.sin(0.7), 0.0], atol=1e-6)
    assert np.allclose(tg.read(back), [math.cos(0.35), 0, 0, math.sin(0.35)], atol=1e-6)
    assert np.allclose(tg.read(composed), [1.0, 0.0, 0.0, 0.0], atol=1e-6)
    assert np.allclose(tg.read(axis), [0.0, 0.0, 1.0], atol=1e-6)
    assert math.isclose(tg.read(ang), 0.7, rel_tol=1e-6)
    # from_euler against the rotation matrix of scipy's convention (intrinsic z-y-x)
    cr, sr, cpi, spi, cy, sy = (math.cos(0.1), math.sin(0.1), math.cos(0.2), math.sin(0.2),
                                math.cos(0.3), math.sin(0.3))
    want = np.array([[cy * cpi, cy * spi * sr - sy * cr, cy * spi * cr + sy * sr],
                     [sy * cpi, sy * spi * sr + cy * cr, sy * spi * cr - cy * sr],
                     [-spi, cpi * sr, cpi * cr]])
    tg.compile(e.to_rotation_matrix())
    tg.run()
    assert np.allclose(tg.read(e.to_rotation_matrix()), want, atol=1e-6)


#: one compiled program for every drawn (roll, pitch, yaw): inputs written per example
_EULER: dict[str, Any] = {}


def _euler_program() -> dict[str, Any]:
    if not _EULER:
        roll, pitch, yaw = cp.value(0.0), cp.value(0.0), cp.value(0.0)
        m = cp.Quaternion.from_euler(roll=roll, pitch=pitch, yaw=yaw).to_rotation_matrix()
        tg = cp.LocalTarget()
        tg.compile(m)
        _EULER.update(tg=tg, inputs=(roll, pitch, yaw), m=m)
    return _EULER


angles = st.floats(-math.pi, math.pi, allow_nan=False)


@settings(max_examples=examples(40), deadline=None)
@given(roll=angles, pitch=angles, yaw=angles)
def test_from_euler_is_scipys_zyx(roll: float, pitch: float, yaw: float) -> None:
    """from_euler(roll=, pitch=, yaw=) is scipy's Rotation.from_euler("ZYX", [yaw, pitch, roll])
    (the docstring said (yaw, pitch, roll) while the signature took (roll, pitch, yaw))."""
    # a dev extra: the wheel subset's venv has no scipy
    Rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    prog = _euler_program()
    tg = prog["tg"]
    for v, a in zip(prog["inputs"], (roll, pitch, yaw), strict=True):
        tg.write(v, a)
    tg.run()
    want = Rotation.from_euler("ZYX", [yaw, pitch, roll]).as_matrix()
    assert np.allclose(tg.read(prog["m"]), want, atol=2e-6)


def test_from_euler_positional_is_a_type_error_naming_the_keywords() -> None:
    with pytest.raises(TypeError, match=r"roll.*pitch.*yaw"):
        cp.Quaternion.from_euler(0.1, 0.2, 0.3)
    with pytest.raises(TypeError, match=r"from_euler\(roll=\.\.\., pitch=\.\.\., yaw=\.\.\.\)"):
        cp.Quaternion.from_euler(0.1, roll=0.1, pitch=0.2, yaw=0.3)


def test_quaternion_arithmetic_with_scalars() -> None:
    """2 * q, q / 2 and q - p compute component-wise (TypeError); q + 1 is Python's TypeError
    (an AttributeError: 'int' object has no attribute 'w')."""
    q = cp.quaternion(cp.value(1.0), 2.0, -3.0, 4.0)
    p = cp.quaternion(0.5, 0.25, 1.0, -2.0)
    outs = [2 * q, q / 2, q - p, 0.5 * q + p * 2]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    a, b = np.array([1.0, 2.0, -3.0, 4.0]), np.array([0.5, 0.25, 1.0, -2.0])
    for out, want in zip(outs, [2 * a, a / 2, a - b, 0.5 * a + 2 * b], strict=True):
        assert np.array_equal(tg.read(out), want.astype(np.float32))
    with pytest.raises(TypeError, match="unsupported operand"):
        q + 1  # type: ignore[operator]
    with pytest.raises(TypeError, match="unsupported operand"):
        q / p  # type: ignore[operator]


def test_quaternion_rotation_of_numpy_vectors_in_float64() -> None:
    """q.rotate(ndarray) of a float64 quaternion keeps float64 (the vector was float32)."""
    h = math.sqrt(0.5)
    q = cp.quaternion(*(cp.value(c, cp.float64) for c in (h, 0.0, 0.0, h)))  # 90° about z
    r = q.rotate(np.array([0.1, 0.2, 0.3]))
    tg = cp.LocalTarget()
    tg.compile(r)
    tg.run()
    np.testing.assert_allclose(tg.read(r), [-0.2, 0.1, 0.3], rtol=1e-14, atol=1e-15)


def finite_difference(f: Callable[[np.ndarray], float], x: np.ndarray,
                      h: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros_like(x)
        d.reshape(-1)[i] = h
        out.reshape(-1)[i] = (f(x + d) - f(x - d)) / (2 * h)
    return out


GRAD_CASES: dict[str, Callable[[Any, Any], Any]] = {
    "elementwise": lambda v, w: (cp.sin(v) * v + cp.exp(w * 0.1)).sum(),
    "mean": lambda v, w: (v * w).mean(),
    "dot": lambda v, w: v @ w,
    "max": lambda v, w: (v * 1.5 - w).max(),
    "matvec": lambda v, w: (cp.matrix([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]) @ (v * w)).sum(),
    "matmul": lambda v, w: (v.reshape(3, 1) @ w.reshape(1, 3)).sum(),
    "norm": lambda v, w: cp.norm(v - w),
}


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_against_finite_differences(case: str, packed: bool) -> None:
    f = GRAD_CASES[case]
    x0 = np.array([0.3, -0.7, 1.1])
    y0 = np.array([0.9, 0.2, -0.4])
    v = cp.value(x0, cp.float64)
    w = cp.value(y0, cp.float64)
    v, w = (v.to_packed(), w.to_packed()) if packed else (v, w)
    out = f(v, w)
    gv, gw = cp.grad(out, [v, w])
    tg = cp.LocalTarget()
    tg.compile(out, gv, gw)

    def value_at(a: np.ndarray, b: np.ndarray) -> float:
        tg.write(v, a)
        tg.write(w, b)
        tg.run()
        return float(tg.read(out))

    fd_v = finite_difference(lambda a: value_at(a, y0), x0)
    fd_w = finite_difference(lambda b: value_at(x0, b), y0)
    tg.write(v, x0)
    tg.write(w, y0)
    tg.run()
    np.testing.assert_allclose(tg.read(gv), fd_v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tg.read(gw), fd_w, rtol=1e-5, atol=1e-6)


def test_quaternion_rotation_gradient() -> None:
    angle = cp.value(0.4, cp.float64)
    q = cp.Quaternion.from_axis_angle([0.0, 1.0, 0.0], angle)
    p = q.rotate([1.0, 0.0, 0.0])
    y = p[0] * 2.0 + p[2]
    g = cp.grad(y, angle)
    tg = cp.LocalTarget()
    tg.compile(y, g)
    tg.run()
    # rotating (1,0,0) about y by a: (cos a, 0, -sin a) -> y = 2 cos a - sin a
    assert math.isclose(tg.read(g), -2 * math.sin(0.4) - math.cos(0.4), rel_tol=1e-9)
