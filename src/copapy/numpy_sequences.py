"""NumPy's functions of sampled sequences that signal-processing code calls on traced arrays:
``np.gradient`` (uniform spacing), ``np.unwrap`` and ``np.nanvar``/``np.nanstd``, written with
NumPy's own formulas on copapy's operations (NumPy's code failed on traced elements;
docs/decisions/2026-12-05-numpy-scan.md). Registered by module and name as
numpy_functions.py's."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import array_shapes as shp
from . import dtypes as dt
from .arrays import Array, asarray, elementwise
from .functions import sqrt, where
from .numpy_dispatch import register_numpy_function

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np


def _floats(a: Any) -> Array:
    """NumPy's float type of the result: float32 stays, int32 and bool become float64."""
    x = asarray(a)
    return x if x.dtype.is_float else x.astype(dt.float64)


def _along(x: Array, axis: int, start: int | None, stop: int | None) -> Array:
    """x[start:stop] along ``axis``."""
    key = tuple(slice(start, stop) if d == axis else slice(None) for d in range(x.ndim))
    part: Array = x[key]
    return part


def _join(parts: list[Array], axis: int) -> Array:
    """The parts concatenated along ``axis`` (NumPy's np.concatenate of their elements)."""
    concatenate: Any = np.concatenate  # of traced elements: a copapy array (value.py)
    joined: Array = concatenate(parts, axis=axis)
    return joined


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """``np.gradient`` with uniform spacing (none, or one number per axis): central
    differences inside, one-sided at the ends (``edge_order`` 1 or 2, NumPy's formulas)."""
    x = _floats(f)
    axes = shp.normalize_axes(axis, x.ndim, "np.gradient")
    if len(varargs) not in (0, 1, len(axes)) or any(np.ndim(h) for h in varargs):
        raise TypeError("np.gradient of traced arrays takes uniform spacing: no spacing or one "
                        "number per axis (arrays of coordinates are not supported)")
    steps = [float(h) for h in varargs] * (len(axes) if len(varargs) == 1 else 1) or [
        1.0] * len(axes)
    if edge_order not in (1, 2):
        raise ValueError("np.gradient: edge_order must be 1 or 2")
    results = [_gradient_along(x, k, h, edge_order) for k, h in zip(axes, steps, strict=True)]
    return results[0] if len(results) == 1 else tuple(results)


def _gradient_along(x: Array, k: int, h: float, edge_order: int) -> Array:
    n = x.shape[k]
    if n < edge_order + 1:
        raise ValueError(f"np.gradient: the axis {k} has {n} elements; edge_order={edge_order} "
                         f"needs at least {edge_order + 1}")

    def at(i: int) -> Array:
        return _along(x, k, i, i + 1 if i != -1 else None)

    if edge_order == 1:
        first = (at(1) - at(0)) / h
        last = (at(-1) - at(-2)) / h
    else:
        first = -1.5 / h * at(0) + 2.0 / h * at(1) - 0.5 / h * at(2)
        last = 0.5 / h * at(-3) - 2.0 / h * at(-2) + 1.5 / h * at(-1)
    if n == 2:
        return _join([first, last], k)
    inner = (_along(x, k, 2, None) - _along(x, k, None, -2)) / (2.0 * h)
    return _join([first, inner, last], k)


def unwrap(p: Any, discont: Any = None, axis: int = -1, *, period: float = 2 * math.pi) -> Any:
    """``np.unwrap``: jumps of more than ``discont`` (period/2) along ``axis`` removed by
    multiples of ``period`` (NumPy's steps: a remainder of the differences, their corrections
    cumulated)."""
    x = asarray(p)
    if not x.dtype.is_float:
        raise TypeError("np.unwrap of traced int32 or bool arrays: cast to floats first "
                        "(x.astype(np.float32))")
    k = shp.normalize_axes(axis, x.ndim, "np.unwrap")[0]
    dd = _along(x, k, 1, None) - _along(x, k, None, -1)
    limit = period / 2 if discont is None else discont
    high = period / 2
    ddmod: Any = elementwise("mod", dd + high, period) - high
    ddmod = where((ddmod == -high) & (dd > 0), high, ddmod)
    correct: Any = where(abs(dd) < limit, 0.0, ddmod - dd)
    rest = _along(x, k, 1, None) + correct.cumsum(axis=k)
    return _join([_along(x, k, None, 1), rest], k)


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
           keepdims: bool = False) -> Any:
    """``np.nanvar``: the variance of the elements that are not NaN (NaN if too few)."""
    return _nan_moment(a, axis, dtype, out, ddof, keepdims, "nanvar")


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
           keepdims: bool = False) -> Any:
    """``np.nanstd``: the square root of ``np.nanvar``."""
    return sqrt(_nan_moment(a, axis, dtype, out, ddof, keepdims, "nanstd"))


def _nan_moment(a: Any, axis: Any, dtype: Any, out: Any, ddof: Any, keepdims: bool,
                name: str) -> Any:
    if dtype is not None or out is not None:
        raise TypeError(f"np.{name} of traced arrays takes no dtype= or out=")
    x = _floats(a)
    nan = x != x
    kept = (~nan).astype(x.dtype)
    count = kept.sum(axis=axis, keepdims=True)
    clean: Any = where(nan, 0.0, x)
    mean = clean.sum(axis=axis, keepdims=True) / count
    centred: Any = where(nan, 0.0, x - mean)
    squares = (centred * centred).sum(axis=axis, keepdims=keepdims)
    n = kept.sum(axis=axis, keepdims=keepdims)
    dof = n - ddof
    return where(dof <= 0, math.nan, squares / dof)  # NumPy's NaN where too few remain


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "numpy.gradient": gradient, "numpy.unwrap": unwrap, "numpy.nanvar": nanvar,
    "numpy.nanstd": nanstd,
}
for _name, _function in _FUNCTIONS.items():
    register_numpy_function(_name, _function)
