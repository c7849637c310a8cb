"""Shape arithmetic of NumPy's rules, on index tables: broadcasting, axis arguments, axis
moves. Pure functions of shapes (no graph nodes): arrays.py turns their index tables into
views, copies and reductions."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .graph.errors import ShapeError

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

#: the most dimensions a copapy array has (images with channels and a batch: 4)
MAX_NDIM = 4


def broadcast_shape(name: str, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy's broadcast shape of ``shapes``, or a ShapeError naming the operation."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"{name}: shapes {' and '.join(str(s) for s in shapes)} do not "
                         f"broadcast (NumPy's rule: trailing dimensions equal or 1)") from None


def broadcast_indices(shape: tuple[int, ...], target: tuple[int, ...]) -> Any:
    """The flat source index of every element (row-major) of ``shape`` broadcast to
    ``target``."""
    return np.broadcast_to(np.arange(math.prod(shape)).reshape(shape), target).reshape(-1)


def broadcast_levels(shape: tuple[int, ...], target: tuple[int, ...]) -> list[tuple[int, int]]:
    """``shape`` broadcast to ``target`` as levels (count, step) over its row-major elements:
    one per target axis, step 0 where the axis repeats (a dimension of 1 or missing)."""
    padded = (1,) * (len(target) - len(shape)) + tuple(shape)
    strides = [math.prod(padded[k + 1:]) for k in range(len(padded))]
    return [(n, 0 if d == 1 else s) for n, d, s in zip(target, padded, strides, strict=True)]


def normalize_axes(axis: Any, ndim: int, name: str) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints; negative counts from the end) as sorted
    distinct axes; None is every axis."""
    if axis is None:
        return tuple(range(ndim))
    given = axis if isinstance(axis, tuple | list) else (axis,)
    out: list[int] = []
    for a in given:
        try:
            k = operator.index(a)
        except TypeError:
            raise TypeError(f"{name}(axis={axis!r}): an axis is an int or a tuple of "
                            f"ints") from None
        if not -ndim <= k < ndim:
            raise np.exceptions.AxisError(f"{name}(axis={axis!r}): axis {k} is out of bounds "
                                          f"for an array of {ndim} dimensions")
        k %= ndim
        if k in out:
            raise ValueError(f"{name}(axis={axis!r}): axis {k} is repeated")
        out.append(k)
    return tuple(sorted(out))


def kept_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    """The shape of a reduction over ``axes``: those dimensions dropped, or 1 (keepdims)."""
    if keepdims:
        return tuple(1 if k in axes else d for k, d in enumerate(shape))
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def moved_to_end(shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """The flat source indices of the array with ``axes`` moved to the end (in order): row r
    of the result reshaped to (-1, Π shape[axes]) lists the elements one output reduces."""
    rest = [k for k in range(len(shape)) if k not in axes]
    order = np.arange(math.prod(shape)).reshape(shape).transpose(*rest, *axes)
    return order.reshape(-1)


def permuted_shape(shape: tuple[int, ...], axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(shape[k] for k in axes)


def strided_levels(shape: tuple[int, ...], keys: Sequence[int | slice]
                   ) -> tuple[int, list[tuple[int, int]], tuple[int, ...]]:
    """``array[keys]`` of a row-major array of ``shape`` (``keys``: an in-range int or a slice
    per leading axis, the rest whole) as flat indices ``start + Σ i·step`` over one level
    (count, step) per sliced axis, and the result's shape."""
    strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    start = 0
    levels: list[tuple[int, int]] = []
    out: list[int] = []
    for k, dim in enumerate(shape):
        key = keys[k] if k < len(keys) else slice(None)
        if isinstance(key, slice):
            first, stop, step = key.indices(dim)
            count = len(range(first, stop, step))
            if not count:
                raise IndexError("empty slice: arrays have at least one element")
            start += first * strides[k]
            levels.append((count, step * strides[k]))
            out.append(count)
        else:
            start += key * strides[k]
    return start, levels, tuple(out)
