"""NumPy's functions that copapy computes on traced arrays with NumPy's conventions (argument
names, shapes, batches, result types): ``np.linalg.solve/inv/det/slogdet/cholesky/norm`` on
cp.linalg's unrolled eliminations, ``np.ptp``, and the lookups of lookup.py. Registered by
NumPy's module and name (numpy_dispatch.NUMPY_FUNCTIONS), so ``np.linalg.solve(A, b)`` inside
``@cp.jit`` and on cp.matrix values alike is ``cp.linalg.solve`` (docs/decisions/
2026-12-05-numpy-coverage-gaps.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import array_shapes as shp
from . import dtypes as dt
from . import linalg, lookup
from .array_shapes import MAX_NDIM
from .arrays import (
    Array,
    _broadcast,
    _build,
    _cast_operand,
    _permute,
    asarray,
    elementwise,
    flat_array,
    stack_rows,
    ufunc_method,
)
from .functions import log, sign, sqrt, where
from .graph.errors import ShapeError
from .numpy_dispatch import register_numpy_function
from .value import Value, constant, is_array, is_traced

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np


def _float_operands(*operands: Any) -> list[Array]:
    """The operands as arrays of NumPy's linalg result type: float32 if every traced operand
    is float32, else float64 (int32 and bool as float64, as NumPy's); constants are weak
    beside them (a float64 constant does not widen float32 values)."""
    traced = [o.dtype for o in operands if isinstance(o, Array | Value)]
    kind = dt.float32 if traced and all(k is dt.float32 for k in traced) else dt.float64
    arrays = [asarray(o, kind) for o in operands]
    return [a if a.dtype is kind else a.astype(kind) for a in arrays]


def _stack_of_squares(a: Array, name: str) -> int:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(f"np.linalg.{name}: the last 2 dimensions of the array must "
                                    f"be square, got shape {a.shape}")
    return a.shape[-1]


def _batched(batch: tuple[int, ...], one: Callable[[tuple[int, ...]], Any]) -> Any:
    """``one(index)`` for every index of the batch shape, stacked into the batch's shape (the
    result itself without a batch)."""
    if not batch:
        return one(())
    results = [one(tuple(int(i) for i in index)) for index in np.ndindex(*batch)]
    if isinstance(results[0], Value):
        return Array(batch, items=results)
    stacked = stack_rows(results)
    return stacked.reshape((*batch, *results[0].shape))


def _pick(a: Array, index: tuple[int, ...], batch: tuple[int, ...]) -> Array:
    """The matrix of ``a`` at ``index`` of the broadcast batch shape ``batch``."""
    own = a.shape[:a.ndim - 2]
    if not own:
        return a
    at = tuple(0 if d == 1 else i for i, d in zip(index[len(batch) - len(own):], own,
                                                  strict=True))
    picked: Array = a[at]
    return picked


def solve(a: Any, b: Any) -> Any:
    """``np.linalg.solve``: a (..., n, n); b (n,) (a vector for every matrix) or (..., n, k)
    (batches broadcast, as NumPy 2's)."""
    m, rhs = _float_operands(a, b)
    n = _stack_of_squares(m, "solve")
    if rhs.ndim == 1:
        if rhs.shape[0] != n:
            raise ValueError(f"np.linalg.solve: b of shape {rhs.shape} does not fit a of shape "
                             f"{m.shape} (b is (n,) or (..., n, k))")
        return _batched(m.shape[:-2], lambda i: linalg.solve(m[i] if i else m, rhs))
    if rhs.shape[-2] != n:
        raise ValueError(f"np.linalg.solve: b of shape {rhs.shape} does not fit a of shape "
                         f"{m.shape} (b is (n,) or (..., n, k))")
    batch = shp.broadcast_shape("np.linalg.solve", [m.shape[:-2], rhs.shape[:-2]])
    return _batched(batch, lambda i: linalg.solve(_pick(m, i, batch), _pick(rhs, i, batch)))


def inv(a: Any) -> Any:
    """``np.linalg.inv`` of a matrix or a stack of them."""
    (m,) = _float_operands(a)
    _stack_of_squares(m, "inv")
    return _batched(m.shape[:-2], lambda i: linalg.inv(m[i] if i else m))


def det(a: Any) -> Any:
    """``np.linalg.det`` of a matrix (a value) or a stack of them (an array)."""
    (m,) = _float_operands(a)
    _stack_of_squares(m, "det")
    return _batched(m.shape[:-2], lambda i: linalg.det(m[i] if i else m))


def slogdet(a: Any) -> tuple[Any, Any]:
    """``np.linalg.slogdet``: (sign, log|det|) from ``det`` (sign 0 and -inf when singular)."""
    d = det(a)
    return sign(d), log(abs(d))


def cholesky(a: Any, /, *, upper: bool = False) -> Any:
    """``np.linalg.cholesky``: lower L (upper=True: its transpose) of each matrix."""
    (m,) = _float_operands(a)
    _stack_of_squares(m, "cholesky")
    low = _batched(m.shape[:-2], lambda i: linalg.cholesky(m[i] if i else m))
    return low.swapaxes(-1, -2) if upper else low


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``np.linalg.norm`` with NumPy's orders: vectors None/2, 1, inf, -inf, 0 and any p;
    matrices 'fro', 1, -1, inf, -inf (2, -2 and 'nuc' need singular values: refused)."""
    (a,) = _float_operands(x)
    if axis is None:
        if ord is None:
            flat = a.flatten()
            result = sqrt((flat * flat).sum())
            return Array((1,) * a.ndim, items=[result]) if keepdims else result
        if a.ndim not in (1, 2):
            raise ValueError("np.linalg.norm: improper number of dimensions to norm")
        axis = tuple(range(a.ndim))
    axes = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
    picked = [shp.normalize_axes(k, a.ndim, "np.linalg.norm")[0] for k in axes]
    if len(picked) == 1:
        return _vector_norm(a, ord, picked[0], keepdims)
    if len(picked) == 2 and picked[0] != picked[1]:
        result = _matrix_norm(a, ord, picked[0], picked[1])
        if not keepdims:
            return result
        shape = [1 if k in picked else d for k, d in enumerate(a.shape)]
        return result.reshape(shape) if isinstance(result, Array) else Array(
            tuple(shape), items=[result])
    raise ValueError(f"np.linalg.norm(axis={axis!r}): one axis (vectors) or two distinct "
                     f"axes (matrices)")


def _vector_norm(a: Array, ord: Any, axis: int, keepdims: bool) -> Any:
    magnitude = abs(a)
    if ord is None or ord == 2:
        return sqrt((a * a).sum(axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"np.linalg.norm(ord={ord!r}): invalid norm order for vectors")
    if ord == math.inf:
        return magnitude.max(axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return magnitude.min(axis=axis, keepdims=keepdims)
    if ord == 0:
        return (a != 0).astype(a.dtype).sum(axis=axis, keepdims=keepdims)
    if ord == 1:
        return magnitude.sum(axis=axis, keepdims=keepdims)
    p = float(ord)
    return (magnitude ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


def _matrix_norm(a: Array, ord: Any, rows: int, cols: int) -> Any:
    if ord is None or ord == "fro":
        return sqrt((a * a).sum(axis=(rows, cols)))
    if ord in (1, -1):  # the largest (smallest) column sum
        sums = abs(a).sum(axis=rows)
        k = cols - 1 if cols > rows else cols
        return sums.max(axis=k) if ord == 1 else sums.min(axis=k)
    if ord in (math.inf, -math.inf):  # the largest (smallest) row sum
        sums = abs(a).sum(axis=cols)
        k = rows - 1 if rows > cols else rows
        return sums.max(axis=k) if ord > 0 else sums.min(axis=k)
    if ord in (2, -2, "nuc"):
        raise TypeError(f"np.linalg.norm(ord={ord!r}) of a matrix needs its singular values "
                        f"(an SVD), which copapy does not compute on traced values; ord='fro', "
                        f"1, -1, inf and -inf are supported")
    raise ValueError(f"np.linalg.norm(ord={ord!r}): invalid norm order for matrices")


def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """``np.linalg.vector_norm``: over ``axis`` (all axes without it) as one vector."""
    a = asarray(x)
    axes = shp.normalize_axes(axis, a.ndim, "np.linalg.vector_norm")
    rest = [k for k in range(a.ndim) if k not in axes]
    moved = _permute(a, (*rest, *axes)).reshape(*[a.shape[k] for k in rest], -1)
    result = norm(moved, ord, -1)
    if not keepdims:
        return result
    kept = shp.kept_shape(a.shape, axes, True)
    return result.reshape(kept) if isinstance(result, Array) else Array(kept, items=[result])


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """``np.linalg.matrix_norm``: of the last two axes."""
    return norm(x, ord, (-2, -1), keepdims)


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """``np.ptp``: max - min (over ``axis``)."""
    if out is not None:
        raise TypeError("np.ptp(out=...): copapy arrays are immutable; use the result")
    x = asarray(a)
    if x.dtype.is_bool:
        raise TypeError("np.ptp of bools: NumPy refuses it (bool subtraction is not defined); "
                        "cast first (np.ptp(a.astype(cp.int32)))")
    return x.max(axis=axis, keepdims=keepdims) - x.min(axis=axis, keepdims=keepdims)


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """``np.cumsum``: ``np.add.accumulate`` (of the flattened array without ``axis``), so bools
    count as int32 as NumPy's (its own code kept a lone bool a bool)."""
    _no_out("cumsum", dtype, out)
    return ufunc_method(np.add, "accumulate", flat_array(a) if axis is None else asarray(a),
                        axis=0 if axis is None else axis)


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """``np.cumprod``: ``np.multiply.accumulate``, as ``cumsum``."""
    _no_out("cumprod", dtype, out)
    return ufunc_method(np.multiply, "accumulate", flat_array(a) if axis is None else asarray(a),
                        axis=0 if axis is None else axis)


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None,
               neginf: Any = None) -> Any:
    """``np.nan_to_num``: NaN, +inf and -inf replaced (by default with 0 and the type's largest
    and smallest finite numbers); ints and bools unchanged. NumPy's own code saw an object
    array and returned the elements unchanged (NaN and inf stayed)."""
    a = asarray(x) if is_array(x) else x
    kind = a.dtype if isinstance(a, Array | Value) else None
    if kind is None or not kind.is_float:
        return a
    big = float(np.finfo(kind.name).max)
    high = big if posinf is None else float(posinf)
    low = -big if neginf is None else float(neginf)
    a = where(a != a, float(nan), a)
    return where(a == math.inf, high, where(a == -math.inf, low, a))


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = np._NoValue,
         append: Any = np._NoValue) -> Any:
    """``np.diff``: NumPy's own code, its object array of differences made a copapy array
    (it was returned as a NumPy object array, which compile() and jacobian() refuse); of
    bools: ``!=`` of neighbours as NumPy's (its own code, not seeing NumPy's bool type,
    subtracted them into -1, 0, 1)."""
    x = asarray(a) if is_array(a) else a
    if not (isinstance(x, Array) and x.dtype.is_bool):
        extras = {k: v for k, v in (("prepend", prepend), ("append", append))
                  if v is not np._NoValue}
        numpy_diff: Any = np.diff
        out = numpy_diff._implementation(a, n, axis, **extras)
        if isinstance(out, np.ndarray) and out.size == 0:
            raise ShapeError(f"np.diff(n={n}) of shape {np.shape(a)} along axis {axis} "
                                   f"is empty (shape {out.shape}): copapy arrays have at least "
                                   f"one element; take n below the axis' length")
        return asarray(out) if isinstance(out, np.ndarray) and out.dtype == object else out
    if prepend is not np._NoValue or append is not np._NoValue:
        raise TypeError("np.diff of bools with prepend= or append=: concatenate first "
                        "(np.concatenate) and take np.diff of the result")
    if n < 0:
        raise ValueError(f"np.diff: order must be non-negative but got {n}")
    k = shp.normalize_axes(axis, x.ndim, "np.diff")[0]
    for _ in range(n):
        head = tuple(slice(1, None) if d == k else slice(None) for d in range(x.ndim))
        tail = tuple(slice(None, -1) if d == k else slice(None) for d in range(x.ndim))
        x = x[head] != x[tail]
    return x


def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
              shape: Any = None, *, device: Any = None) -> Any:
    """``np.full_like`` of a traced array: a copapy array (item assignment works, cast into
    its type) of constants of a's type, ``fill_value`` cast as NumPy casts it (2.5 in an
    int32 array is 2). NumPy's own code made Python numbers of the fill
    as given: zeros_like of float32 came back int32, full_like(int32, 2.5) held 2.5."""
    kind = asarray(a).dtype if dtype is None else dt.as_dtype(dtype)
    if is_traced(fill_value):
        raise TypeError("np.full_like with a traced fill value: use np.zeros_like(a) + value "
                        "(or cp.where) so the value keeps its type")
    return _constants(asarray(a).shape if shape is None else shape, fill_value, kind)


def _constants(size: Any, fill_value: Any, kind: dt.DType) -> Any:
    """A copapy array of ``size`` of constants ``fill_value`` of ``kind``: item assignment
    casts into its type and its views are NumPy's (docs/semantics.md, "Item assignment");
    0-d or more than 4-D, a NumPy object array of copapy constants."""
    numbers = np.broadcast_to(np.asarray(fill_value).astype(kind.numpy), size)
    if 1 <= numbers.ndim <= MAX_NDIM and numbers.size:
        return _build(np.ascontiguousarray(numbers), tuple(int(d) for d in numbers.shape),
                      None, kind)
    out = np.empty(numbers.shape, dtype=object)
    for index, v in np.ndenumerate(numbers):
        out[index] = constant(v.item(), kind)
    return out


def zeros_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, *, device: Any = None) -> Any:
    """``np.zeros_like``: ``full_like(a, 0)``."""
    return full_like(a, 0, dtype, shape=shape)


def ones_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True,
              shape: Any = None, *, device: Any = None) -> Any:
    """``np.ones_like``: ``full_like(a, 1)``."""
    return full_like(a, 1, dtype, shape=shape)


def empty_like(prototype: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, *, device: Any = None) -> Any:
    """``np.empty_like``: zeros (NumPy leaves the elements unspecified; its own code gave
    None elements here, which nothing could compute with)."""
    return full_like(prototype, 0, dtype, shape=shape)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", *,
         device: Any = None, like: Any = None) -> Any:
    """``np.full(shape, v, like=x)`` of a traced ``x``: as ``np.full_like`` (constants
    whose elements item assignment replaces), of NumPy's type (that of v, or ``dtype``)."""
    if is_traced(fill_value):
        raise TypeError("np.full with a traced fill value: use np.zeros(shape, like=x) + value")
    given = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
    try:  # NumPy's types: float is float64, int is int64
        kind = dt.as_dtype(given)
    except (TypeError, ValueError) as error:
        raise TypeError(f"np.full/zeros/ones/empty(..., like=x) of NumPy type {given}: {error}; "
                        f"pass dtype=np.int32, np.float32 or np.float64") from None
    return _constants(shape, fill_value, kind)


def zeros(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None,
          like: Any = None) -> Any:
    """``np.zeros(shape, like=x)`` of a traced ``x`` (float64 by default, as NumPy's)."""
    return full(shape, 0, dtype)


def ones(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None,
         like: Any = None) -> Any:
    """``np.ones(shape, like=x)`` of a traced ``x``."""
    return full(shape, 1, dtype)


def empty(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None,
          like: Any = None) -> Any:
    """``np.empty(shape, like=x)``: zeros, as ``np.empty_like``."""
    return full(shape, 0, dtype)


def copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """``np.copyto(dst, src)`` into a copapy array: ``dst[...] = src`` (NumPy's broadcasting),
    refused as NumPy's 'same_kind' rule refuses (float into int32) unless casting="unsafe";
    ``where=`` a mask: cp.where(where, src, dst)."""
    if not isinstance(dst, Array):
        raise TypeError("np.copyto of traced values into a NumPy array: make the destination "
                        "traced (np.zeros(shape, like=x), or a copy of a copapy array)")
    if casting not in ("same_kind", "unsafe"):
        raise TypeError(f"np.copyto(casting={casting!r}) of copapy arrays: 'same_kind' or "
                        f"'unsafe'")
    rank = {"b": 0, "i": 1, "u": 1, "f": 2}
    kind = getattr(src, "dtype", None)
    letter = ("b" if kind.is_bool else "f" if kind.is_float else "i") if isinstance(
        kind, dt.DType) else np.asarray(src).dtype.kind
    target = "b" if dst.dtype.is_bool else "f" if dst.dtype.is_float else "i"
    if casting == "same_kind" and rank.get(letter, 3) > rank[target]:
        raise TypeError(f"Cannot cast array data from {letter!r} kind to {dst.dtype.name} "
                        f"according to the rule 'same_kind' (NumPy's np.copyto); pass "
                        f"casting='unsafe' or src.astype(dst.dtype)")
    if where is True:
        dst[...] = src
    else:  # src of dst's type first: an int32 dst does not go through float32
        dst[...] = elementwise("where", asarray(where), _cast_operand(src, dst.dtype), dst)


def _cycled(values: Any, n: int, name: str) -> Any:
    """``values`` flattened and repeated to ``n`` elements (np.putmask's and np.place's
    reading of the values): a copapy array, or a NumPy array of constants."""
    if isinstance(values, Value | Array):
        flat = flat_array(values)
        return flat[np.arange(n) % flat.size]
    data = np.ravel(values)
    if data.size == 0:
        raise ValueError(f"{name}: cannot insert from an empty array (NumPy's error)")
    return np.resize(data, n)


def _destination(a: Any, name: str) -> Array:
    if not isinstance(a, Array):
        raise TypeError(f"{name} of traced values into a NumPy array: make the destination "
                        f"traced (np.zeros(shape, like=x), or a copy of a copapy array)")
    return a


def putmask(a: Any, mask: Any, values: Any) -> None:
    """``np.putmask(a, mask, values)``: where ``mask`` (of a's shape) is true, element n of a
    takes ``values.flat[n % values.size]``; an item assignment (a constant mask: into the
    elements it picks; a traced one: a select of every element)."""
    dst = _destination(a, "np.putmask")
    if np.shape(mask) != dst.shape:
        raise ValueError(f"np.putmask: mask and data must be the same size (mask "
                         f"{np.shape(mask)}, data {dst.shape})")
    if is_traced(mask) and not np.size(values):
        return  # NumPy writes nothing from an empty value
    if not is_traced(mask):
        picked = np.asarray(mask, np.bool_)
        if picked.any():
            flat = _cycled(values, dst.size, "np.putmask")
            dst[picked] = flat.reshape(dst.shape)[picked]
        return
    flat = _cycled(values, dst.size, "np.putmask")
    new = flat.reshape(dst.shape) if isinstance(flat, Array) else _build(
        flat.reshape(dst.shape), dst.shape, None, None)
    dst[...] = elementwise("where", mask, _cast_operand(new, dst.dtype), dst)


def place(arr: Any, mask: Any, vals: Any) -> None:
    """``np.place(arr, mask, vals)``: the k-th element where a constant ``mask`` is true takes
    ``vals.flat[k % vals.size]``. A traced mask is refused unless ``vals`` is one value (which
    element takes which value would depend on the run-time count before it)."""
    dst = _destination(arr, "np.place")
    if np.size(mask) != dst.size:
        raise ValueError(f"np.place: mask and data must be the same size (mask "
                         f"{np.shape(mask)}, data {dst.shape})")
    if is_traced(mask):
        if np.size(vals) != 1:
            raise TypeError("np.place with a traced mask and several values: the k-th "
                            "selected element's value depends on how many are selected "
                            "before it, known only when the program runs; pass one value, "
                            "or np.putmask(a, mask, values) (element n takes values[n])")
        one = vals if isinstance(vals, Value) else vals.flatten()[0] if isinstance(
            vals, Array) else np.ravel(vals)[0]
        dst[...] = elementwise("where", mask.reshape(dst.shape), _cast_operand(
            one, dst.dtype), dst)
        return
    picked = np.asarray(mask, np.bool_).reshape(dst.shape)
    count = int(picked.sum())
    if count:
        dst[picked] = _cycled(vals, count, "np.place")


def _constant_indices(name: str) -> Callable[..., Any]:
    """NumPy's ``np.<name>`` with constant indices; traced indices refused by name."""
    def run(arr: Any, indices: Any, *args: Any, **kwargs: Any) -> Any:
        if is_traced(indices):
            raise TypeError(f"np.{name} with traced indices (an argsort or a computed index) "
                            f"picks elements known only when the program runs; for sorted "
                            f"values use np.sort(a, axis), else index with constant ints or "
                            f"select with cp.where(cond, a, b)")
        return getattr(np, name)._implementation(arr, indices, *args, **kwargs)
    return run


def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Any:
    """``np.count_nonzero``: the non-zero elements (over ``axis``), int32 (NumPy's intp)."""
    return (asarray(a) != 0).astype(dt.int32).sum(axis=axis, keepdims=keepdims)


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
            keepdims: bool = False) -> Any:
    """``np.average``: the mean, or Σ a·w / Σ w with weights of a's shape or (1-D, with an int
    axis) of that axis's length."""
    x = asarray(a)
    if weights is None:
        mean = x.mean(axis=axis, keepdims=keepdims)
        count = float(math.prod(x.shape[k] for k in shp.normalize_axes(axis, x.ndim,
                                                                         "average")))
        if not returned:
            return mean
        # the count as a Python number beside a scalar mean (the jit takes no 0-d array)
        return mean, (count if not np.shape(mean) else np.full(np.shape(mean), count,
                                                                np.float32))
    w = asarray(weights, x.dtype)
    if w.shape != x.shape:
        if w.ndim != 1 or not isinstance(axis, int) or w.shape[0] != x.shape[axis]:
            raise TypeError(f"np.average: weights of shape {w.shape} differ from a's {x.shape}; "
                            f"1-D weights need an int axis of their length")
        w = w.reshape([w.shape[0] if k == axis % x.ndim else 1 for k in range(x.ndim)])
    total = _broadcast(w, x.shape).sum(axis=axis, keepdims=keepdims)
    mean = (x * w).sum(axis=axis, keepdims=keepdims) / total
    return (mean, total) if returned else mean


def _nan_free(a: Any, fill: float) -> tuple[Array, Any]:
    """``a`` with its NaNs replaced by ``fill``, and the NaN mask (None for int32/bool)."""
    x = asarray(a)
    if not x.dtype.is_float:
        return x, None
    nan = x != x
    return elementwise("where", nan, fill, x), nan


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
           keepdims: bool = False) -> Any:
    """``np.nansum``: the sum with NaNs counted as zero."""
    _no_out("nansum", dtype, out)
    return _nan_free(a, 0.0)[0].sum(axis=axis, keepdims=keepdims)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False) -> Any:
    """``np.nanmean``: the mean of the elements that are not NaN (NaN if none is)."""
    _no_out("nanmean", dtype, out)
    x, nan = _nan_free(a, 0.0)
    if nan is None:
        return x.mean(axis=axis, keepdims=keepdims)
    count = (~nan).astype(x.dtype).sum(axis=axis, keepdims=keepdims)
    return x.sum(axis=axis, keepdims=keepdims) / count


def _nan_extreme(a: Any, axis: Any, keepdims: bool, largest: bool) -> Any:
    x, nan = _nan_free(a, -math.inf if largest else math.inf)
    found = x.max(axis=axis, keepdims=keepdims) if largest else x.min(axis=axis,
                                                                      keepdims=keepdims)
    if nan is None:
        return found
    return where(nan.all(axis=axis, keepdims=keepdims), math.nan, found)


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """``np.nanmax``: the largest element that is not NaN (NaN if all are)."""
    _no_out("nanmax", None, out)
    return _nan_extreme(a, axis, keepdims, True)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """``np.nanmin``: the smallest element that is not NaN (NaN if all are)."""
    _no_out("nanmin", None, out)
    return _nan_extreme(a, axis, keepdims, False)


def _no_out(name: str, dtype: Any, out: Any) -> None:
    if dtype is not None or out is not None:
        raise TypeError(f"np.{name} of traced arrays takes no dtype= or out= (cast first; "
                        f"arrays are immutable)")


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Any:
    """``np.isclose``: |a - b| <= atol + rtol·|b| where both are finite, a == b where not
    (equal NaNs with equal_nan=True)."""
    a, b = (v if is_traced(v) or np.ndim(v) == 0 else asarray(v) for v in (a, b))
    finite = isfinite_(a) & isfinite_(b)
    close = where(finite, abs(a - b) <= atol + rtol * abs(b), a == b)
    if equal_nan:
        close = close | ((a != a) & (b != b))
    return close


def isfinite_(x: Any) -> Any:
    """x - x is 0 exactly for finite x (NaN for inf and NaN)."""
    return (x - x) == 0


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Any:
    """``np.allclose``: every element isclose (a traced bool)."""
    close = isclose(a, b, rtol, atol, equal_nan)
    return close.all() if isinstance(close, Array) else close


def select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    """``np.select``: the first choice whose condition holds, else ``default`` (nested
    selects, the last condition innermost)."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"np.select: {len(condlist)} conditions for {len(choicelist)} choices; "
                         f"give one choice per condition")
    if len(condlist) == 0:
        raise ValueError("np.select needs at least one condition and choice")
    result = default
    for cond, choice in reversed(list(zip(condlist, choicelist, strict=True))):
        kind = getattr(cond, "dtype", None)
        if not (getattr(kind, "is_bool", False) or getattr(kind, "kind", "") == "b"
                or isinstance(cond, bool)):
            raise TypeError(f"np.select: conditions are bools (comparisons), got {cond!r}")
        result = where(cond, choice, result)
    return result


def piecewise(x: Any, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Any:
    """``np.piecewise`` with traced conditions: every piece computed on all of ``x`` (NumPy
    calls a function on the selected elements only, the same for element-wise functions) and
    selected, a later condition winning as NumPy's; one extra piece is the default (else 0)."""
    x = asarray(x)
    conds = [condlist] if isinstance(condlist, Array | Value) and getattr(
        condlist, "ndim", 0) == x.ndim else list(condlist)
    if len(funclist) not in (len(conds), len(conds) + 1):
        raise ValueError(f"np.piecewise: {len(funclist)} functions for {len(conds)} "
                         f"conditions; give one per condition, and at most one default")

    def piece(f: Any) -> Any:
        return f(x, *args, **kw) if callable(f) else f

    result: Any = piece(funclist[-1]) if len(funclist) > len(conds) else 0
    for cond, f in zip(conds, funclist, strict=False):
        result = where(cond, piece(f), result)
    return asarray(result).astype(x.dtype)


def isposinf(x: Any, out: Any = None) -> Any:
    """``np.isposinf``: x == +inf (False for ints and bools)."""
    _no_out("isposinf", None, out)
    return asarray(x) == math.inf


def isneginf(x: Any, out: Any = None) -> Any:
    """``np.isneginf``: x == -inf (False for ints and bools)."""
    _no_out("isneginf", None, out)
    return asarray(x) == -math.inf


def angle(z: Any, deg: bool = False) -> Any:
    """``np.angle`` of real numbers: π (180) where x < 0 or x is -0.0, else 0 (NaN for NaN),
    as NumPy's arctan2(0, x)."""
    x = _float_operands(z)[0]
    half = 180.0 if deg else math.pi
    negative = (x < 0) | ((x == 0) & (elementwise("copysign", 1.0, x) < 0))
    return where(x != x, x, asarray(where(negative, half, 0.0)).astype(x.dtype))


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None,
        fweights: Any = None, aweights: Any = None, *, dtype: Any = None) -> Any:
    """``np.cov`` without weights: the centred rows' products averaged over N - ddof (the
    variables are rows, columns with rowvar=False)."""
    if fweights is not None or aweights is not None or dtype is not None:
        raise TypeError("np.cov of traced arrays takes m, y, rowvar, bias and ddof; weights "
                        "and dtype= are not supported (scale the observations first)")
    x = _variables(m, rowvar)
    if y is not None:
        x = stack_rows([*(x._row(r) for r in range(x.shape[0])),
                        *(_variables(y, rowvar)._row(r) for r in range(
                            _variables(y, rowvar).shape[0]))])
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    centred = x - x.mean(axis=1, keepdims=True)
    c = (centred @ centred.T) * (1.0 / max(n - ddof, 0)) if n > ddof else (
        centred @ centred.T) / 0.0
    return c[0, 0] if c.shape == (1, 1) else c


def _variables(m: Any, rowvar: bool) -> Array:
    """The observations as a 2-D float array, one row per variable."""
    x = _float_operands(m)[0]
    if x.ndim > 2:
        raise ValueError(f"np.cov: m has {x.ndim} dimensions; at most 2 (variables by "
                         f"observations)")
    if x.ndim == 1:
        return x.reshape((1, x.shape[0]))
    return x if rowvar else x.T


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Any:
    """``np.corrcoef``: cov scaled by the standard deviations, clipped to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if not isinstance(c, Array):
        return c / c
    d = sqrt(Array((c.shape[0],), items=[c[i, i] for i in range(c.shape[0])]))
    scaled = c / d.reshape((c.shape[0], 1)) / d.reshape((1, c.shape[0]))
    return elementwise("min", 1.0, elementwise("max", -1.0, scaled))


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "numpy.linalg.solve": solve, "numpy.linalg.inv": inv, "numpy.linalg.det": det,
    "numpy.linalg.slogdet": slogdet, "numpy.linalg.cholesky": cholesky,
    "numpy.linalg.norm": norm, "numpy.linalg.vector_norm": vector_norm,
    "numpy.linalg.matrix_norm": matrix_norm, "numpy.ptp": ptp,
    "numpy.interp": lookup.interp, "numpy.searchsorted": lookup.searchsorted,
    "numpy.digitize": lookup.digitize, "numpy.histogram": lookup.histogram,
    "numpy.count_nonzero": count_nonzero, "numpy.average": average, "numpy.nansum": nansum,
    "numpy.nanmean": nanmean, "numpy.nanmax": nanmax, "numpy.nanmin": nanmin,
    "numpy.isclose": isclose, "numpy.allclose": allclose, "numpy.cumsum": cumsum,
    "numpy.cumprod": cumprod, "numpy.nan_to_num": nan_to_num, "numpy.diff": diff,
    "numpy.full_like": full_like, "numpy.zeros_like": zeros_like, "numpy.ones_like": ones_like,
    "numpy.empty_like": empty_like, "numpy.zeros": zeros, "numpy.ones": ones,
    "numpy.empty": empty, "numpy.full": full, "numpy.copyto": copyto, "numpy.putmask": putmask,
    "numpy.place": place, "numpy.take": lambda a, *args, **kwargs: asarray(a).take(
        *args, **kwargs),
    "numpy.take_along_axis": _constant_indices("take_along_axis"),
    "numpy.put_along_axis": _constant_indices("put_along_axis"), "numpy.select": select,
    "numpy.isposinf": isposinf,
    "numpy.isneginf": isneginf, "numpy.angle": angle, "numpy.cov": cov,
    "numpy.corrcoef": corrcoef, "numpy.piecewise": piecewise,
}
for _name, _function in _FUNCTIONS.items():
    register_numpy_function(_name, _function)
