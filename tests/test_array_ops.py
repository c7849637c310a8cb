"""cp.sort, cp.argsort, cp.convolve, cp.conv2d, cp.max_pool2d, cp.avg_pool2d against NumPy and
SciPy, packed and unpacked, traced by cp.jit and compiled into programs; their gradients
against finite differences of the NumPy reference; np.sort/np.argsort/np.convolve on traced
arrays dispatch to them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import scipy.signal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.array_ops import merge_network

from .support.checks import central_difference, examples

SETTINGS = settings(max_examples=examples(25), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("n", range(1, 13))
def test_merge_network_sorts_every_zero_one_input(n: int) -> None:
    """The 0-1 principle: a comparator network that sorts every 0/1 sequence sorts all."""
    pairs = merge_network(n)
    for bits in itertools.product((0, 1), repeat=n):
        v = list(bits)
        for i, j in pairs:
            assert i < j
            if v[i] > v[j]:
                v[i], v[j] = v[j], v[i]
        assert v == sorted(bits), (n, bits)


def run(*outs: Any) -> list[Any]:
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    return [np.asarray(tg.read(o)) for o in outs]


float_elements = st.floats(-10, 10, width=32) | st.sampled_from(
    [0.0, -0.0, 1.0, 1.0, float("nan"), float("inf"), -float("inf")])


@SETTINGS
@given(st.data())
def test_sort_and_argsort_match_numpy(data: st.DataObject) -> None:
    """Values equal to np.sort's (NaNs last; ±0 compare equal), indices exactly
    np.argsort(kind="stable")'s, along any axis; packed and unpacked give the same bits."""
    dtype = data.draw(st.sampled_from(["float32", "int32"]))
    elements = float_elements if dtype == "float32" else st.integers(-3, 3)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=6))
    x = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=elements))
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    bits = []
    for packed in (True, False):
        a = cp.value(x, packed=packed)
        got_sorted, got_index = run(cp.sort(a, axis=axis), cp.argsort(a, axis=axis))
        np.testing.assert_array_equal(got_sorted, np.sort(x, axis=axis))
        np.testing.assert_array_equal(got_index, np.argsort(x, axis=axis, kind="stable"))
        bits.append(got_sorted.tobytes() + got_index.tobytes())
    assert bits[0] == bits[1]


def test_numpy_functions_dispatch_on_traced_arrays() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(9).astype(np.float32)
    v = np.array([0.25, -1.0, 2.0], np.float32)
    s, i, c = cp.jit(lambda a, b: (np.sort(a), np.argsort(a), np.convolve(a, b, "same")))(x, v)
    np.testing.assert_array_equal(s, np.sort(x))
    np.testing.assert_array_equal(i, np.argsort(x, kind="stable"))
    np.testing.assert_allclose(c, np.convolve(x, v, "same"), rtol=1e-6, atol=1e-6)


@SETTINGS
@given(st.integers(1, 12), st.integers(1, 12), st.sampled_from(["full", "same", "valid"]),
       st.booleans(), st.data())
def test_convolve_matches_numpy(n: int, m: int, mode: str, packed: bool,
                                data: st.DataObject) -> None:
    a = data.draw(hnp.arrays(np.float32, n, elements=st.floats(-4, 4, width=32)))
    v = data.draw(hnp.arrays(np.float32, m, elements=st.floats(-4, 4, width=32)))
    (got,) = run(cp.convolve(cp.value(a, packed=packed), cp.value(v, packed=packed), mode))
    (other,) = run(cp.convolve(cp.value(a, packed=not packed), cp.value(v, packed=not packed),
                               mode))
    assert other.tobytes() == got.tobytes()  # packed and unpacked: the same bits
    want = np.convolve(a.astype(np.float64), v.astype(np.float64), mode)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * (1 + np.abs(v).sum() * 4))
    ints = (a * 4).astype(np.int32), (v * 4).astype(np.int32)
    (got_int,) = run(cp.convolve(cp.value(ints[0], packed=packed), ints[1], mode))
    np.testing.assert_array_equal(got_int, np.convolve(*ints, mode))


@SETTINGS
@given(hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=7),
       hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=3),
       st.sampled_from(["full", "same", "valid"]), st.booleans(), st.data())
def test_conv2d_matches_scipy(shape: tuple[int, int], kshape: tuple[int, int], mode: str,
                              packed: bool, data: st.DataObject) -> None:
    if mode == "valid" and (kshape[0] > shape[0] or kshape[1] > shape[1]):
        with pytest.raises(cp.ShapeError, match="larger than the input"):
            cp.conv2d(cp.value(np.zeros(shape, np.float32)), np.ones(kshape, np.float32), mode)
        return
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-4, 4, width=32)))
    k = data.draw(hnp.arrays(np.float32, kshape, elements=st.floats(-4, 4, width=32)))
    (got,) = run(cp.conv2d(cp.value(x, packed=packed), cp.value(k), mode))
    (other,) = run(cp.conv2d(cp.value(x, packed=not packed), cp.value(k), mode))
    assert other.tobytes() == got.tobytes()  # packed and unpacked: the same bits
    want = scipy.signal.convolve2d(x.astype(np.float64), k.astype(np.float64), mode)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def pool_reference(x: np.ndarray, size: int, stride: int, reduce: Callable[..., Any]) -> Any:
    oh, ow = (x.shape[0] - size) // stride + 1, (x.shape[1] - size) // stride + 1
    return np.array([[reduce(x[r * stride:r * stride + size, c * stride:c * stride + size])
                      for c in range(ow)] for r in range(oh)])


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.booleans(), st.data())
def test_pooling_matches_numpy(size: int, stride: int, packed: bool,
                               data: st.DataObject) -> None:
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=2, min_side=size, max_side=8))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-4, 4, width=32)))
    a = cp.value(x, packed=packed)
    got_max, got_avg = run(cp.max_pool2d(a, size, stride), cp.avg_pool2d(a, size, stride))
    b = cp.value(x, packed=not packed)  # the other form: the same bits
    other = run(cp.max_pool2d(b, size, stride), cp.avg_pool2d(b, size, stride))
    assert [o.tobytes() for o in other] == [got_max.tobytes(), got_avg.tobytes()]
    np.testing.assert_array_equal(got_max, pool_reference(x, size, stride, np.max))
    np.testing.assert_allclose(got_avg, pool_reference(x, size, stride, np.mean), rtol=1e-6,
                               atol=1e-6)


# ---- gradients: cp.grad against central differences of the NumPy reference (float64)


GRADIENT_CASES: dict[str, tuple[tuple[int, ...], Callable[[Any], Any], Callable[[Any], Any]]] = {
    "sort": ((7,), cp.sort, np.sort),
    "sort_axis0": ((4, 3), lambda a: cp.sort(a, axis=0), lambda a: np.sort(a, axis=0)),
    "convolve_full": ((6,), lambda a: cp.convolve(a, np.array([0.5, -1.0, 2.0])),
                      lambda a: np.convolve(a, [0.5, -1.0, 2.0])),
    "convolve_same_kernel": ((3,), lambda a: cp.convolve(np.arange(1.0, 7.0), a, "same"),
                             lambda a: np.convolve(np.arange(1.0, 7.0), a, "same")),
    "conv2d_same": ((5, 4), lambda a: cp.conv2d(a, np.array([[1.0, -2.0], [0.5, 3.0]]), "same"),
                    lambda a: scipy.signal.convolve2d(a, [[1.0, -2.0], [0.5, 3.0]], "same")),
    "convolve_valid": ((7,), lambda a: cp.convolve(a, np.array([0.5, -1.0, 2.0]), "valid"),
                       lambda a: np.convolve(a, [0.5, -1.0, 2.0], "valid")),
    "conv2d_full": ((4, 3), lambda a: cp.conv2d(a, np.array([[1.0, -2.0, 0.25]]), "full"),
                    lambda a: scipy.signal.convolve2d(a, [[1.0, -2.0, 0.25]], "full")),
    "conv2d_valid": ((5, 4), lambda a: cp.conv2d(a, np.array([[1.0], [-2.0], [0.5]]), "valid"),
                     lambda a: scipy.signal.convolve2d(a, [[1.0], [-2.0], [0.5]], "valid")),
    "max_pool2d_stride": ((7, 5), lambda a: cp.max_pool2d(a, 3, 2),
                          lambda a: pool_reference(a, 3, 2, np.max)),
    "max_pool2d": ((6, 4), lambda a: cp.max_pool2d(a, 2),
                   lambda a: pool_reference(a, 2, 2, np.max)),
    "avg_pool2d": ((5, 5), lambda a: cp.avg_pool2d(a, 2, 1),
                   lambda a: pool_reference(a, 2, 1, np.mean)),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
@pytest.mark.parametrize("packed", [False, True])
def test_gradients_against_finite_differences(name: str, packed: bool) -> None:
    shape, op, reference = GRADIENT_CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) * 0.37 - 1
    weights = rng.standard_normal(np.shape(reference(x)))
    a = cp.value(x, dtype=cp.float64, packed=packed)
    y = op(a)
    loss = (y * weights).sum()
    (got,) = run(cp.grad(loss, a))
    want = central_difference(lambda z: float((reference(z) * weights).sum()), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_sort_gradient_is_the_permutation() -> None:
    x = np.array([3.0, -1.0, 2.0, 2.0, 0.5], np.float32)
    a = cp.value(x)
    w = np.array([1.0, 10.0, 100.0, 1000.0, 10000.0], np.float32)
    (got,) = run(cp.grad((cp.sort(a) * w).sum(), a))
    want = np.zeros(5, np.float32)
    want[np.argsort(x, kind="stable")] = w
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("packed", [False, True])
def test_max_pool_gradient_routes_to_one_element(packed: bool) -> None:
    """Equal largest elements in a window: the whole gradient goes to the first of them
    (argmax routing), not split between them; NaN windows give NaN."""
    x = np.array([[1.0, 5.0, 2.0, 2.0], [5.0, 0.0, 2.0, 2.0]], np.float32)
    a = cp.value(x, packed=packed)
    pooled = cp.max_pool2d(a, 2)
    got_grad, got = run(cp.grad((pooled * np.array([[1.0, 10.0]], np.float32)).sum(), a),
                        pooled)
    np.testing.assert_array_equal(got, [[5.0, 2.0]])
    np.testing.assert_array_equal(got_grad, [[0, 1, 10, 0], [0, 0, 0, 0]])
    x[1, 3] = np.nan
    (with_nan,) = run(cp.max_pool2d(cp.value(x, packed=packed), 2))
    assert with_nan[0, 0] == 5.0 and np.isnan(with_nan[0, 1])


def test_errors_name_the_problem() -> None:
    v = cp.value(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="one of full, same, valid"):
        cp.convolve(v, [1.0], "circular")
    with pytest.raises(cp.ShapeError, match="two 1-D arrays"):
        cp.convolve(v, np.ones((2, 2)))
    with pytest.raises(cp.ShapeError, match="larger than the input"):
        cp.max_pool2d(cp.value(np.ones((2, 2), np.float32)), 3)
    with pytest.raises(TypeError, match="no fields"):
        np.sort(v, order="x")
