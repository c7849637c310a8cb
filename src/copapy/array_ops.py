"""Sorting, convolution and pooling of traced arrays, as graph compositions of element-wise
operations (docs/decisions/2026-12-04-sort-convolve-pool-as-graph-compositions.md).

* ``sort``/``argsort``: one merge-sort stencil along the rows of a packed array (``argsort``,
  the values gathered by the permutation: ``pgather``; docs/decisions/
  2026-12-04-nd-strided-views-and-sort-stencil.md); short unpacked rows by Batcher's odd-even
  merge network of (value, index) compare-exchanges. Both stable, NaNs last (NumPy's order),
  the same on every CPU; the gradient of a sorted element goes to the element it came from
  (a permutation).
* ``convolve`` (1-D, modes full/same/valid): Σ over the kernel taps in increasing tap order
  of tap x shifted input; packed, one multiply-add of whole slices per tap.
* ``conv2d`` (scipy.signal.convolve2d), ``max_pool2d``/``avg_pool2d``: the same per kernel
  tap or window offset, on 2-D slices.

Every operation is one of the registry's, so gradients (cp.grad) and the cross-architecture
bit-identity of element-wise operations carry over.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from . import array_shapes as shp
from . import dtypes as dt
from .arrays import Array, _permute, asarray, elementwise, flat_array, stack_rows
from .graph import build
from .graph.errors import ShapeError
from .graph.lanes import reduce_in_lane_order
from .graph.node import const
from .graph.ops import REGISTRY
from .numpy_dispatch import register_numpy_function
from .value import Value, _op, wrap

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

MODES = ("full", "same", "valid")


@cache
def merge_network(n: int) -> tuple[tuple[int, int], ...]:
    """The compare-exchanges (i < j) of Batcher's odd-even merge sort of ``n`` elements (for
    any n: the comparators of the next power of two that stay inside [0, n))."""
    pairs: list[tuple[int, int]] = []
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return tuple(pairs)


def _after(a: Value[Any], ia: Any, b: Value[Any], ib: Any) -> Value[bool]:
    """Whether (a, ia) sorts after (b, ib): by value, NaN after every number, ties (and NaN
    beside NaN) by index."""
    later: Value[bool] = (b < a) | ((a == b) & (ib < ia))
    if a.dtype.is_float:
        a_nan, b_nan = a != a, b != b
        later = (later & ~b_nan) | (a_nan & ~b_nan) | (a_nan & b_nan & (ib < ia))
    return later


def _sorted_pairs(values: Sequence[Value[Any]]) -> tuple[list[Value[Any]], list[Any]]:
    items = list(values)
    index: list[Any] = [wrap(k) for k in range(len(items))]
    for i, j in merge_network(len(items)):
        swap = _after(items[i], index[i], items[j], index[j])
        items[i], items[j] = _op("where", swap, items[j], items[i]), _op("where", swap,
                                                                          items[i], items[j])
        index[i], index[j] = _op("where", swap, index[j], index[i]), _op("where", swap,
                                                                          index[i], index[j])
    return items, index


def _along(a: Array, axis: int, rows: Any) -> Array:
    """``rows`` (1-D arrays -> 1-D arrays of the same length) applied along ``axis``."""
    k = axis % a.ndim
    moved = _permute(a, (*[d for d in range(a.ndim) if d != k], k))
    last = moved.reshape(-1, moved.shape[-1])
    out = stack_rows([rows(last[r]) for r in range(last.shape[0])]).reshape(moved.shape)
    back = list(range(a.ndim - 1))
    back.insert(k, a.ndim - 1)
    result = _permute(out, tuple(back))
    return result.to_packed() if a.packed else result


def _sortable(x: Any, axis: int | None) -> tuple[Array, int]:
    """The array to sort and the axis (None: flattened, a scalar as one element)."""
    return (flat_array(x), 0) if axis is None else (asarray(x), axis)


def sort(x: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *,
         stable: Any = None) -> Array:
    """NumPy's ``np.sort``: ascending along ``axis`` (None: the flattened array), NaNs last,
    -0.0 and 0.0 equal and kept in their order (stable, as ``kind="stable"``); ``np.sort`` on
    a traced array calls it. ``kind``/``stable`` are accepted: the sort is always stable."""
    _no_order("sort", order)
    a, axis = _sortable(x, axis)
    if a.dtype.is_bool:  # NumPy sorts bools (False first): as int32 0/1
        return sort(a.astype(dt.int32), axis).astype(dt.bool_)
    if _by_network(a, axis):
        return _along(a, axis, lambda row: Array(row.shape, items=_sorted_pairs(row.items())[0]))
    return _along_last(a, axis, lambda node: build.make(
        REGISTRY["pgather"], (build.make(REGISTRY["argsort"], (node,)), node)))


def argsort(x: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *,
            stable: Any = None) -> Array:
    """NumPy's ``np.argsort(x, kind="stable")``: the int32 indices that sort ``x``."""
    _no_order("argsort", order)
    a, axis = _sortable(x, axis)
    if a.dtype.is_bool:
        return argsort(a.astype(dt.int32), axis)
    if _by_network(a, axis):
        return _along(a, axis, lambda row: Array(row.shape, items=[
            wrap(i).astype(dt.int32) for i in _sorted_pairs(row.items())[1]]))
    return _along_last(a, axis, lambda node: build.make(REGISTRY["argsort"], (node,)))


#: rows this long or shorter of an unpacked array sort by the compare-exchange network (its
#: elements stay scalars the compiler keeps in registers); longer rows and packed arrays by
#: the sort stencil (measured: benchmarks/bench_sort.py)
NETWORK_MAX = 8


def _by_network(a: Array, axis: int) -> bool:
    return not a.packed and a.shape[axis] <= NETWORK_MAX


def _along_last(a: Array, axis: int, rows: Any) -> Array:
    """``rows`` (a packed node -> a node of its shape, working along the last axis) applied
    along ``axis``: the sort stencils (stencils/include/cp_index.h), k rows in one call."""
    k = axis % a.ndim
    moved = _permute(a.to_packed(), (*[d for d in range(a.ndim) if d != k], k))
    out = Array(moved.shape, node=rows(moved.node()))
    back = list(range(a.ndim - 1))
    back.insert(k, a.ndim - 1)
    result = _permute(out, tuple(back))
    return result if a.packed else result.to_unpacked()


def _no_order(name: str, order: Any) -> None:
    if order is not None:
        raise TypeError(f"{name}(order={order!r}): copapy arrays have no fields to order by")


def _mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {', '.join(MODES)}")
    return mode


def _pair(a: Any, v: Any, name: str, ndim: int) -> tuple[Array, Array]:
    like = next((o.dtype for o in (a, v) if isinstance(o, Array | Value)), None)
    if ndim == 1:  # NumPy's array(a, ndmin=1): a number is one element
        a, v = (Array((1,), items=[o]) if isinstance(o, Value) else
                [o] if not isinstance(o, Array) and np.ndim(o) == 0 else o for o in (a, v))
    x, k = asarray(a, like), asarray(v, like)
    if x.ndim != ndim or k.ndim != ndim:
        raise ShapeError(f"{name} takes two {ndim}-D arrays, got shapes {x.shape} and {k.shape}")
    return x, k


def _tap_sum(terms: Sequence[Any]) -> Any:
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def convolve(a: Any, v: Any, mode: str = "full") -> Array:
    """NumPy's ``np.convolve``: Σ_j v[j]·a[k-j] over the taps j in increasing order. The
    outputs every tap reaches (NumPy's valid part) are one multiply-add of whole slices per
    tap; the edges of modes full and same are sums of the taps that reach them."""
    x, k = _pair(a, v, "convolve", 1)
    mode = _mode(mode)
    if k.size > x.size:  # NumPy swaps them (convolution commutes)
        x, k = k, x
    n, m = x.size, k.size
    taps = k.items()
    middle: Array = _tap_sum([taps[j] * x[m - 1 - j:n - j] for j in range(m)])
    if mode == "valid":
        return middle
    xs = x.items()

    def edge(out: int) -> Value[Any]:
        return wrap(_tap_sum([taps[j] * xs[out - j] for j in range(m) if 0 <= out - j < n]))

    start = 0 if mode == "full" else (m - 1) // 2
    stop = n + m - 1 if mode == "full" else start + n
    left = [edge(out) for out in range(start, m - 1)]
    right = [edge(out) for out in range(n, stop)]
    parts = ([Array((len(left),), items=left)] if left else []) + [middle] + (
        [Array((len(right),), items=right)] if right else [])
    return _concat(parts, x.packed or k.packed)


def _concat(parts: Sequence[Array], packed: bool) -> Array:
    if len(parts) == 1:
        return parts[0]
    total = sum(p.size for p in parts)
    if packed:
        nodes = [p.node() for p in parts]
        common = nodes[0].dtype
        return Array((total,), node=build.concat([build.cast(n, common) for n in nodes],
                                                 (total,)))
    return Array((total,), items=[v for p in parts for v in p.items()])


def conv2d(x: Any, kernel: Any, mode: str = "valid") -> Array:
    """``scipy.signal.convolve2d(x, kernel, mode)`` of two 2-D arrays: Σ over the kernel taps
    in row-major order of tap x the shifted input. The input's rows are laid end to end, so
    every tap's shifted input is one contiguous slice of them ("wide" rows that run on into
    the next row; those extra columns are computed and dropped): one multiply-add per tap,
    then one copy of the rows kept. Modes full and same pad the input with zeros first (packed:
    packed and unpacked inputs give the same bits)."""
    a, k = _pair(x, kernel, "conv2d", 2)
    mode = _mode(mode)
    (h, w), (kh, kw) = a.shape, k.shape
    if mode == "valid" and (kh > h or kw > w):
        raise ShapeError(f"conv2d(mode='valid'): the kernel {k.shape} is larger than the input "
                         f"{a.shape}; use mode='full' or 'same'")
    if mode != "valid":  # packed either way: an unpacked input would fold the zeros away
        a = _pad2d(a.to_packed(), kh - 1, kw - 1)  # (x*0 -> 0: other bits beside inf and -0)
    width = a.shape[1]
    oh, ow = a.shape[0] - kh + 1, width - kw + 1
    flat = a.flatten()
    span = (oh - 1) * width + ow
    taps = k.items()
    wide: Array = _tap_sum([taps[i * kw + j] * flat[(kh - 1 - i) * width + kw - 1 - j:][:span]
                            for i in range(kh) for j in range(kw)])
    top, left, rows, cols = 0, 0, oh, ow
    if mode == "same":  # scipy's: centred on the input
        top, left, rows, cols = (oh - h) // 2, (ow - w) // 2, h, w
    return stack_rows([wide[(top + r) * width + left:][:cols] for r in range(rows)])


def _pad2d(a: Array, ph: int, pw: int) -> Array:
    """Packed ``a`` with ``ph`` zero rows above and below and ``pw`` zero columns left and
    right."""
    h, w = a.shape
    shape = (h + 2 * ph, w + 2 * pw)

    def zeros(count: int) -> list[Any]:
        return [build.broadcast_to(const(0, a.dtype), (count,))] if count else []

    node = a.node()
    parts = zeros(ph * shape[1] + pw)
    for r in range(h):
        parts.append(build.slice_(build.reshape(node, (h * w,)), r * w, w))
        parts += zeros(2 * pw if r < h - 1 else pw + ph * shape[1])
    return Array(shape, node=build.concat(parts, shape))


def _windows(x: Any, size: int, stride: int | None, name: str) -> tuple[Array, list[Array]]:
    """The input and its size² strided views, one per window offset (row-major): view (i, j)
    holds element (i, j) of every window."""
    a = asarray(x)
    if a.ndim != 2:
        raise ShapeError(f"{name} takes a 2-D array (height, width), got shape {a.shape}")
    step = size if stride is None else stride
    if size < 1 or step < 1:
        raise ValueError(f"{name}: size and stride are >= 1, got size={size}, stride={step}")
    h, w = a.shape
    if size > h or size > w:
        raise ShapeError(f"{name}: the window {size}x{size} is larger than the input {a.shape}")
    oh, ow = (h - size) // step + 1, (w - size) // step + 1
    views = [a[i:i + step * (oh - 1) + 1:step, j:j + step * (ow - 1) + 1:step]
             for i in range(size) for j in range(size)]
    return a, views


def max_pool2d(x: Any, size: int, stride: int | None = None) -> Array:
    """The largest element of each ``size``x``size`` window (``stride`` defaults to ``size``;
    windows that do not fit are dropped, as in PyTorch); NaN if a window holds one. Argmax
    routing: the gradient goes to one largest element of each window, whole (among equal
    ones the first in the lane order of the window's elements, row-major)."""
    a, views = _windows(x, size, stride, "max_pool2d")

    def keep_larger(p: Array, q: Array) -> Array:
        """q where it is larger (or NaN), else p: a select, whose gradient is not split."""
        larger = q > p
        if a.dtype.is_float:
            larger = larger | (q != q)
        return elementwise("where", larger, q, p)

    out: Array = reduce_in_lane_order(views, keep_larger)
    return out


def avg_pool2d(x: Any, size: int, stride: int | None = None) -> Array:
    """The mean of each ``size``x``size`` window: its sum in the lane order of the window's
    elements (row-major; graph/lanes.py) divided by size²; int32 and bool inputs as float32."""
    a, views = _windows(x, size, stride, "avg_pool2d")
    if not a.dtype.is_float:
        views = [v.astype(dt.float32) for v in views]
    total: Array = reduce_in_lane_order(views, lambda p, q: p + q)
    return total / float(size * size)


def _sorted_rows(x: Any, axis: Any, name: str
                 ) -> tuple[Array, tuple[int, ...], tuple[int, ...]]:
    """The elements each output reduces (over ``axis``), sorted along the rows of a 2-D array
    (as floats: int32 and bool as float64, NumPy's type for them), and the output's shape with
    the reduced axes dropped and kept as 1 (keepdims)."""
    a = asarray(x)
    axes = shp.normalize_axes(axis, a.ndim, name)
    rest = tuple(k for k in range(a.ndim) if k not in axes)
    n = math.prod(a.shape[k] for k in axes)
    rows = _permute(a, (*rest, *axes)).reshape(-1, n)
    if not rows.dtype.is_float:
        rows = rows.astype(dt.float64)
    return (sort(rows, axis=-1), shp.kept_shape(a.shape, axes, False),
            shp.kept_shape(a.shape, axes, True))


def _no_numpy_extras(name: str, out: Any, method: str = "linear", weights: Any = None,
                     interpolation: Any = None) -> None:
    if out is not None:
        raise TypeError(f"np.{name}(out=...): copapy arrays are immutable; use the result")
    if method != "linear" or interpolation is not None or weights is not None:
        raise ValueError(f"np.{name} of traced values computes method='linear' (the default) "
                         f"without weights; got method={interpolation or method!r}"
                         f"{', weights' if weights is not None else ''}")


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None,
             interpolation: Any = None) -> Any:
    """NumPy's ``np.quantile`` (method 'linear'): of the sorted elements (cp.sort), the
    interpolation at (n - 1)·q between its neighbours, NumPy's formula; NaN if the elements
    hold one. ``q`` is constant (a number or an array: the result has its shape first)."""
    return _quantile(a, q, 1.0, "quantile", axis, keepdims, out, method, weights, interpolation)


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
               *, weights: Any = None, interpolation: Any = None) -> Any:
    """NumPy's ``np.percentile``: ``quantile`` at q / 100."""
    return _quantile(a, q, 100.0, "percentile", axis, keepdims, out, method, weights,
                     interpolation)


def _quantile(a: Any, q: Any, scale: float, name: str, axis: Any, keepdims: bool, out: Any,
              method: str, weights: Any, interpolation: Any) -> Any:
    _no_numpy_extras(name, out, method, weights, interpolation)
    if isinstance(q, Array | Value):
        raise TypeError(f"np.{name}: q must be constant (NumPy data known while tracing)")
    qs = np.asarray(q, dtype=np.float64) / scale
    if not np.all((qs >= 0) & (qs <= 1)):
        raise ValueError(f"np.{name}: {'Quantiles' if scale == 1 else 'Percentiles'} must be "
                         f"in the range [0, {scale:g}]")
    s, *shapes = _sorted_rows(a, axis, name)
    n = s.shape[1]
    columns = []
    for fraction in qs.reshape(-1):
        virtual = (n - 1) * float(fraction)
        below = n - 1 if virtual >= n - 1 else math.floor(virtual)
        above = n - 1 if virtual >= n - 1 else below + 1
        t = virtual - below
        low, high = s[:, below], s[:, above]
        diff = high - low  # NumPy's _lerp
        columns.append(high - diff * (1.0 - t) if t >= 0.5 else low + diff * t)
    return _shaped(columns, s, qs.shape, shapes[keepdims])


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    """NumPy's ``np.median``: the middle element of the sorted ones (cp.sort), or the mean of
    the middle two; NaN if the elements hold one."""
    _no_numpy_extras("median", out)
    s, *shapes = _sorted_rows(a, axis, "median")
    n = s.shape[1]
    middle = s[:, n // 2] if n % 2 else (s[:, n // 2 - 1] + s[:, n // 2]) / 2.0
    return _shaped([middle], s, (), shapes[keepdims])


def _shaped(columns: list[Any], s: Array, lead: tuple[int, ...], out: tuple[int, ...]) -> Any:
    """One column per q (each the rows' results) as NumPy's result: q's shape, then the
    output's; NaN where a row held one."""
    last = s[:, s.shape[1] - 1]
    whole = stack_rows(columns)
    if s.dtype.is_float:
        whole = elementwise("where", last != last, math.nan, whole)
    shape = (*lead, *out)
    if not shape:
        return whole.items()[0]
    return whole.reshape(shape)


register_numpy_function("numpy.sort", sort)
register_numpy_function("numpy.argsort", argsort)
register_numpy_function("numpy.convolve", convolve)
register_numpy_function("numpy.median", median)
register_numpy_function("numpy.percentile", percentile)
register_numpy_function("numpy.quantile", quantile)
