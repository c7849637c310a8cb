"""Vectors and matrices of traced values, in two forms.

* **unpacked** (scalar form): one scalar node per element. Constant folding and sparsity
  work per element (multiplying by a zero element removes that branch).
* **packed**: one array node; the compiler uses loop stencils that the C compiler
  vectorised, and compile time does not grow with the element count.

``packed=None`` picks packed above ``PACK_THRESHOLD`` elements. Reductions (sum, dot, @)
use one fixed order in both forms (graph/lanes.py), so both forms give bit-identical results.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from . import dtypes as dt
from .graph import build
from .graph.lanes import reduce_in_lane_order
from .graph.node import Node, const, const_array, fresh_array_input
from .graph.ops import REGISTRY
from .value import Value, _node, is_array, wrap

PACK_THRESHOLD = 64


def _auto_packed(packed: bool | None, size: int) -> bool:
    return size > PACK_THRESHOLD if packed is None else bool(packed)


class Array:
    """A vector (1-D) or matrix (2-D) of traced values. Use ``cp.vector`` / ``cp.matrix``."""

    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, shape: tuple[int, ...], items: list[Value[Any]] | None = None,
                 node: Node | None = None) -> None:
        if (items is None) == (node is None):
            raise ValueError("an Array holds either items (unpacked) or a node (packed)")
        if any(d < 1 for d in shape):
            raise ValueError(f"array dimensions must be >= 1, got shape {shape}")
        self.shape = tuple(shape)
        self._items = items
        self._node = node

    # ---- construction helpers --------------------------------------------------------------

    @staticmethod
    def _from_node(node: Node) -> Array | Value[Any]:
        if not node.shape:
            return Value(node)
        return Array(node.shape, node=node)

    @property
    def packed(self) -> bool:
        return self._node is not None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> dt.DType:
        if self._node is not None:
            return self._node.dtype
        assert self._items is not None
        return self._items[0].dtype

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        form = "packed" if self.packed else "unpacked"
        kind = "vector" if self.ndim == 1 else "matrix"
        return f"<copapy {kind} {self.shape} {self.dtype.name} {form}>"

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a traced copapy array is not known while tracing; "
                        "use cp.where(cond, a, b) element-wise")

    def items(self) -> list[Value[Any]]:
        """The elements as scalar values (row-major); views of a packed array."""
        if self._items is not None:
            return list(self._items)
        assert self._node is not None
        return [Value(build.index(self._node, i)) for i in range(self.size)]

    def node(self) -> Node:
        """The packed array node (packing an unpacked array: one store per element)."""
        if self._node is not None:
            return self._node
        assert self._items is not None
        nodes = [v.node for v in self._items]
        common = nodes[0].dtype
        for n in nodes[1:]:
            common = dt.promote(common, n.dtype)
        return build.stack([build.cast(n, common) for n in nodes], self.shape)

    def to_packed(self) -> Array:
        return self if self.packed else Array(self.shape, node=self.node())

    def to_unpacked(self) -> Array:
        return self if not self.packed else Array(self.shape, items=self.items())

    def nodes(self) -> list[Node]:
        """What the compiler computes for this array."""
        if self._node is not None:
            return [self._node]
        return [v.node for v in self.items()]

    # ---- element-wise operations -----------------------------------------------------------

    def _binary(self, name: str, other: Any, reverse: bool = False) -> Array:
        return elementwise(name, other, self) if reverse else elementwise(name, self, other)

    def __add__(self, o: Any) -> Array:
        return self._binary("add", o)

    def __radd__(self, o: Any) -> Array:
        return self._binary("add", o, True)

    def __sub__(self, o: Any) -> Array:
        return self._binary("sub", o)

    def __rsub__(self, o: Any) -> Array:
        return self._binary("sub", o, True)

    def __mul__(self, o: Any) -> Array:
        return self._binary("mul", o)

    def __rmul__(self, o: Any) -> Array:
        return self._binary("mul", o, True)

    def __truediv__(self, o: Any) -> Array:
        return self._binary("div", o)

    def __rtruediv__(self, o: Any) -> Array:
        return self._binary("div", o, True)

    def __floordiv__(self, o: Any) -> Array:
        return self._binary("floordiv", o)

    def __mod__(self, o: Any) -> Array:
        return self._binary("mod", o)

    def __pow__(self, o: Any) -> Array:
        return self._binary("pow", o)

    def __lt__(self, o: Any) -> Array:
        return self._binary("lt", o)

    def __le__(self, o: Any) -> Array:
        return self._binary("le", o)

    def __gt__(self, o: Any) -> Array:
        return self._binary("gt", o)

    def __ge__(self, o: Any) -> Array:
        return self._binary("ge", o)

    def __eq__(self, o: Any) -> Array:  # type: ignore[override]
        return self._binary("eq", o)

    def __ne__(self, o: Any) -> Array:  # type: ignore[override]
        return self._binary("ne", o)

    def __and__(self, o: Any) -> Array:
        return self._binary("and", o)

    def __or__(self, o: Any) -> Array:
        return self._binary("or", o)

    def __neg__(self) -> Array:
        return elementwise("neg", self)

    def __abs__(self) -> Array:
        return elementwise("abs", self)

    def __invert__(self) -> Array:
        return elementwise("lnot" if self.dtype.is_bool else "invert", self)

    # ---- reductions and products -----------------------------------------------------------

    def sum(self) -> Value[Any]:
        return _reduce(self, "rsum", "add")

    def mean(self) -> Value[float]:
        return self.sum() / float(self.size)

    def min(self) -> Value[Any]:
        return _reduce(self, "rmin", "min")

    def max(self) -> Value[Any]:
        return _reduce(self, "rmax", "max")

    def dot(self, other: Any) -> Value[Any]:
        return dot(self, other)

    def __matmul__(self, other: Any) -> Any:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return matmul(asarray(other), self)

    # ---- shape -----------------------------------------------------------------------------

    @property
    def T(self) -> Array:
        if self.ndim == 1:
            return self
        rows, cols = self.shape
        if self.packed:
            return Array((cols, rows), node=build.make(REGISTRY["transpose"],
                                                       (self.node(),)))
        items = self.items()
        return Array((cols, rows), items=[items[r * cols + c] for c in range(cols)
                                          for r in range(rows)])

    def reshape(self, *shape: int | tuple[int, ...]) -> Array:
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        new = tuple(int(d) for d in dims)  # type: ignore[arg-type]
        if math.prod(new) != self.size:
            raise build.ShapeError(f"cannot reshape {self.shape} into {new}")
        if self.packed:
            return Array(new, node=build.reshape(self.node(), new))
        return Array(new, items=self.items())

    def flatten(self) -> Array:
        return self.reshape((self.size,))

    # ---- indexing --------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, tuple):
            if len(key) != self.ndim:
                raise IndexError(f"{len(key)} indices for an array of {self.ndim} dimensions")
            row = self[key[0]]
            return row[key[1]] if isinstance(row, Array) else row
        if isinstance(key, Value):
            raise TypeError("indices must be Python ints or slices (constant at trace time)")
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            picks = list(range(start, stop, step))
            if not picks:
                raise IndexError("empty slice: arrays have at least one element")
            if self.ndim == 1:
                if self.packed and step == 1:
                    return Array((len(picks),), node=build.slice_(self.node(), start, len(picks)))
                items = self.items()
                return Array((len(picks),), items=[items[i] for i in picks])
            rows = [self._row(i) for i in picks]
            return stack_rows(rows)
        k = _index(key, self.shape[0])
        if self.ndim == 1:
            if self._items is not None:
                return self._items[k]
            return Value(build.index(self.node(), k))
        return self._row(k)

    def _row(self, r: int) -> Array:
        cols = self.shape[1]
        if self.packed:
            return Array((cols,), node=build.slice_(self.node(), r * cols, cols))
        items = self.items()
        return Array((cols,), items=items[r * cols:(r + 1) * cols])

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.shape[0]):
            yield self[i]


def _index(key: Any, length: int) -> int:
    k = int(key)
    if k < 0:
        k += length
    if not 0 <= k < length:
        raise IndexError(f"index {key} out of range for length {length}")
    return k


def asarray(x: Any) -> Array:
    if isinstance(x, Array):
        return x
    import numpy as np

    return vector(np.asarray(x)) if np.ndim(x) == 1 else matrix(np.asarray(x))


def elementwise(name: str, *operands: Any) -> Array:
    """``name`` element by element; scalars broadcast, and a vector broadcasts over the rows of
    a matrix (as NumPy). Packed if any array operand is packed."""
    arrays = [asarray(o) if is_array(o) else None for o in operands]
    ops = [a if a is not None else o for a, o in zip(arrays, operands, strict=True)]
    shapes = [a.shape for a in arrays if a is not None]
    shape = max(shapes, key=len)
    for sh in shapes:
        if sh != shape and not (len(shape) == 2 and sh == shape[1:]):
            raise build.ShapeError(f"{name}: shapes {' and '.join(str(s) for s in shapes)} do not "
                                   f"broadcast (equal shapes, scalars, or a row vector over a "
                                   f"matrix)")
    packed = any(a.packed for a in arrays if a is not None)
    if packed:
        if len(shape) == 2 and any(a is not None and a.shape != shape for a in arrays):
            rows = [elementwise(name, *[o[r] if isinstance(o, Array) and o.shape == shape else o
                                        for o in ops]) for r in range(shape[0])]
            return stack_rows(rows)
        nodes = [o.node() if isinstance(o, Array) else _node(o) for o in ops]
        return Array(shape, node=build.apply(name, *nodes))
    columns: list[Value[Any]] = []
    size = math.prod(shape)
    for i in range(size):
        args = []
        for o in ops:
            if isinstance(o, Array):
                items = o.items()
                args.append(items[i] if o.shape == shape else items[i % shape[-1]])
            else:
                args.append(o)
        columns.append(Value(build.apply(name, *(_node(a) for a in args))))
    return Array(shape, items=columns)


def stack_rows(rows: Sequence[Array]) -> Array:
    cols = rows[0].shape[0]
    if any(r.shape != (cols,) for r in rows):
        raise build.ShapeError("rows must be vectors of equal length")
    if any(r.packed for r in rows):
        return Array((len(rows), cols), node=build.concat([r.node() for r in rows],
                                                         (len(rows), cols)))
    return Array((len(rows), cols), items=[v for r in rows for v in r.items()])


def _reduce(a: Array, op: str, scalar_op: str) -> Value[Any]:
    if a.packed:
        return Value(build.apply(op, a.node()))
    items = [v.node for v in a.items()]
    return Value(reduce_in_lane_order(items, lambda x, y: build.apply(scalar_op, x, y)))


def dot(a: Any, b: Any) -> Value[Any]:
    """Σ a_i·b_i in the fixed lane order (same result packed or unpacked)."""
    x, y = asarray(a), asarray(b)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise build.ShapeError(f"dot needs two vectors of equal length, got {x.shape} and "
                               f"{y.shape}")
    if x.packed or y.packed:
        return Value(build.apply("dot", x.node(), y.node()))
    products = [build.apply("mul", p.node, q.node) for p, q in zip(x.items(), y.items(),
                                                                 strict=True)]
    return Value(reduce_in_lane_order(products, lambda s, t: build.apply("add", s, t)))


def matmul(a: Any, b: Any) -> Any:
    x, y = asarray(a), asarray(b)
    if x.ndim == 1 and y.ndim == 1:
        return dot(x, y)
    if x.packed or y.packed:
        op = {(2, 1): "matvec", (1, 2): "vecmat", (2, 2): "matmul"}[(x.ndim, y.ndim)]
        return Array._from_node(build.apply(op, x.node(), y.node()))
    inner = x.shape[-1]
    if inner != y.shape[0]:
        raise build.ShapeError(f"matmul: shapes {x.shape} and {y.shape} do not fit (inner "
                               f"dimensions must agree)")
    if x.ndim == 2 and y.ndim == 1:
        return Array((x.shape[0],), items=[dot(x._row(r), y) for r in range(x.shape[0])])
    cols = y.T
    if x.ndim == 1:
        return Array((y.shape[1],), items=[dot(x, cols._row(c)) for c in range(y.shape[1])])
    return Array((x.shape[0], y.shape[1]), items=[dot(x._row(r), cols._row(c))
                                                  for r in range(x.shape[0])
                                                  for c in range(y.shape[1])])


def _build(values: Any, shape: tuple[int, ...], packed: bool | None, dtype: Any) -> Array:
    """From numbers (constants), copapy values, or a NumPy array (constant)."""
    import numpy as np

    flat: list[Any] = list(np.asarray(values, dtype=object).reshape(-1))
    if any(isinstance(v, Array) for v in flat):
        raise TypeError("nested arrays: pass numbers or scalar values")
    for k, v in enumerate(flat):
        if not isinstance(v, Value | bool | int | float | np.number | np.bool_):
            raise TypeError(f"element {k} of the array is {type(v).__name__} {v!r}: the "
                            f"elements of a copapy array are numbers or copapy values")
    traced = any(isinstance(v, Value) for v in flat)
    if not traced:
        kind = dt.as_dtype(dtype) if dtype is not None else (
            dt.float32 if any(isinstance(v, float | np.floating) for v in flat)
            else dt.int32 if any(isinstance(v, int | np.integer) and not isinstance(v, bool)
                                 for v in flat) else dt.bool_)
        if _auto_packed(packed, len(flat)):
            raw = np.asarray(flat, dtype=kind.numpy).astype("<i4" if kind.is_bool else kind.numpy)
            return Array(shape, node=const_array(raw.tobytes(), kind, shape))
        return Array(shape, items=[Value(const(_as_scalar(v, kind), kind)) for v in flat])
    items = [wrap(v) if isinstance(v, Value) else v for v in flat]
    common = None
    for v in items:
        if isinstance(v, Value):
            common = v.dtype if common is None else dt.promote(common, v.dtype)
    assert common is not None
    if dtype is not None:
        common = dt.as_dtype(dtype)
    values_: list[Value[Any]] = [Value(build.cast(v.node, common)) if isinstance(v, Value)
                                 else Value(const(_as_scalar(v, common), common)) for v in items]
    result = Array(shape, items=values_)
    return result.to_packed() if _auto_packed(packed, len(flat)) else result


def _as_scalar(v: Any, kind: dt.DType) -> bool | int | float:
    v = v.item() if hasattr(v, "item") else v
    if kind.is_bool:
        return bool(v)
    if kind.is_int:
        return int(v)
    return float(v)


def vector(values: Any, packed: bool | None = None, dtype: Any = None) -> Array:
    """A 1-D array from numbers, copapy values or a NumPy array (numbers become constants)."""
    import numpy as np

    shape = np.shape(values) if not isinstance(values, Iterator) else None
    if shape is None:
        values = list(values)
        shape = (len(values),)
    if len(shape) != 1:
        raise build.ShapeError(f"cp.vector needs a 1-D sequence, got shape {shape}")
    return _build(values, (int(shape[0]),), packed, dtype)


def matrix(rows: Any, packed: bool | None = None, dtype: Any = None) -> Array:
    """A 2-D array from nested sequences or a NumPy array (row-major)."""
    import numpy as np

    if isinstance(rows, Array):
        return rows
    shape = np.shape(np.asarray(rows, dtype=object))
    if len(shape) != 2:
        raise build.ShapeError(f"cp.matrix needs a 2-D sequence (list of rows), got shape {shape}")
    return _build(rows, (int(shape[0]), int(shape[1])), packed, dtype)


def array_input(initial: Any, packed: bool | None = None, dtype: Any = None,
                name: str | None = None) -> Array:
    """An input array (written by the host before runs) with the given initial values."""
    import numpy as np

    arr = np.asarray(initial)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"an input array holds numbers; got elements of NumPy dtype {arr.dtype} "
                        f"({arr.reshape(-1)[:3].tolist()!r}...)")
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise build.ShapeError(f"array inputs are 1-D or 2-D and non-empty, got shape {arr.shape}")
    kind = dt.as_dtype(dtype) if dtype is not None else (
        dt.float32 if arr.dtype.kind == "f" else dt.bool_ if arr.dtype.kind == "b" else dt.int32)
    if kind.is_int and arr.dtype.kind == "f" and not np.all(np.mod(arr, 1) == 0):
        raise TypeError("float values would be truncated in an int32 input; pass ints")
    shape = tuple(int(d) for d in arr.shape)
    if _auto_packed(packed, arr.size):
        raw = arr.astype("<i4" if kind.is_bool else kind.numpy).tobytes()
        return Array(shape, node=fresh_array_input(kind, raw, shape, name))
    from .value import value as scalar_input

    items = [scalar_input(_as_scalar(v, kind), kind) for v in arr.reshape(-1)]
    return Array(shape, items=items)


def norm(x: Any) -> Value[float]:
    """Euclidean length sqrt(Σ x_i²) (fixed summation order)."""
    from .functions import sqrt

    a = asarray(x)
    return sqrt(dot(a.flatten(), a.flatten()))


def cross(a: Any, b: Any) -> Array:
    """Cross product of two 3-vectors."""
    x, y = asarray(a).to_unpacked(), asarray(b).to_unpacked()
    if x.shape != (3,) or y.shape != (3,):
        raise build.ShapeError(f"cross needs two 3-vectors, got {x.shape} and {y.shape}")
    x0, x1, x2 = x.items()
    y0, y1, y2 = y.items()
    return Array((3,), items=[x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, x0 * y1 - x1 * y0])
