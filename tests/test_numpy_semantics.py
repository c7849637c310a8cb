"""NumPy's semantics on copapy arrays, against NumPy: axis/keepdims reductions, broadcasting,
N-D arrays (up to 4-D), traced by cp.jit and compiled into a program (cp.LocalTarget).

Float sums and products are compared bit for bit with the documented lane order
(graph/lanes.py: each output reduces its group, row-major over the reduced axes, in that
order) and to NumPy's own sum within float32 rounding; packed and unpacked agree bit for bit.
"""

from __future__ import annotations

from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arrays import elementwise as apply
from copapy.graph.lanes import np_reduce
from copapy.graph.ops import REGISTRY

from .support.checks import central_difference, examples
from .support.registry_ops import elementwise

REDUCTIONS = ("sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin")
SETTINGS = settings(max_examples=examples(30), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def arrays(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    if dtype == "float32":
        elements: st.SearchStrategy[Any] = st.floats(-8, 8, width=32) | st.sampled_from(
            [0.0, -0.0, 1.0, 0.5])
    elif dtype == "int32":
        elements = st.integers(-5, 5) | st.sampled_from([2**31 - 1, -(2**31)])
    else:
        elements = st.booleans()
    return hnp.arrays(np.dtype(dtype), shape, elements=elements)


shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


def axis_args(data: st.DataObject, ndim: int) -> Any:
    kind = data.draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return data.draw(st.integers(-ndim, ndim - 1))
    picked = data.draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                                unique=True))
    return tuple(picked)


def lane_reference(x: np.ndarray, name: str, axis: Any, keepdims: bool) -> Any:
    """The documented order: the reduced axes moved last (row-major), lane order over them."""
    axes = tuple(range(x.ndim)) if axis is None else tuple(
        a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,)))
    rest = [k for k in range(x.ndim) if k not in axes]
    moved = x.transpose(*rest, *sorted(axes)).reshape(*[x.shape[k] for k in rest], -1)
    op = {"sum": "sum", "max": "max", "min": "min"}[name]
    out = np.asarray(np_reduce(np, moved, op))
    if keepdims:
        out = out.reshape([1 if k in axes else d for k, d in enumerate(x.shape)])
    return out


def numpy_value(x: np.ndarray, name: str, axis: Any, keepdims: bool) -> Any:
    kw: dict[str, Any] = {"keepdims": keepdims}
    if name in ("argmax", "argmin"):
        return getattr(np, name)(x, axis=axis, **kw).astype(np.int32)
    if name in ("sum", "prod") and x.dtype == np.int32:
        kw["dtype"] = np.int32  # wraps as copapy's int32 does
    return getattr(np, name)(x, axis=axis, **kw)


def compare(got: Any, x: np.ndarray, name: str, axis: Any, keepdims: bool) -> None:
    want = numpy_value(x, name, axis, keepdims)
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    if x.dtype == np.float32 and name in ("sum", "max", "min"):
        # the documented order bit for bit, NumPy's own (pairwise) sum within rounding
        ref = lane_reference(x, name, axis, keepdims)
        assert got.astype(np.float32).tobytes() == ref.astype(np.float32).tobytes(), (got, ref)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * x.size)
    elif got.dtype.kind == "f":
        # int32 means are float32 sums (docs): their rounding scales with the largest element
        scale = float(np.abs(x.astype(np.float64)).max()) if x.dtype == np.int32 else 0.0
        np.testing.assert_allclose(got, want, rtol=1e-5,
                                   atol=1e-4 * x.size + scale * x.size * 2.0**-23)
    else:
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))


def reduction_case(data: st.DataObject) -> tuple[np.ndarray, str, Any, bool]:
    name = data.draw(st.sampled_from(REDUCTIONS))
    dtypes = ["float32", "int32", "bool"] if name in ("any", "all", "argmax", "argmin") else \
        ["float32", "int32"]
    dtype = data.draw(st.sampled_from(dtypes))
    x = data.draw(arrays(dtype, data.draw(shapes)))
    if name in ("argmax", "argmin"):
        axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    else:
        axis = axis_args(data, x.ndim)
    return x, name, axis, data.draw(st.booleans())


def call(x: Any, name: str, axis: Any, keepdims: bool) -> Any:
    return getattr(x, name)(axis=axis, keepdims=keepdims)


@SETTINGS
@given(st.data())
def test_axis_reductions_jit(data: st.DataObject) -> None:
    """cp.jit traces the reduction on a packed input; np.<name>(x, axis=...) dispatches."""
    x, name, axis, keepdims = reduction_case(data)
    via_numpy = data.draw(st.booleans())
    if via_numpy:
        def fn(a: Any) -> Any:
            return getattr(np, name)(a, axis=axis, keepdims=keepdims)
    else:
        def fn(a: Any) -> Any:
            return call(a, name, axis, keepdims)
    compare(cp.jit(fn)(x), x, name, axis, keepdims)


@SETTINGS
@given(st.data())
def test_axis_reductions_program_packed_and_unpacked(data: st.DataObject) -> None:
    """Compiled into a program (LocalTarget) from inputs, packed and unpacked: the same bits."""
    x, name, axis, keepdims = reduction_case(data)
    results = []
    for packed in (True, False):
        a = cp.value(x, packed=packed)
        out = call(a, name, axis, keepdims)
        tg = cp.LocalTarget()
        tg.compile(out)
        tg.run()
        got = np.asarray(tg.read(out))
        compare(got, x, name, axis, keepdims)
        results.append(got)
    assert results[0].tobytes() == results[1].tobytes()


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
          "lt": np.less}


@SETTINGS
@given(st.data())
def test_broadcasting(data: st.DataObject) -> None:
    """Every element-wise operation broadcasts as NumPy does (shapes up to 4-D), exactly."""
    name = data.draw(st.sampled_from(sorted(BINARY)))
    dtype = data.draw(st.sampled_from(["float32", "int32"]))
    bshapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=4,
                                                          max_side=4))
    x, y = (data.draw(arrays(dtype, s)) for s in bshapes.input_shapes)
    with np.errstate(all="ignore"):
        want = BINARY[name](x, y)
    op = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "max": np.maximum, "lt": lambda a, b: a < b}[name]
    mode = data.draw(st.sampled_from(["jit", "packed", "unpacked", "mixed"]))
    if mode == "jit":
        got = np.asarray(cp.jit(op)(x, y))
    else:
        a = cp.value(x, packed=mode != "unpacked")
        b = cp.value(y, packed=mode == "packed")
        out = op(a, b)
        assert out.shape == want.shape
        tg = cp.LocalTarget()
        tg.compile(out)
        tg.run()
        got = np.asarray(tg.read(out))
    assert got.shape == want.shape
    if name == "max" and dtype == "float32":  # copapy's max(0.0, -0.0) picks one zero
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_equal(got.view(np.uint8), want.astype(got.dtype).view(np.uint8))


@SETTINGS
@given(st.data())
def test_nd_transpose_and_indexing(data: st.DataObject) -> None:
    """N-D arrays: .T, transpose(perm), integer and slice indexing, packed and unpacked."""
    x = data.draw(arrays("float32", data.draw(hnp.array_shapes(min_dims=2, max_dims=4,
                                                               max_side=4))))
    perm = tuple(data.draw(st.permutations(range(x.ndim))))
    i = data.draw(st.integers(0, x.shape[0] - 1))
    stop = data.draw(st.integers(i + 1, x.shape[0]))
    j = data.draw(st.integers(0, x.shape[1] - 1))
    for packed in (True, False):
        a = cp.value(x, packed=packed)
        outs = [a.T, a.transpose(perm), a[i], a[i:stop], a[i:stop, j], a[:, j]]
        wants = [x.T, x.transpose(perm), x[i], x[i:stop], x[i:stop, j], x[:, j]]
        tg = cp.LocalTarget()
        tg.compile(*outs)
        tg.run()
        for out, want in zip(outs, wants, strict=True):
            assert out.shape == want.shape
            np.testing.assert_array_equal(np.asarray(tg.read(out)), want)


def test_image_with_channels() -> None:
    """A (batch, height, width, channels) image: per-channel means and a broadcast scale."""
    rng = np.random.default_rng(1)
    img = rng.random((2, 5, 6, 3), dtype=np.float32)
    scale = np.array([0.5, 2.0, 4.0], np.float32)
    got_mean, got_scaled = cp.jit(lambda im, s: (im.mean(axis=(0, 1, 2)), im * s))(img, scale)
    np.testing.assert_allclose(got_mean, img.mean(axis=(0, 1, 2)), rtol=1e-6)
    np.testing.assert_array_equal(got_scaled, img * scale)


def test_axis_errors_name_the_problem() -> None:
    a = cp.value(np.zeros((2, 3), np.float32))
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        a.sum(axis=2)
    with pytest.raises(ValueError, match="repeated"):
        a.sum(axis=(0, 0))
    with pytest.raises(TypeError, match="axis= and keepdims= only"):
        a.sum(where=True)
    with pytest.raises(TypeError, match="one axis"):
        a.argmax(axis=(0, 1))
    with pytest.raises(cp.ShapeError, match="do not broadcast"):
        _ = a + cp.value(np.zeros((2,), np.float32))
    with pytest.raises(cp.ShapeError, match="1 to 4 dimensions"):
        cp.value(np.zeros((1, 1, 1, 1, 2), np.float32))


def test_jit_takes_and_returns_nd() -> None:
    """cp.jit: a 3-D nested list as an argument, a 3-D NumPy constant as a result; a 5-D
    sequence is refused naming the limit."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(cp.jit(lambda a: a * 2.0)(x.tolist()), x * 2)
    const = np.ones((2, 2, 2), np.float32)
    _, got = cp.jit(lambda a: (a, const))(1.0)
    np.testing.assert_array_equal(got, const)
    with pytest.raises(TypeError, match="1-D to 4-D"):
        cp.jit(lambda a: a)(np.zeros((1, 1, 1, 1, 2)).tolist())


#: every element-wise registry operation of two or three operands, on float32 or int32
BROADCAST_OPS = sorted({(n, d) for d in ("float32", "int32")
                        for arity in (2, 3) for n in elementwise(arity=arity, dtype=d,
                                                                  cast=False)})


@pytest.mark.parametrize(("name", "dtype"), BROADCAST_OPS)
@settings(max_examples=examples(6), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_elementwise_operation_broadcasts(name: str, dtype: str,
                                                data: st.DataObject) -> None:
    """Broadcast operands give the bits of the same operation on operands NumPy broadcast
    beforehand (np.broadcast_to), packed and unpacked: broadcasting only repeats elements."""
    arity = REGISTRY[name].arity
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=arity, min_dims=1,
                                                         max_dims=4, max_side=3))
    kind = "bool" if name == "where" else dtype
    xs = [data.draw(arrays(kind if (name == "where" and k == 0) else dtype, s))
          for k, s in enumerate(shapes.input_shapes)]
    full = [np.ascontiguousarray(np.broadcast_to(x, shapes.result_shape)) for x in xs]
    packed = data.draw(st.booleans())
    out = apply(name, *[cp.value(x, packed=packed) for x in xs])
    want = apply(name, *[cp.value(x, packed=packed) for x in full])
    assert out.shape == want.shape == shapes.result_shape
    got, expected = (np.asarray(v) for v in run_all(out, want))
    assert got.tobytes() == expected.tobytes() or (
        got.dtype.kind == "f" and np.array_equal(got, expected, equal_nan=True))


def run_all(*outs: Any) -> list[Any]:
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    return [tg.read(o) for o in outs]


@pytest.mark.parametrize("packed", [True, False])
def test_gradients_through_axes_broadcasting_and_transposes(packed: bool) -> None:
    """cp.grad through axis reductions, a broadcast operand and an N-D transpose, against
    central differences (packed: the axis moves are level gathers whose adjoints are the
    inverse gathers; when they were concatenated transposed blocks, those handing their gradient
    back in their own shape raised a ShapeError)."""
    rng = np.random.default_rng(5)
    x, b, w = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 1)), rng.standard_normal(
        (3, 5))

    def f(x: Any, b: Any) -> Any:
        return (((x * b).sum(axis=1) * w).sum() + x.max(axis=(0, 2)).sum()
                + x.transpose(2, 0, 1)[1].sum())

    xs, bs = cp.value(x, dtype=cp.float64, packed=packed), cp.value(b, dtype=cp.float64,
                                                                    packed=packed)
    gx, gb = cp.grad(f(xs, bs), [xs, bs])
    got_x, got_b = run_all(gx, gb)
    np.testing.assert_allclose(got_x, central_difference(lambda z: f(z, b), x), atol=1e-6)
    np.testing.assert_allclose(got_b, central_difference(lambda z: f(x, z), b), atol=1e-6)
