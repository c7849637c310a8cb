"""The fixed reduction order of copapy (the determinism contract of sums, dots and products).

Eight lanes: lane j accumulates the elements i ≡ j (mod 8) in increasing i, starting from
its first element; the L = min(n, 8) lanes present are combined by a fixed tree: (0,1) (2,3)
(4,5) (6,7), then (01,23) (45,67), then (0123,4567); a pair without its right member passes
the left one through. The array stencils (stencils/array.c) and the unpacked vectors use the
same order, so packed and unpacked results are bit-identical and equal on every CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
LANES = 8


def reduce_in_lane_order(items: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """Combine ``items`` (n >= 1) in the lane order, with any binary ``combine``."""
    if not items:
        raise ValueError("reduction of an empty array")
    lanes: list[T] = list(items[:LANES])
    for i in range(LANES, len(items)):
        lanes[i % LANES] = combine(lanes[i % LANES], items[i])
    while len(lanes) > 1:
        lanes = [combine(lanes[k], lanes[k + 1]) if k + 1 < len(lanes) else lanes[k]
                 for k in range(0, len(lanes), 2)]
    return lanes[0]


def np_reduce(np: Any, a: Any, op: str) -> Any:
    """Lane-order reduction of a NumPy array along its last axis (vectorised over the rest)."""
    a = np.asarray(a)
    n = a.shape[-1]
    if n == 0:
        raise ValueError("reduction of an empty array")
    combine = _NP_COMBINE[op]
    items = [a[..., i] for i in range(n)]
    with np.errstate(all="ignore"):
        return reduce_in_lane_order(items, lambda x, y: combine(np, x, y))


def exact(np: Any, x: Any) -> Any:
    """float32 values as float64 (exactly) for a comparison: NumPy's float32 loops on armv7
    run on NEON, which flushes subnormals (NumPy 1.24 there: -0.0 == 1e-45); float64 has no
    NEON form, and every float32 is a normal float64."""
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype == np.float32 else x


def np_compare(ufunc: str) -> Callable[[Any, Any, Any], Any]:
    """The NumPy comparison ``ufunc`` on exact operands."""
    return lambda np, x, y: getattr(np, ufunc)(exact(np, x), exact(np, y))


def np_min(np: Any, x: Any, y: Any) -> Any:
    """x if it is NaN or smaller, else y (the C stencils' choice; -0.0 and 0.0 give y)."""
    if x.dtype.kind != "f":
        return np.minimum(x, y)
    return np.where(np.isnan(x) | np.less(exact(np, x), exact(np, y)), x, y)


def np_max(np: Any, x: Any, y: Any) -> Any:
    """x if it is NaN or larger, else y (the C stencils' choice; 0.0 and -0.0 give y)."""
    if x.dtype.kind != "f":
        return np.maximum(x, y)
    return np.where(np.isnan(x) | np.greater(exact(np, x), exact(np, y)), x, y)


_NP_COMBINE: dict[str, Callable[[Any, Any, Any], Any]] = {
    "sum": lambda np, x, y: (x + y).astype(x.dtype),
    "min": np_min,
    "max": np_max,
}


def np_dot(np: Any, a: Any, b: Any) -> Any:
    """Σ a_i·b_i over the last axis in lane order (products rounded to the element type)."""
    with np.errstate(all="ignore"):
        return np_reduce(np, (np.asarray(a) * np.asarray(b)).astype(np.result_type(a, b)), "sum")


def np_matvec(np: Any, m: Any, v: Any) -> Any:
    return np_dot(np, m, v[None, :])


def np_vecmat(np: Any, v: Any, m: Any) -> Any:
    return np_dot(np, m.T, v[None, :])


def np_matmul(np: Any, a: Any, b: Any) -> Any:
    return np_dot(np, a[:, None, :], b.T[None, :, :])
