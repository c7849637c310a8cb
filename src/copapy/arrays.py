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
import operator
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from . import array_shapes as shp
from . import array_update as update
from . import dtypes as dt
from .array_update import View
from .graph import build, element_shapes, levels
from .graph.lanes import reduce_in_lane_order
from .graph.location import mark
from .graph.node import Node, const, const_array, fresh_array_input
from .numpy_dispatch import NUMPY_FUNCTIONS, array_function, array_ufunc, numpy_name
from .value import (
    Value,
    _convert,
    _node,
    _op,
    format_traced,
    install_array_support,
    is_array,
    round_decimals,
    value,
    wrap,
)

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

PACK_THRESHOLD = 64
T = TypeVar("T")


def _auto_packed(packed: bool | None, size: int) -> bool:
    return size > PACK_THRESHOLD if packed is None else bool(packed)


class Array:
    """A vector (1-D) or matrix (2-D) of traced values. Use ``cp.vector`` / ``cp.matrix``."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, shape: tuple[int, ...], items: list[Value[Any]] | None = None,
                 node: Node | None = None) -> None:
        if (items is None) == (node is None):
            raise ValueError("an Array holds either items (unpacked) or a node (packed)")
        if any(d < 1 for d in shape):
            raise ValueError(f"copapy arrays have at least one element (array dimensions must "
                             f"be >= 1), got shape {shape}")
        self.shape = tuple(shape)
        self._items_ = items
        self._node_ = node
        #: NumPy's view relation: whose elements these are, and where (array_update.py)
        self._view: View | None = None
        #: (parents, op, epoch): what this array may be a view of, decided when needed
        #: (array_update.py: a write anywhere since ``epoch`` makes it needed)
        self._pending: Pending | None = None
        #: bumped by every assignment into this array's elements (its views then take the
        #: new elements)
        self.version = 0
        #: why an assignment into this array (or a view of it) is refused, if it is
        self._readonly: str | None = None
        self._positions: Any = None

    @property
    def _items(self) -> list[Value[Any]] | None:
        if self._pending is not None or self._view is not None:
            self._current()
        return self._items_

    @property
    def _node(self) -> Node | None:
        if self._pending is not None or self._view is not None:
            self._current()
        return self._node_

    def _current(self) -> None:
        """This array's elements made current: a possible view decided once anything was
        written since it was made, a view's elements gathered again after its owner was."""
        pending = self._pending
        if pending is not None:
            if pending.epoch == update.EPOCH[0]:
                return  # nothing written anywhere since: the elements it was made with
            if pending.stamp == _lineage(pending.parents):
                pending.epoch = update.EPOCH[0]  # written elsewhere: not its ancestors
                return
            self._resolve()
        view = self._view
        if view is not None and view.seen != view.owner.version:
            view.seen = view.owner.version
            owner = view.owner
            if owner._node is not None:
                self._node_, self._items_ = update.gather(owner._node, view.positions), None
            else:
                items = owner._items
                assert items is not None
                self._items_ = [items[i] for i in view.positions.reshape(-1).tolist()]
                self._node_ = None

    def _resolve(self) -> None:
        """Whether this array (made by an operation that may give a view) is NumPy's view of
        an owner, and where: the operation run on its parents' index maps, parents first."""
        chain: list[Array] = []
        todo: list[Array] = [self]
        while todo:
            a = todo.pop()
            if a._pending is not None and all(a is not c for c in chain):
                chain.append(a)
                todo.extend(a._pending.parents)
        for a in reversed(chain):
            pending = a._pending
            if pending is None:
                continue
            maps = [p._index_map() for p in pending.parents]
            a._pending = None
            a._view, why = update.derive([m for _, m in maps], [o for o, _ in maps],
                                         pending.op, a.shape, pending.what)
            a._readonly = a._readonly or why

    def _index_map(self) -> tuple[Array, Any]:
        """(the array owning these elements, their flat positions in it, of this shape)."""
        if self._pending is not None:
            self._resolve()
        if self._view is not None:
            return self._view.owner, self._view.positions
        if self._positions is None:
            self._positions = update.arange(self.size).reshape(self.shape)
        return self, self._positions

    def _viewing(self, result: T, op: Any) -> T:
        """``result`` (``op`` of this array) made a possible view of this array, decided by
        NumPy's ``op`` on the index maps when needed."""
        if isinstance(result, Array) and result is not self and result._view is None and (
                result._pending is None):
            result._pending = Pending((self,), lambda m: op(m[0]), "indexing")
        return result

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
        kind = {1: "vector", 2: "matrix"}.get(self.ndim, f"{self.ndim}-D array")
        return f"<copapy {kind} {self.shape} {self.dtype.name} {form}>"

    def __format__(self, spec: str) -> str:
        return format_traced(self, spec)

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
        """This array as one packed node (one data slot, loop stencils): a copy, as
        ``copy()``, so that assigning into it never depends on the form it had."""
        return Array(self.shape, node=self.node())

    def to_unpacked(self) -> Array:
        """This array as one scalar node per element (constants fold per element): a copy."""
        return Array(self.shape, items=self.items())

    def nodes(self) -> list[Node]:
        """What the compiler computes for this array."""
        if self._node is not None:
            return [self._node]
        return [v.node for v in self.items()]

    # ---- element-wise operations -----------------------------------------------------------

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method in ("reduce", "accumulate") and len(inputs) == 1:
            return ufunc_method(ufunc, method, inputs[0], **kwargs)
        result = array_ufunc(ufunc, method, inputs, kwargs)
        # a ufunc's result is a new array in NumPy (np.floor of ints gave the input itself)
        return result.copy() if isinstance(result, Array) and any(
            result is o for o in inputs) else result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        result = array_function(func, args, kwargs)
        if numpy_name(func) in NUMPY_FUNCTIONS or numpy_name(func) in COPAPY_COMPUTED:
            return result  # computed by copapy: new arrays, as NumPy's
        return _numpy_views(func, args, kwargs, result)

    # ---- generated by tools/gen_api.py from the registry: do not edit ----
    def __add__(self, o: Any) -> Array:
        return elementwise("add", self, o)

    def __radd__(self, o: Any) -> Array:
        return elementwise("add", o, self)

    def __sub__(self, o: Any) -> Array:
        return elementwise("sub", self, o)

    def __rsub__(self, o: Any) -> Array:
        return elementwise("sub", o, self)

    def __mul__(self, o: Any) -> Array:
        return elementwise("mul", self, o)

    def __rmul__(self, o: Any) -> Array:
        return elementwise("mul", o, self)

    def __truediv__(self, o: Any) -> Array:
        return elementwise("div", self, o)

    def __rtruediv__(self, o: Any) -> Array:
        return elementwise("div", o, self)

    def __floordiv__(self, o: Any) -> Array:
        return elementwise("floordiv", self, o)

    def __rfloordiv__(self, o: Any) -> Array:
        return elementwise("floordiv", o, self)

    def __mod__(self, o: Any) -> Array:
        return elementwise("mod", self, o)

    def __rmod__(self, o: Any) -> Array:
        return elementwise("mod", o, self)

    def __pow__(self, o: Any) -> Array:
        return elementwise("pow", self, o)

    def __rpow__(self, o: Any) -> Array:
        return elementwise("pow", o, self)

    def __neg__(self) -> Array:
        return elementwise("neg", self)

    def __abs__(self) -> Array:
        return elementwise("abs", self)

    def __lt__(self, o: Any) -> Array:
        return elementwise("lt", self, o)

    def __le__(self, o: Any) -> Array:
        return elementwise("le", self, o)

    def __gt__(self, o: Any) -> Array:
        return elementwise("gt", self, o)

    def __ge__(self, o: Any) -> Array:
        return elementwise("ge", self, o)

    def __eq__(self, o: Any) -> Array:  # type: ignore[override]
        return elementwise("eq", self, o)

    def __ne__(self, o: Any) -> Array:  # type: ignore[override]
        return elementwise("ne", self, o)

    def __and__(self, o: Any) -> Array:
        return elementwise("and", self, o)

    def __rand__(self, o: Any) -> Array:
        return elementwise("and", o, self)

    def __or__(self, o: Any) -> Array:
        return elementwise("or", self, o)

    def __ror__(self, o: Any) -> Array:
        return elementwise("or", o, self)

    def __xor__(self, o: Any) -> Array:
        return elementwise("xor", self, o)

    def __rxor__(self, o: Any) -> Array:
        return elementwise("xor", o, self)

    def __invert__(self) -> Array:
        return elementwise("lnot" if self.dtype.is_bool else "invert", self)

    def __lshift__(self, o: Any) -> Array:
        return elementwise("shl", self, o)

    def __rlshift__(self, o: Any) -> Array:
        return elementwise("shl", o, self)

    def __rshift__(self, o: Any) -> Array:
        return elementwise("shr", self, o)

    def __rrshift__(self, o: Any) -> Array:
        return elementwise("shr", o, self)
    # ---- end of generated code ----

    # ---- reductions and products -----------------------------------------------------------

    def sum(self, axis: Any = None, **numpy: Any) -> Any:
        """Σ of the elements in the fixed lane order (the same bits packed or unpacked); over
        ``axis`` (an int or a tuple) each output reduces its elements in that order, row-major.
        ``keepdims=True`` keeps the reduced dimensions as 1 (NumPy's arguments). Bools count
        as int32 (NumPy's int), also where one element is reduced."""
        if numpy.get("dtype") is not None:
            return self._in_dtype("sum", axis, numpy)
        if self.dtype.is_bool:
            return self.astype(dt.int32).sum(axis=axis, **numpy)
        return _reduce_axes(self, "sum", axis, numpy, "add",
                            lambda g: _reduce(g, "rsum", "add"))

    def mean(self, axis: Any = None, **numpy: Any) -> Any:
        """The sum divided by the number of elements reduced; of int32 and bool elements as
        float32 (as NumPy's mean is a float: the int32 sum would wrap)."""
        if numpy.get("dtype") is not None:
            return self._in_dtype("mean", axis, numpy)
        keep = _keepdims("mean", numpy)
        count = math.prod(self.shape[k] for k in shp.normalize_axes(axis, self.ndim, "mean"))
        return _floats(self).sum(axis=axis, keepdims=keep, **numpy) / float(count)

    def min(self, axis: Any = None, **numpy: Any) -> Any:
        """The smallest element (over ``axis``); NaN if any element is NaN; of bools a bool
        (``all``, NumPy's type)."""
        if self.dtype.is_bool:
            return self.all(axis=axis, **numpy)
        return _reduce_axes(self, "min", axis, numpy, "min",
                            lambda g: _reduce(g, "rmin", "min"))

    def max(self, axis: Any = None, **numpy: Any) -> Any:
        """The largest element (over ``axis``); NaN if any element is NaN; of bools a bool
        (``any``, NumPy's type)."""
        if self.dtype.is_bool:
            return self.any(axis=axis, **numpy)
        return _reduce_axes(self, "max", axis, numpy, "max",
                            lambda g: _reduce(g, "rmax", "max"))

    def prod(self, axis: Any = None, **numpy: Any) -> Any:
        """The product of the elements in the fixed lane order (int32 wraps); ``np.prod``;
        of bools as int32 (NumPy's int)."""
        if numpy.get("dtype") is not None:
            return self._in_dtype("prod", axis, numpy)
        if self.dtype.is_bool:
            return self.astype(dt.int32).prod(axis=axis, **numpy)
        return _reduce_axes(self, "prod", axis, numpy, "mul", _product)

    def _in_dtype(self, name: str, axis: Any, numpy: dict[str, Any]) -> Any:
        """NumPy's ``dtype=`` of a sum, product or mean: computed in that type, the elements
        cast first (float64 needs a target with float64)."""
        kind = numpy.pop("dtype")
        return getattr(self.astype(kind), name)(axis=axis, **numpy)

    def any(self, axis: Any = None, **numpy: Any) -> Any:
        """Whether an element (over ``axis``) is true (non-zero); ``np.any``."""
        return self._truth().max(axis=axis, keepdims=_keepdims("any", numpy), **numpy) != 0

    def all(self, axis: Any = None, **numpy: Any) -> Any:
        """Whether every element (over ``axis``) is true (non-zero); ``np.all``."""
        return self._truth().min(axis=axis, keepdims=_keepdims("all", numpy), **numpy) != 0

    def argmax(self, axis: Any = None, **numpy: Any) -> Any:
        """The index of the first largest element (of the flattened array, or along one
        ``axis``), int32; a NaN counts as largest (NumPy's rule)."""
        return _arg_extreme(self, "argmax", axis, numpy)

    def argmin(self, axis: Any = None, **numpy: Any) -> Any:
        """The index of the first smallest element, int32; a NaN counts as smallest."""
        return _arg_extreme(self, "argmin", axis, numpy)

    # NumPy's array methods that are its functions (a.var() is np.var(a)): the same code, so
    # a method and its function never disagree

    def _numpy(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return array_function(getattr(np, name), (self, *args), kwargs)

    def var(self, axis: Any = None, **numpy: Any) -> Any:
        """``np.var(a, axis, ...)``."""
        return self._numpy("var", axis, **numpy)

    def std(self, axis: Any = None, **numpy: Any) -> Any:
        """``np.std(a, axis, ...)``."""
        return self._numpy("std", axis, **numpy)

    def cumsum(self, axis: Any = None, **numpy: Any) -> Any:
        """``np.cumsum(a, axis, ...)``."""
        return self._numpy("cumsum", axis, **numpy)

    def cumprod(self, axis: Any = None, **numpy: Any) -> Any:
        """``np.cumprod(a, axis, ...)``."""
        return self._numpy("cumprod", axis, **numpy)

    def trace(self, *args: Any, **numpy: Any) -> Any:
        """``np.trace(a, offset, axis1, axis2)``."""
        return self._numpy("trace", *args, **numpy)

    def diagonal(self, *args: Any, **numpy: Any) -> Any:
        """``np.diagonal(a, offset, axis1, axis2)``."""
        return self._numpy("diagonal", *args, **numpy)

    def argsort(self, axis: Any = -1, **numpy: Any) -> Any:
        """``np.argsort(a, axis)``."""
        return self._numpy("argsort", axis, **numpy)

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Any:
        """``np.searchsorted(a, v, side)`` (a constant table searched by traced values)."""
        return self._numpy("searchsorted", v, side, sorter)

    def nonzero(self) -> Any:
        """``np.nonzero(a)``: refused (the result's shape depends on the values)."""
        return self._numpy("nonzero")

    def conj(self) -> Array:
        """The array itself: copapy's numbers are real (``np.conj``)."""
        return self

    def conjugate(self) -> Array:
        """The array itself: copapy's numbers are real (``np.conjugate``)."""
        return self

    @property
    def real(self) -> Array:
        """The array itself: copapy's numbers are real (``np.real``)."""
        return self

    @property
    def imag(self) -> Array:
        """Zeros of the array's type: copapy's numbers are real (``np.imag``); read-only,
        as NumPy's imaginary part of a real array."""
        zeros = self * 0 if not self.dtype.is_bool else self & False
        return zeros.refuse_assignment("NumPy's a.imag of a real array is read-only")

    def tolist(self) -> Any:
        """The elements as nested lists of traced values (as NumPy's ``a.tolist()``)."""
        if self.ndim == 1:
            return list(self.items())
        return [self._row(r).tolist() for r in range(self.shape[0])]

    def _truth(self) -> Array:
        """The elements' truth values as int32 0/1 (which min and max reduce)."""
        return (self != 0).astype(dt.int32)

    def clip(self, low: Any = None, high: Any = None) -> Array:
        """``np.clip(a, low, high)`` (cp.clamp's definition; either bound may be None)."""
        return array_function(np.clip, (self, low, high), {})  # type: ignore[no-any-return]

    def round(self, decimals: int = 0, out: None = None) -> Array:
        """``cp.round`` of the elements, which ``np.round(a)`` calls; ``decimals`` as NumPy's
        (scaled by 10**decimals, rounded, scaled back)."""
        result: Array = round_decimals(self, decimals, out)
        return result

    def astype(self, dtype: Any) -> Array:
        """``cp.cast(self, dtype)``, as NumPy's ``a.astype(np.int32)`` reads (float to int
        truncates toward zero and saturates, NaN gives 0)."""
        target = dt.as_dtype(dtype)
        if self.packed:
            return Array(self.shape, node=build.cast(self.node(), target))
        return Array(self.shape, items=[v.astype(target) for v in self.items()])

    def dot(self, other: Any) -> Any:
        """NumPy's ``a.dot(b)``: ``cp.dot`` of two vectors, ``a @ b`` when one is a matrix
        (``m.dot(v)`` raised "dot needs two vectors")."""
        if self.ndim == 1 and np.ndim(other) == 1:
            return dot(self, other)
        return matmul(self, other)

    def __matmul__(self, other: Any) -> Any:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return matmul(other, self)

    # ---- shape -----------------------------------------------------------------------------

    @property
    def T(self) -> Array:
        """The transpose (the axes reversed, as NumPy's ``a.T``)."""
        if self.ndim == 1:
            return self
        return self.transpose()

    def transpose(self, *axes: Any) -> Array:
        """The axes permuted (reversed without arguments or with None), NumPy's
        ``a.transpose``: packed, one level gather (two for some 4-D orders), whatever the size."""
        given = axes[0] if len(axes) == 1 and isinstance(axes[0], tuple | list) else axes
        if given == (None,):
            given = ()
        perm = tuple(reversed(range(self.ndim))) if not given else tuple(
            operator.index(k) % self.ndim for k in given)
        if sorted(perm) != list(range(self.ndim)):
            raise ValueError(f"transpose{tuple(given)!r}: axes must be a permutation of "
                             f"0..{self.ndim - 1}")
        return self._viewing(_permute(self, perm), lambda m: m.transpose(perm))

    def swapaxes(self, axis1: int, axis2: int) -> Array:
        """Axes ``axis1`` and ``axis2`` exchanged (NumPy's ``a.swapaxes``, which
        ``np.swapaxes`` calls)."""
        first, second = (_axis(k, self.ndim, "swapaxes") for k in (axis1, axis2))
        perm = list(range(self.ndim))
        perm[first], perm[second] = second, first
        return self._viewing(_permute(self, tuple(perm)), lambda m: m.transpose(perm))

    def reshape(self, *shape: int | tuple[int, ...] | list[int]) -> Array:
        """A view with another shape of the same size (no code is emitted); one dimension
        may be -1 (inferred, as in NumPy)."""
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        new = tuple(operator.index(d) for d in dims)  # type: ignore[arg-type]
        if new.count(-1) == 1:  # one dimension inferred, as NumPy's reshape(-1) / (2, -1)
            known = math.prod(d for d in new if d != -1)
            if known > 0 and self.size % known == 0:
                new = tuple(self.size // known if d == -1 else d for d in new)
        if math.prod(new) != self.size or any(d < 1 for d in new):
            raise build.ShapeError(f"cannot reshape {self.shape} into {new}")
        if not new:  # NumPy's 0-d result: the element itself (copapy arrays have 1-4 dims)
            return self.items()[0]  # type: ignore[return-value]
        out = Array(new, node=build.reshape(self.node(), new)) if self.packed else Array(
            new, items=self.items())
        return self._viewing(out, lambda m: m.reshape(new))

    def flatten(self) -> Array:
        """The elements as a 1-D array, row-major (a copy, as NumPy's)."""
        flat = (self.size,)
        return Array(flat, node=build.reshape(self.node(), flat)) if self.packed else Array(
            flat, items=self.items())

    def ravel(self) -> Array:
        """The elements as a 1-D array, row-major: a view where NumPy's is one."""
        return self.reshape((self.size,))

    def squeeze(self, axis: Any = None) -> Any:
        """NumPy's ``a.squeeze(axis)``: a view without the length-1 axes (those of ``axis``);
        of one element, the element itself (NumPy's 0-d array)."""
        return self.reshape(np.squeeze(np.empty(self.shape, np.bool_), axis=axis).shape)

    def repeat(self, repeats: Any, axis: Any = None) -> Any:
        """NumPy's ``a.repeat(repeats, axis)`` (``np.repeat``): a gather of the elements."""
        return self._by_index_map(lambda m: np.repeat(m, repeats, axis=axis))

    def take(self, indices: Any, axis: Any = None, out: None = None,
             mode: Literal["raise", "wrap", "clip"] = "raise") -> Any:
        """NumPy's ``a.take(indices, axis)`` (``np.take``) with constant indices: a gather."""
        if out is not None:
            raise TypeError("take(out=...) of a copapy array: use the result")
        if isinstance(indices, Value) or next(_arrays_in(indices), None) is not None:
            raise TypeError("np.take / a.take with traced indices picks elements known only "
                            "when the program runs; take constant indices (a NumPy array of "
                            "ints) or select with cp.where(cond, a, b)")
        return self._by_index_map(lambda m: np.take(m, indices, axis=axis, mode=mode))

    def sort(self, axis: Any = -1, kind: Any = None, order: Any = None) -> None:
        """NumPy's in-place ``a.sort(axis)``: the elements replaced by ``np.sort(a, axis)``
        (an item assignment: views of ``a`` see it)."""
        self[...] = self._numpy("sort", axis, kind, order)

    def _by_index_map(self, op: Any) -> Any:
        """``op`` (a NumPy function that moves elements) applied to this array: the elements
        it picks from the index map, a copy (as NumPy's repeat and take)."""
        picks = np.asarray(op(np.arange(self.size).reshape(self.shape)))
        if picks.ndim == 0:
            return self.items()[int(picks)]
        if picks.size == 0:
            raise build.ShapeError(f"the result has shape {picks.shape}: copapy arrays have at "
                                   f"least one element")
        return self.flatten()[picks]

    def copy(self) -> Array:
        """A new array of the same elements: assigning into either leaves the other as is."""
        return Array(self.shape, node=self._node) if self.packed else Array(
            self.shape, items=self.items())

    def fill(self, value: Any) -> None:
        """Every element set to ``value`` (NumPy's ``a.fill``: ``a[...] = value``)."""
        self[...] = value

    # ---- indexing --------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        result = self._get(key)
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, list | np.ndarray | Array) for k in keys):
            return result  # NumPy's advanced indexing copies
        return self._viewing(result, lambda m: m[key])

    def _get(self, key: Any) -> Any:
        if isinstance(key, tuple) and not key:
            key = (Ellipsis,)  # NumPy's a[()]: every element (a view of the whole array)
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, list | np.ndarray | Array) for k in keys):
            return self._take(keys)
        if any(k is Ellipsis for k in keys):
            key = keys = _expand_ellipsis(keys, self.ndim)
        if any(k is None for k in keys):
            return self._new_axes(keys)
        if self.packed and self.ndim > 1:
            view = self._strided_view(key)
            if view is not None:
                return view
        if isinstance(key, tuple):
            if not 1 <= len(key) <= self.ndim:
                raise IndexError(f"{len(key)} indices for an array of {self.ndim} dimensions")
            # the parts through _get, not []: a part's own view relation (to an intermediate
            # array) would stand for the whole key's, which __getitem__ records (a write into
            # y[:, 0] of an unpacked y reached a temporary, not y)
            if len(key) == 1:
                return self._get(key[0])
            rows = self._get(key[0])
            if not isinstance(key[0], slice):
                return rows._get(key[1:])  # one row: the rest indexes it
            # rows picked: index the other axes with the picked one moved last, then back
            moved = _permute(rows, (*range(1, rows.ndim), 0))._get(key[1:])
            return _permute(moved, (moved.ndim - 1, *range(moved.ndim - 1)))
        if isinstance(key, Value):
            raise TypeError(_TRACED_INDEX)
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            picks = range(start, stop, step)  # not a list: 36 MB at 1e6 elements
            if not picks:
                raise IndexError("empty slice: arrays have at least one element")
            if self.ndim == 1:
                if self.packed:  # a view (step 1) or one strided copy: no code per element
                    return Array((len(picks),), node=build.strided(self.node(), picks[0], step,
                                                                   len(picks)))
                items = self.items()
                return Array((len(picks),), items=[items[i] for i in picks])
            if self.packed and step == 1:
                block = math.prod(self.shape[1:])
                return Array((len(picks), *self.shape[1:]), node=build.reshape(
                    build.slice_(self.node(), start * block, len(picks) * block),
                    (len(picks), *self.shape[1:])))
            rows = [self._row(i) for i in picks]
            return stack_rows(rows)
        k = _index(key, self.shape[0])
        if self.ndim == 1:
            if self._items is not None:
                return self._items[k]
            return Value(build.index(self.node(), k))
        return self._row(k)

    def _take(self, keys: tuple[Any, ...]) -> Any:
        """``a[idx]`` with constant index arrays (ints, or a constant bool mask), NumPy's
        advanced indexing: the flat indices come from NumPy indexing the element numbers, so
        shapes, negative indices and IndexErrors are NumPy's; packed, one strided copy per
        run of equally spaced indices."""
        for k in keys:
            if isinstance(k, Array | Value) or (isinstance(k, list) and any(
                    isinstance(v, Array | Value) for v in k)):
                raise TypeError(_TRACED_INDEX)
        numbers = [np.asarray(k) if isinstance(k, list) else k for k in keys]
        if any(isinstance(k, np.ndarray) and k.dtype.kind not in "biu" for k in numbers):
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        try:
            picked = np.arange(self.size).reshape(self.shape)[tuple(numbers)]
        except IndexError as error:
            raise IndexError(f"{error} (copapy array of shape {self.shape})") from None
        if np.ndim(picked) == 0:
            return self.items()[int(picked)] if not self.packed else Value(
                build.index(self.node(), int(picked)))
        if picked.size == 0 or picked.ndim > shp.MAX_NDIM:
            raise IndexError(f"the index selects shape {picked.shape}: copapy arrays have 1 to "
                             f"{shp.MAX_NDIM} dimensions and at least one element")
        shape = tuple(int(d) for d in picked.shape)
        flat = [int(i) for i in picked.reshape(-1)]
        if not self.packed:
            items = self.items()
            return Array(shape, items=[items[i] for i in flat])
        views = self._gather_views(numbers, shape)
        if views is not None:
            return views
        node = build.reshape(self.node(), (self.size,))
        parts = [build.broadcast_to(build.index(node, start), (count,)) if step == 0 else
                 build.strided(node, start, step, count)
                 for start, step, count in update.runs(flat)]
        gathered = parts[0] if len(parts) == 1 else build.concat(parts, (len(flat),))
        return Array(shape, node=build.reshape(gathered, shape))

    def _gather_views(self, keys: list[Any], shape: tuple[int, ...]) -> Array | None:
        """Packed ``A[:, idx]``-like keys (one 1-D int array among slices, 2-D and up): one
        strided view per index, stacked and the axis moved into place, so the nodes do not
        grow with the other axes' sizes; None for other keys."""
        at = [k for k, key in enumerate(keys) if isinstance(key, np.ndarray)]
        if self.ndim < 2 or len(at) != 1 or not all(isinstance(k, slice | np.ndarray)
                                                     for k in keys):
            return None
        pos = at[0]
        index = keys[pos]
        if index.ndim != 1 or index.dtype.kind == "b":
            return None
        views = [self[tuple(int(i) % self.shape[pos] if k == pos else key
                            for k, key in enumerate(keys))] for i in index]
        moved = stack_rows(views)
        order = (*range(1, pos + 1), 0, *range(pos + 1, moved.ndim))
        result = _permute(moved, order)
        return result if result.shape == shape else None

    def _new_axes(self, keys: tuple[Any, ...]) -> Array:
        """``a[..., None, ...]`` (``np.newaxis``): the other keys' result with an axis of one
        element at each None, as NumPy places them (a reshape: no code)."""
        inner = tuple(k for k in keys if k is not None)
        if len(inner) > self.ndim:
            raise IndexError(f"{len(inner)} indices for an array of {self.ndim} dimensions")
        shape: list[int] = []
        axis = 0
        for k in keys:
            if k is None:
                shape.append(1)
                continue
            if k is Ellipsis:
                raise TypeError("indices with ... are not supported: name every axis (a[:, :, "
                                "None] rather than a[..., None])")
            if isinstance(k, slice):
                shape.append(len(range(*k.indices(self.shape[axis]))))
            axis += 1
        shape += self.shape[axis:]
        if len(shape) > shp.MAX_NDIM:
            raise IndexError(f"a[{keys}] would have {len(shape)} dimensions: copapy arrays have "
                             f"at most {shp.MAX_NDIM}")
        if len(inner) == self.ndim and all(isinstance(k, int | np.integer) and not isinstance(
                k, bool | np.bool_) for k in inner):
            # every axis indexed by an int: the element as a one-element slice, so that the
            # result stays NumPy's view (a write into y[1, None] reaches y)
            last = _index(inner[-1], self.shape[-1])
            inner = (*inner[:-1], slice(last, last + 1))
        picked = self[inner] if inner else self
        return picked.reshape(tuple(shape))

    def _strided_view(self, key: Any) -> Array | None:
        """A packed N-D array indexed by ints and slices (at least one slice): one view or
        strided copy (graph/levels.py), whatever the size; None for other keys."""
        keys = key if isinstance(key, tuple) else (key,)
        if not any(isinstance(k, slice) for k in keys) or any(isinstance(k, Value) for k in keys):
            return None  # an element, or a traced index (refused below, naming the fix)
        if len(keys) > self.ndim:
            raise IndexError(f"{len(keys)} indices for an array of {self.ndim} dimensions")
        picks = [k if isinstance(k, slice) else _index(k, d)
                 for k, d in zip(keys, self.shape, strict=False)]
        start, steps, shape = shp.strided_levels(self.shape, picks)
        flat = levels.gather(self.node(), start, steps)
        return Array(shape, node=flat if len(shape) == 1 else build.reshape(flat, shape))

    def __setitem__(self, key: Any, value: Any) -> None:
        """``a[key] = value`` as NumPy's: the elements ``key`` picks (ints, slices, ``...``,
        None, constant int arrays or bool masks; a traced bool mask selects with cp.where)
        take ``value`` broadcast to their shape and cast to the array's type, and every view
        of those elements sees it. The graph stays SSA: the owner of the elements gets a new
        node or new items (array_update.py)."""
        owner, positions = self._writable()
        mask = _traced_key(key)
        if mask is not None:
            self[...] = self._masked(mask, value)
            return
        try:
            targets = np.asarray(positions[key])
        except IndexError as error:
            raise IndexError(f"{error} (assigning into a copapy array of shape "
                             f"{self.shape})") from None
        if targets.size == 0:  # nothing written; the value still has to broadcast (NumPy's)
            shape = value.shape if isinstance(value, Array) else np.shape(value)
            np.empty(targets.shape)[...] = np.zeros(shape)
            return
        if _traced_value(value):
            owner._assign(targets, _cast_operand(value, owner.dtype))
            return
        # numbers: NumPy's own conversion and broadcasting, to the targets in their order
        data = update.constant_values(value, owner.dtype, targets.shape).reshape(-1)
        uniform = data.tobytes() == np.repeat(data[:1], data.size).tobytes()
        owner._assign(targets.reshape(-1), _cast_operand(data[0], owner.dtype) if uniform
                      else _build(data, data.shape, None, owner.dtype))

    @property
    def flat(self) -> update.Flat:
        """NumPy's ``a.flat``: the elements in row-major order; ``a.flat[k] = v`` assigns
        (the value repeated to the elements picked, as NumPy's flatiter does)."""
        return update.Flat(self)

    @flat.setter
    def flat(self, value: Any) -> None:
        self.assign_flat(slice(None), value)

    def put(self, ind: Any, v: Any, mode: str = "raise") -> None:
        """NumPy's ``a.put(ind, v)`` (``np.put``): ``a.flat[ind] = v``."""
        if mode != "raise":
            raise TypeError(f"put(mode={mode!r}) of a copapy array: mode='raise' only (index "
                            f"within the array; wrap or clip the indices with NumPy first)")
        self.assign_flat(ind, v)

    def assign_flat(self, key: Any, value: Any) -> None:
        """``a.flat[key] = value``: the elements ``key`` picks of the row-major sequence
        (of any view, through its own order) take the value flattened and repeated."""
        owner, positions = self._writable()
        if _traced_key(key) is not None:
            raise TypeError(_TRACED_SET)
        try:
            targets = np.asarray(positions.reshape(-1)[key]).reshape(-1)
        except IndexError as error:
            raise IndexError(f"{error} (a.flat of a copapy array of {self.size} "
                             f"elements)") from None
        if targets.size == 0:
            return
        if _traced_value(value):
            source = _cast_operand(value, owner.dtype)
            given = source.flatten() if isinstance(source, Array) else Array((1,),
                                                                             items=[source])
            owner._assign(targets, given[np.arange(targets.size) % given.size])
            return
        data = update.constant_values(value, owner.dtype, np.shape(value)).reshape(-1)
        if data.size == 0:
            return  # NumPy writes nothing from an empty value
        cycled = np.resize(data, targets.size)
        owner._assign(targets, _build(cycled, cycled.shape, None, owner.dtype))

    def _element(self, k: int) -> Node | None:
        """Element ``k`` as a scalar expression (None: not known without running)."""
        return self.items()[k].node if not self.packed else update.element(self.node(), k)

    def refuse_assignment(self, why: str) -> Array:
        """This array, with assignment into it (or a view of it) refused, saying ``why``."""
        self._readonly = why
        return self

    def _writable(self) -> tuple[Array, Any]:
        """(owner, positions) of this array's elements, or the error NumPy's read-only
        arrays give, naming why and the fix."""
        owner, positions = self._index_map()
        for a in (self, owner):
            if a._readonly is not None:
                raise ValueError(f"assignment destination is read-only: {a._readonly}")
        return owner, positions

    def _assign(self, targets: Any, source: Value[Any] | Array) -> None:
        """``source`` (of this array's type) broadcast to the shape of ``targets`` (flat
        positions in this array, which owns its elements) put at those positions."""
        flat = targets.reshape(-1)
        if isinstance(source, Value):
            picks = np.zeros(flat.shape, np.int64)
            src = Array((1,), items=[source])
        else:
            src = source
            picks = np.empty(targets.shape, np.int64)
            try:  # NumPy's broadcasting of an assigned value, its errors
                picks[...] = np.arange(src.size).reshape(src.shape)
            except ValueError as error:
                raise ValueError(f"{error} (assigning a copapy array of shape {src.shape} into "
                                 f"elements of shape {targets.shape})") from None
            picks = picks.reshape(-1)
        keep = _once(flat, picks, src)
        if keep is not None:
            flat, picks, targets = flat[keep], picks[keep], flat[keep]
        if self._node_ is None:
            items = list(self.items())
            given = src.items()
            for t, k in zip(flat.tolist(), picks.tolist(), strict=True):
                items[t] = given[k]
            self._items_ = items
        else:
            values = (build.broadcast_to(source.node, (flat.size,)) if isinstance(source, Value)
                      else update.gather(src.node(), picks))
            self._node_ = update.scatter(self._node_, targets, values)
        self.version += 1
        update.EPOCH[0] += 1

    def _masked(self, mask: Array, value: Any) -> Array:
        """The elements after ``a[mask] = value`` with a traced bool mask: cp.where(mask,
        value, a), for a value that does not depend on how many elements the mask picks."""
        if mask.shape != self.shape[:mask.ndim]:
            raise IndexError(f"boolean index of shape {mask.shape} on an array of shape "
                             f"{self.shape}: the mask's shape must be the array's leading "
                             f"dimensions (NumPy's rule)")
        rest = self.shape[mask.ndim:]
        given = value.shape if isinstance(value, Array) else () if isinstance(
            value, Value) else np.shape(value)
        shape = list(given)
        while len(shape) > len(rest) and shape[0] == 1:
            shape.pop(0)
        if len(shape) > len(rest) or np.broadcast_shapes(tuple(shape), rest) != rest:
            raise TypeError(f"a[mask] = v with a traced mask (known when the program runs): v "
                            f"of shape {given} "
                            f"would have to match the number of elements picked; assign one "
                            f"value (a[mask] = 0.0) or one row, or select: a[...] = "
                            f"cp.where(mask, v_full, a)")
        v = _cast_operand(value, self.dtype)
        if isinstance(v, Array):
            v = v.reshape(tuple(shape)) if shape else v.reshape(-1)[0]
        m = mask.reshape(mask.shape + (1,) * len(rest)) if rest else mask
        return elementwise("where", m, v, self)

    # ---- in-place operators (NumPy's a += b: computed, then cast with 'same_kind') --------

    def _inplace(self, name: str, symbol: str, o: Any) -> Array:
        if self.dtype.is_bool and name in ("add", "mul") and (isinstance(
                o, bool | np.bool_) or getattr(getattr(o, "dtype", None), "is_bool", False)):
            name = "or" if name == "add" else "and"  # NumPy's bool loops: logical
        result = matmul(self, o) if name == "matmul" else elementwise(name, self, o)
        kinds = [0 if k.is_bool else 2 if k.is_float else 1 for k in (result.dtype, self.dtype)]
        if kinds[0] > kinds[1]:
            raise TypeError(f"Cannot cast {symbol}= output from {result.dtype.name} to "
                            f"{self.dtype.name} with casting rule 'same_kind' (NumPy's in-place "
                            f"{symbol}=); cast explicitly: a[...] = (a {symbol} b).astype("
                            f"a.dtype), or a = a {symbol} b for a new array")
        if not isinstance(result, Array) or result.shape != self.shape:
            raise ValueError(f"non-broadcastable output operand with shape {self.shape} doesn't "
                             f"match the broadcast shape {getattr(result, 'shape', ())} (a "
                             f"{symbol}= b keeps a's shape)")
        self[...] = result
        return self

    def __iadd__(self, o: Any) -> Array:
        return self._inplace("add", "+", o)

    def __isub__(self, o: Any) -> Array:
        return self._inplace("sub", "-", o)

    def __imul__(self, o: Any) -> Array:
        return self._inplace("mul", "*", o)

    def __itruediv__(self, o: Any) -> Array:
        return self._inplace("div", "/", o)

    def __ifloordiv__(self, o: Any) -> Array:
        return self._inplace("floordiv", "//", o)

    def __imod__(self, o: Any) -> Array:
        return self._inplace("mod", "%", o)

    def __ipow__(self, o: Any) -> Array:
        return self._inplace("pow", "**", o)

    def __iand__(self, o: Any) -> Array:
        return self._inplace("and", "&", o)

    def __ior__(self, o: Any) -> Array:
        return self._inplace("or", "|", o)

    def __ixor__(self, o: Any) -> Array:
        return self._inplace("xor", "^", o)

    def __ilshift__(self, o: Any) -> Array:
        return self._inplace("shl", "<<", o)

    def __irshift__(self, o: Any) -> Array:
        return self._inplace("shr", ">>", o)

    def __imatmul__(self, o: Any) -> Array:
        return self._inplace("matmul", "@", o)

    def _row(self, r: int) -> Array:
        """Sub-array ``r`` along the first axis (a view)."""
        sub = self.shape[1:]
        block = math.prod(sub)
        if self.packed:
            node = build.slice_(self.node(), r * block, block)
            return Array(sub, node=node if len(sub) == 1 else build.reshape(node, sub))
        items = self.items()
        return Array(sub, items=items[r * block:(r + 1) * block])

    def __iter__(self) -> Iterator[Any]:
        for i in range(self.shape[0]):
            yield self[i]


def _expand_ellipsis(keys: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """``a[..., 0]`` as NumPy reads it: the Ellipsis stands for a full slice of every axis the
    other keys (None aside) do not index."""
    if sum(k is Ellipsis for k in keys) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    at = keys.index(Ellipsis)
    used = sum(k is not None for k in keys) - 1
    if used > ndim:
        raise IndexError(f"too many indices for an array of {ndim} dimensions")
    return (*keys[:at], *(slice(None),) * (ndim - used), *keys[at + 1:])


_TRACED_INDEX = (
    "a traced index (a copapy array or value as an index, or a traced boolean mask x[mask]) "
    "picks elements known only when the program runs, so the result's shape or its elements' "
    "places would depend on run-time values and it has no fixed compiled form; select with "
    "cp.where(mask, x, 0.0) (it keeps the shape) or index with a constant list or NumPy array "
    "of ints (x[[2, 0, 1]], A[:, idx])")


def _arrays_in(x: Any) -> Iterator[Array]:
    if isinstance(x, Array):
        yield x
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _arrays_in(v)
    elif isinstance(x, dict):
        yield from _arrays_in(list(x.values()))


#: NumPy functions numpy_dispatch computes with copapy operations (new arrays)
COPAPY_COMPUTED = ("numpy.where", "numpy.clip", "numpy.var", "numpy.std")


class Pending:
    """That an array may be NumPy's view of ``parents`` (made by ``op``, named ``what``);
    ``epoch`` and ``stamp``: the assignment count and the ancestors' versions it was last
    known current at."""

    __slots__ = ("epoch", "op", "parents", "stamp", "what")

    def __init__(self, parents: tuple[Array, ...], op: Any, what: str) -> None:
        self.parents = parents
        self.op = op
        self.what = what
        self.epoch = update.EPOCH[0]
        self.stamp = _lineage(parents)


def _lineage(parents: tuple[Array, ...]) -> int:
    """The sum of the versions of every array the elements may come from: it changes when
    any of them is assigned into (versions only grow)."""
    total = 0
    todo = list(parents)
    while todo:
        a = todo.pop()
        if a._pending is not None:
            total += a.version
            todo.extend(a._pending.parents)
        else:
            total += a.version if a._view is None else a._view.owner.version
    return total


def _numpy_views(func: Any, args: Any, kwargs: Any, result: Any) -> Any:
    """``result`` of NumPy's ``func`` with its new arrays made possible views of the
    arguments (np.flip, np.broadcast_to, np.split ...), decided when needed by ``func`` run
    on the arguments' index maps (read-only where NumPy's view is)."""
    outs = [result] if isinstance(result, Array) else list(result) if isinstance(
        result, tuple | list) else []
    arrays = {id(a): a for a in _arrays_in((args, kwargs))}
    parents = tuple(arrays.values())
    name = f"np.{getattr(func, '__name__', func)}"
    for k, r in enumerate(outs):
        if (isinstance(r, Array) and r._view is None and r._pending is None and r._readonly
                is None and id(r) not in arrays):  # an argument given back is itself
            r._pending = Pending(parents, _rerun(func, args, kwargs, parents, k, len(outs)),
                                 name)
    return result


def _rerun(func: Any, args: Any, kwargs: Any, parents: tuple[Array, ...], k: int,
           count: int) -> Any:
    """``func`` on the parents' index maps (traced values as 0), its output ``k``."""
    def run(maps: list[Any]) -> Any:
        by_id = {id(p): m for p, m in zip(parents, maps, strict=True)}

        def swap(x: Any) -> Any:
            if isinstance(x, Array):
                return by_id[id(x)]
            if isinstance(x, list | tuple):
                return type(x)(swap(v) for v in x)
            return 0 if isinstance(x, Value) else x
        out = func(*swap(args), **{key: swap(v) for key, v in kwargs.items()})
        outs = [out] if isinstance(out, np.ndarray) else list(out)
        return outs[k] if len(outs) == count else None
    return run


_TRACED_SET = (
    "a[i] = v with a traced index (a copapy value or int array as the index) writes elements "
    "known only when the program runs; NumPy raises for an index out of range, which a compiled "
    "program cannot; select instead: a[...] = cp.where(np.arange(len(a)) == i, v, a), or index "
    "with constant ints, slices or a bool mask")


def _traced_key(key: Any) -> Array | None:
    """A traced bool mask used as the whole key, None for a constant key; a traced index of
    any other kind raises naming the fix."""
    keys = key if isinstance(key, tuple) else (key,)
    traced = [k for k in keys if isinstance(k, Value | Array) or (
        isinstance(k, list) and any(isinstance(v, Value | Array) for v in k))]
    if not traced:
        return None
    if len(keys) == 1 and isinstance(key, Array) and key.dtype.is_bool:
        return key
    raise TypeError(_TRACED_SET)


def _cast_operand(value: Any, kind: dt.DType) -> Value[Any] | Array:
    """An assigned value as a copapy value or array of type ``kind``: traced ones cast as
    ``astype`` casts, numbers as NumPy's assignment converts them."""
    if isinstance(value, Value):
        return value if value.dtype is kind else Value(build.cast(value.node, kind))
    if _traced_value(value):
        a = asarray(value, kind)
        return a if a.dtype is kind else a.astype(kind)
    data = update.constant_values(value, kind, np.shape(value))
    while data.ndim and data.shape[0] == 1:  # leading ones broadcast as if absent
        data = data[0]
    if data.ndim == 0:
        return Value(const(_as_scalar(data.item(), kind), kind))
    return _build(data, _checked_shape(data.shape), None, kind)


def _traced_value(value: Any) -> bool:
    """A traced value or array, or a sequence with one among its elements."""
    return isinstance(value, Value | Array) or (isinstance(value, list | tuple) and any(
        _traced_value(v) for v in value))


def _once(flat: Any, picks: Any, src: Array) -> Any:
    """Where an assignment writes an element more than once: the last of each (NumPy leaves
    which one unspecified, so all must be the same value, else it raises); None if none is."""
    order = np.unique(flat[::-1], return_index=True)[1]
    if order.size == flat.size:
        return None
    for t in np.unique(flat):
        writes = picks[flat == t].tolist()
        nodes = {src._element(k) for k in writes}
        same = len(set(writes)) == 1 or (len(nodes) == 1 and None not in nodes)
        if not same:
            raise ValueError(f"the assignment writes element {int(t)} more than once with "
                             f"different values; NumPy leaves which one it keeps unspecified; "
                             f"write each element once")
    return np.sort(flat.size - 1 - order)


def _whole_array(name: str, numpy: dict[str, Any]) -> None:
    """The arguments ``np.sum(a, axis=..., keepdims=...)`` and its kind pass with their
    defaults (``out=None, dtype=None``) are accepted; anything else raises naming the fix."""
    given = {k: v for k, v in numpy.items() if v is not None and v is not False}
    if given:
        args = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise TypeError(f"{name}({args}): copapy takes axis= and keepdims= only (and dtype= "
                        f"for sum, prod, mean); for another type cast first "
                        f"(a.astype(cp.float64).{name}()); no out=: use the result")


def _axis(axis: Any, ndim: int, name: str) -> int:
    """One axis argument (negative counts from the end), or NumPy's AxisError naming it."""
    if not isinstance(axis, int | np.integer):
        raise TypeError(f"{name}: an axis is an int, got {type(axis).__name__}")
    (k,) = shp.normalize_axes(axis, ndim, name)
    return k


def _index(key: Any, length: int) -> int:
    if isinstance(key, bool | np.bool_):  # NumPy reads v[True] as a new axis, not as v[1]
        raise TypeError(f"index {key!r}: a bool is not an index; select with cp.where")
    try:
        k = operator.index(key)
    except TypeError:
        raise TypeError(f"indices must be integers or slices, not {type(key).__name__}") from None
    if k < 0:
        k += length
    if not 0 <= k < length:
        raise IndexError(f"index {key} out of range for length {length}")
    return k


def asarray(x: Any, like: dt.DType | None = None) -> Array:
    """``x`` as a copapy array; NumPy arrays and lists of numbers become constants, weak next to
    traced operands of type ``like`` as a Python number is (float data beside float64 values is
    float64, not float32 rounded)."""
    if isinstance(x, Array):
        return x
    if isinstance(x, Value):
        raise build.ShapeError("a scalar (0-d) traced value where an array is needed: copapy "
                               "arrays have 1 to 4 dimensions; make it one with "
                               "np.atleast_1d(x) or np.ravel(x)")
    data = np.asarray(x)
    dtype = None if like is None else _weak_kind(data.dtype.kind, like)
    if data.ndim > 2:
        return _build(data, _checked_shape(data.shape), None, dtype)
    return vector(data, dtype=dtype) if data.ndim == 1 else matrix(data, dtype=dtype)


def _checked_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    if not 1 <= len(shape) <= shp.MAX_NDIM or 0 in shape:
        raise build.ShapeError(f"copapy arrays have 1 to {shp.MAX_NDIM} dimensions and no "
                               f"empty one, got shape {shape}")
    return tuple(int(d) for d in shape)


def _weak_kind(kind: str, like: dt.DType) -> dt.DType | None:
    """The type constants of NumPy kind ``kind`` take beside values of type ``like``."""
    sample = {"b": True, "i": 0, "u": 0, "f": 0.0}.get(kind)
    return None if sample is None else dt.weak_type(sample, like)


def _traced_type(operands: Sequence[Any]) -> dt.DType | None:
    """The common type of the traced operands (None if there is none)."""
    common = None
    for o in operands:
        if isinstance(o, Value | Array):
            common = o.dtype if common is None else dt.promote(common, o.dtype)
    return common


def elementwise(name: str, *operands: Any) -> Array:
    """``name`` element by element, with NumPy's broadcasting (scalars, and dimensions of 1 or
    missing in front). Packed if any array operand is packed."""
    like = _traced_type(operands)
    arrays = [asarray(o, like) if is_array(o) else None for o in operands]
    shape = shp.broadcast_shape(name, [a.shape for a in arrays if a is not None])
    packed = any(a.packed for a in arrays if a is not None)
    ops = [o if a is None else _broadcast(a.to_packed() if packed else a, shape)
           for a, o in zip(arrays, operands, strict=True)]
    if packed:
        nodes = [o.node() if isinstance(o, Array) else _node(o) for o in ops]
        return Array(shape, node=mark(build.apply(name, *nodes)))
    columns: list[Value[Any]] = []
    elements = [o.items() if isinstance(o, Array) else None for o in ops]
    for i in range(math.prod(shape)):
        args = [o if e is None else e[i] for o, e in zip(ops, elements, strict=True)]
        columns.append(Value(mark(build.apply(name, *(_node(a) for a in args)))))
    return Array(shape, items=columns)


def _broadcast(a: Array, shape: tuple[int, ...]) -> Array:
    """``a`` repeated to ``shape`` (NumPy's broadcasting): packed, one level gather whose
    levels of the repeated axes step by 0 (graph/levels.py), whatever the size; one element,
    a fill."""
    if a.shape == shape:
        return a
    if not a.packed:
        items = a.items()
        return Array(shape, items=[items[i] for i in shp.broadcast_indices(a.shape, shape)])
    flat = build.reshape(a.node(), (a.size,))
    if a.size == 1:
        return Array(shape, node=build.broadcast_to(build.index(flat, 0), shape))
    node = levels.gather(flat, 0, shp.broadcast_levels(a.shape, shape))
    return Array(shape, node=build.reshape(node, shape))


def _permute(a: Array, perm: tuple[int, ...]) -> Array:
    """``a`` with its axes in the order ``perm`` (NumPy's transpose). Packed, one level gather
    with the axes' strides permuted (graph/levels.py): code and nodes independent of the size."""
    if perm == tuple(range(a.ndim)):
        return a
    shape = shp.permuted_shape(a.shape, perm)
    if not a.packed:
        items = a.items()
        order = np.arange(a.size).reshape(a.shape).transpose(perm).reshape(-1)
        return Array(shape, items=[items[i] for i in order])
    return Array(shape, node=build.reshape(levels.permute(a.node(), a.shape, perm), shape))


def _keepdims(name: str, numpy: dict[str, Any]) -> bool:
    keep = numpy.pop("keepdims", False)
    if not isinstance(keep, bool | np.bool_):
        raise TypeError(f"{name}(keepdims={keep!r}): keepdims is True or False")
    return bool(keep)


def _reduce_axes(a: Array, name: str, axis: Any, numpy: dict[str, Any], combine: str,
                 whole: Any) -> Any:
    """``whole`` (a reduction of a 1-D array to a value) of each group of elements ``axis``
    spans. Every output combines its group in the lane order (graph/lanes.py), row-major over
    the reduced axes; packed, with fewer elements per group than outputs, that tree is built
    of element-wise ``combine`` operations on whole slices (the same bits)."""
    keep = _keepdims(name, numpy)
    _whole_array(name, numpy)
    axes = shp.normalize_axes(axis, a.ndim, name)
    out_shape = shp.kept_shape(a.shape, axes, False)
    if not out_shape:
        value_ = whole(a.flatten())
        return Array((1,) * a.ndim, items=[value_]) if keep else value_
    rest = tuple(k for k in range(a.ndim) if k not in axes)
    group = math.prod(a.shape[k] for k in axes)
    outputs = math.prod(out_shape)
    if a.packed and group <= outputs:
        front = build.reshape(_permute(a, (*axes, *rest)).node(), (a.size,))
        rows = [build.slice_(front, r * outputs, outputs) for r in range(group)]
        node = reduce_in_lane_order(rows, lambda x, y: build.apply(combine, x, y))
        result = Array(out_shape, node=build.reshape(node, out_shape))
    else:
        last = _permute(a, (*rest, *axes)).flatten()
        result = Array(out_shape, items=[wrap(whole(last[r * group:(r + 1) * group]))
                                         for r in range(outputs)])
    return result.reshape(shp.kept_shape(a.shape, axes, True)) if keep else result


#: ufuncs whose ``reduce`` is a reduction of arrays (np.add.reduce(a, axis) is a.sum(axis))
#: and whose ``accumulate`` is a running element-wise operation: (method, operation)
UFUNC_REDUCTIONS = {"add": ("sum", "add"), "multiply": ("prod", "mul"),
                    "minimum": ("min", "min"), "maximum": ("max", "max"),
                    "logical_and": ("all", "and"), "logical_or": ("any", "or")}


def ufunc_method(ufunc: Any, method: str, a: Array, axis: Any = 0, dtype: Any = None,
                 out: Any = None, keepdims: bool = False, **rest: Any) -> Any:
    """``np.add.reduce(a, axis)`` and its kin (axis 0 by default, as NumPy's) as the array's
    reductions; ``np.add.accumulate(a, axis)`` as a running operation along the axis."""
    name = getattr(ufunc, "__name__", str(ufunc))
    found = UFUNC_REDUCTIONS.get(name)
    extras = [k for k, v in (("dtype", dtype), ("out", out), *rest.items()) if v is not None
              and not (k == "where" and v is True)]
    if found is None or extras:
        supported = ", ".join(f"np.{u}.{method}" for u in UFUNC_REDUCTIONS)
        raise TypeError(f"np.{name}.{method}{' with ' + ', '.join(extras) if extras else ''} "
                        f"on traced copapy arrays: copapy computes {supported} with axis= "
                        f"{'and keepdims= ' if method == 'reduce' else ''}only")
    reduction, op = found
    if method == "reduce":
        return getattr(a, reduction)(axis=axis, keepdims=keepdims)
    if keepdims:
        raise TypeError(f"np.{name}.accumulate takes no keepdims")
    if name.startswith("logical_"):
        a = a != 0
    elif a.dtype.is_bool:  # NumPy's: sums and products of bools count (int), extremes stay bool
        if op in ("min", "max"):
            op = "and" if op == "min" else "or"
        else:
            a = a.astype(dt.int32)
    return _accumulate(a, op, 0 if axis is None else axis)


def _accumulate(a: Array, op: str, axis: Any) -> Array:
    """The running ``op`` along ``axis``: element i combines elements 0..i in order."""
    k = _axis(axis, a.ndim, "accumulate")
    moved = _permute(a, (k, *[d for d in range(a.ndim) if d != k]))
    rows = moved.reshape(moved.shape[0], -1)
    running = [rows[0]]
    for i in range(1, rows.shape[0]):
        running.append(elementwise(op, running[-1], rows[i]))
    out = stack_rows(running).reshape(moved.shape)
    back = list(range(1, a.ndim))
    back.insert(k, 0)
    return _permute(out, tuple(back))


def _product(a: Array) -> Value[Any]:
    items = [v.node for v in a.items()]
    return Value(reduce_in_lane_order(items, lambda x, y: build.apply("mul", x, y)))


def _arg_extreme(a: Array, name: str, axis: Any, numpy: dict[str, Any]) -> Any:
    """The first index of the extreme along ``axis`` (of the flattened array without one):
    the positions where the extreme (or a NaN) is, their minimum."""
    keep = _keepdims(name, numpy)
    _whole_array(name, numpy)
    if axis is not None and not isinstance(axis, int | np.integer):
        raise TypeError(f"{name}(axis={axis!r}): one axis (an int) or None")
    x = a.flatten() if axis is None else a
    (k,) = shp.normalize_axes(0 if axis is None else axis, x.ndim, name)
    if x.dtype.is_bool:
        x = x.astype(dt.int32)
    extreme = x.max(axis=k, keepdims=True) if name == "argmax" else x.min(axis=k, keepdims=True)
    hit = x == extreme
    if x.dtype.is_float:
        hit = hit | (x != x)
    n = x.shape[k]
    positions = np.arange(n, dtype=np.int32).reshape([n if j == k else 1
                                                       for j in range(x.ndim)])
    first = elementwise("where", hit, asarray(positions), n).min(axis=k, keepdims=keep)
    if axis is None and keep:
        return Array((1,) * a.ndim, items=[first.items()[0]])
    return first


def stack_rows(rows: Sequence[Array]) -> Array:
    sub = rows[0].shape
    if any(r.shape != sub for r in rows):
        raise build.ShapeError("rows must be arrays of equal shape")
    shape = (len(rows), *sub)
    if any(r.packed for r in rows):
        return Array(shape, node=build.concat([r.node() for r in rows], shape))
    return Array(shape, items=[v for r in rows for v in r.items()])


def _reduce(a: Array, op: str, scalar_op: str) -> Value[Any]:
    if a.packed:
        return Value(build.apply(op, a.node()))
    items = [v.node for v in a.items()]
    return Value(reduce_in_lane_order(items, lambda x, y: build.apply(scalar_op, x, y)))


def transpose(a: Any, axes: Sequence[int] | None = None) -> Array:
    """``np.transpose(a, axes)``: the axes in the order ``axes`` (reversed for None); packed,
    one level gather whatever the size."""
    return asarray(a).transpose(axes)


def swapaxes(a: Any, axis1: int, axis2: int) -> Array:
    """``np.swapaxes``: two axes exchanged."""
    return asarray(a).swapaxes(axis1, axis2)


def moveaxis(a: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Array:
    """``np.moveaxis``: the axes ``source`` at the places ``destination``, the others in
    their order."""
    x = asarray(a)
    src, dst = ([_axis(k, x.ndim, "moveaxis") for k in (v if isinstance(v, Sequence) else [v])]
                for v in (source, destination))
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis({source!r}, {destination!r}): as many distinct source as "
                         f"destination axes")
    order = [k for k in range(x.ndim) if k not in src]
    for d, k in sorted(zip(dst, src, strict=True)):
        order.insert(d, k)
    return _permute(x, tuple(order))


def dot(a: Any, b: Any) -> Value[Any]:
    """Σ a_i·b_i in the fixed lane order (same result packed or unpacked)."""
    like = _traced_type((a, b))
    x, y = asarray(a, like), asarray(b, like)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise build.ShapeError(f"dot needs two vectors of equal length, got {x.shape} and "
                               f"{y.shape}")
    if x.packed or y.packed:
        return Value(build.apply("dot", x.node(), y.node()))
    products = [build.apply("mul", p.node, q.node) for p, q in zip(x.items(), y.items(),
                                                                 strict=True)]
    return Value(reduce_in_lane_order(products, lambda s, t: build.apply("add", s, t)))


def matmul(a: Any, b: Any) -> Any:
    for operand in (a, b):
        if not is_array(operand):
            raise build.ShapeError(f"@ multiplies vectors and matrices; {operand!r} is a scalar: "
                                   f"multiply by it with *")
    like = _traced_type((a, b))
    x, y = asarray(a, like), asarray(b, like)
    if x.ndim > 2 or y.ndim > 2:
        return _stacked_matmul(x, y)
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


def _stacked_matmul(x: Array, y: Array) -> Array:
    """NumPy's ``@`` of stacks of matrices: the leading axes broadcast, each pair of
    matrices multiplied (a 1-D operand is one matrix row or column, as NumPy's). Before, the
    (2, 2, 3) @ (3, 2) product failed inside with "dot needs two vectors"."""
    front = x.shape[:-2] if x.ndim > 2 else ()
    back = y.shape[:-2] if y.ndim > 2 else ()
    inner = (x.shape[-1], y.shape[-2] if y.ndim > 1 else y.shape[0])
    try:
        batch = np.broadcast_shapes(front, back)
    except ValueError:
        batch = None
    if batch is None or inner[0] != inner[1]:
        raise build.ShapeError(f"matmul: shapes {x.shape} and {y.shape} do not fit (the last "
                               f"axis of the first must equal the second-to-last of the "
                               f"second, and the leading axes must broadcast)")

    def pick(a: Array, lead: tuple[int, ...], at: tuple[int, ...]) -> Array:
        if not lead:
            return a
        own = at[len(at) - len(lead):]
        matrix: Array = a[tuple(0 if d == 1 else i for i, d in zip(own, lead, strict=True))]
        return matrix

    parts: list[Array] = [matmul(pick(x, front, at), pick(y, back, at))
                          for at in np.ndindex(*batch)]
    return stack_rows(parts).reshape(*batch, *parts[0].shape)


def _rectangular(values: Any, what: str, dtype: Any = object) -> Any:
    """``values`` as a NumPy array, or the ShapeError that says why it is none (NumPy's own
    speaks of "an inhomogeneous shape after 1 dimensions")."""
    try:
        return np.asarray(values, dtype=dtype)
    except ValueError:
        raise build.ShapeError(f"{what} needs a rectangular sequence: rows of one length, "
                               f"numbers or scalar values (not arrays) as elements") from None


def _build(values: Any, shape: tuple[int, ...], packed: bool | None, dtype: Any) -> Array:
    """From numbers (constants), copapy values, or a NumPy array (constant)."""
    flat: list[Any] = list(_rectangular(values, "an array").reshape(-1))
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
            arr = np.asarray(flat)
            raw = dt.storage_array(arr.astype(bool) if kind.is_bool else arr, kind)
            return Array(shape, node=const_array(raw.tobytes(), kind, shape))
        return Array(shape, items=[Value(const(_as_scalar(v, kind), kind)) for v in flat])
    items = [wrap(v) if isinstance(v, Value) else v for v in flat]
    common = None
    for v in items:
        if isinstance(v, Value):
            common = v.dtype if common is None else dt.promote(common, v.dtype)
    assert common is not None
    for v in items:  # numbers beside traced values are weak (as in an operation)
        if not isinstance(v, Value):
            common = dt.weak_type(v.item() if hasattr(v, "item") else v, common)
    if dtype is not None:
        common = dt.as_dtype(dtype)
    values_: list[Value[Any]] = [Value(build.cast(v.node, common)) if isinstance(v, Value)
                                 else Value(const(_as_scalar(v, common), common)) for v in items]
    result = Array(shape, items=values_)
    return result.to_packed() if _auto_packed(packed, len(flat)) else result


def _as_scalar(v: Any, kind: dt.DType) -> bool | int | float:
    """A number as a constant or initial value of ``kind`` (errors as ``cp.value``'s)."""
    return _convert(v.item() if hasattr(v, "item") else v, kind)


def vector(values: Any, packed: bool | None = None, dtype: Any = None) -> Array:
    """A 1-D array from numbers, copapy values or a NumPy array (numbers become constants)."""
    if isinstance(values, Iterator):
        values = list(values)
    try:
        shape = np.shape(values)
    except ValueError:  # ragged, or arrays among the elements: say which
        shape = _rectangular(values, "cp.vector").shape
    if len(shape) != 1:
        raise build.ShapeError(f"cp.vector needs a 1-D sequence, got shape {shape}")
    return _build(values, (int(shape[0]),), packed, dtype)


def matrix(rows: Any, packed: bool | None = None, dtype: Any = None) -> Array:
    """A 2-D array from nested sequences or a NumPy array (row-major)."""
    if isinstance(rows, Array):
        if rows.ndim != 2:
            raise build.ShapeError(f"cp.matrix needs a 2-D array, got shape {rows.shape} (a row: "
                                   f"v.reshape(1, -1), a column: v.reshape(-1, 1))")
        out = rows.copy() if dtype is None else rows.astype(dtype)  # a copy, as np.array's
        return out if packed is None else out.to_packed() if packed else out.to_unpacked()
    shape = _rectangular(rows, "cp.matrix").shape
    if len(shape) != 2:
        raise build.ShapeError(f"cp.matrix needs a 2-D sequence (list of rows), got shape {shape}")
    return _build(rows, (int(shape[0]), int(shape[1])), packed, dtype)


def array_input(initial: Any, packed: bool | None = None, dtype: Any = None,
                name: str | None = None) -> Array:
    """An input array (written by the host before runs) with the given initial values."""
    arr = _rectangular(initial, "cp.value", None)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"an input array holds numbers; got elements of NumPy dtype {arr.dtype} "
                        f"({arr.reshape(-1)[:3].tolist()!r}...)")
    if arr.ndim and 0 in arr.shape:
        raise build.ShapeError(f"an empty input array (shape {arr.shape}; cp.value or a "
                               f"@cp.jit argument): copapy arrays have at least one element; "
                               f"an empty array has nothing to compute, skip the call")
    _checked_shape(arr.shape)
    kind = dt.as_dtype(dtype) if dtype is not None else (
        dt.float32 if arr.dtype.kind == "f" else dt.bool_ if arr.dtype.kind == "b" else dt.int32)
    # the checks of one number, for every element; initial bools by truth value (cp.value)
    stored = dt.storage_array(arr.astype(bool) if kind.is_bool else arr, kind)
    shape = tuple(int(d) for d in arr.shape)
    if _auto_packed(packed, arr.size):
        return Array(shape, node=fresh_array_input(kind, stored.tobytes(), shape, name)
                     ).refuse_assignment(INPUT_ARRAY)
    # one port per element, named as cp.save names an unpacked array's elements
    items = [value(_as_scalar(v, kind), kind, name=None if name is None else f"{name}[{k}]")
             for k, v in enumerate(arr.reshape(-1))]
    if name is not None:  # tg.save describes the array as of this shape, not 1-D
        element_shapes.record(items[0].node, shape)
    return Array(shape, items=items).refuse_assignment(INPUT_ARRAY)


INPUT_ARRAY = ("it is a program input (the host writes its elements before each run, "
               "tg.write); assign into a copy instead: y = x.copy(); y[0] = v")


def _floats(a: Array) -> Array:
    """``a``, or for int32 and bool elements ``a`` as float32 (as ``/`` converts them)."""
    if a.dtype.is_float:
        return a
    if a.packed:
        return Array(a.shape, node=build.cast(a.node(), dt.float32))
    return Array(a.shape, items=[Value(build.cast(v.node, dt.float32)) for v in a.items()])


def norm(x: Any) -> Value[float]:
    """Euclidean length sqrt(Σ x_i²) (fixed summation order); int32 and bool elements as
    float32 (their squares would wrap in int32)."""
    a = _floats(asarray(x))
    result: Value[float] = _op("sqrt", dot(a.flatten(), a.flatten()))
    return result


def cross(a: Any, b: Any) -> Array:
    """Cross product of two 3-vectors."""
    like = _traced_type((a, b))
    x, y = asarray(a, like).to_unpacked(), asarray(b, like).to_unpacked()
    if x.shape != (3,) or y.shape != (3,):
        raise build.ShapeError(f"cross needs two 3-vectors, got {x.shape} and {y.shape}")
    x0, x1, x2 = x.items()
    y0, y1, y2 = y.items()
    return Array((3,), items=[x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, x0 * y1 - x1 * y0])


def _from_objects(values: Any) -> Array:
    """An object ndarray of traced values (NumPy's np.concatenate of them) as a copapy array."""
    return _build(values, _checked_shape(values.shape), None, None)


def flat_array(x: Any) -> Array:
    """``x`` flattened (``axis=None`` of np.sort, np.cumsum): a scalar value as one element,
    as NumPy's 0-d array is."""
    return Array((1,), items=[x]) if isinstance(x, Value) else asarray(x).flatten()


def scalar_method(x: Value[Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> Any:
    """NumPy's array method ``name`` of a traced scalar (a reduction's result is a NumPy scalar
    in NumPy, whose methods code written for NumPy calls): as the method of a one-element
    vector, with NumPy's rules for a 0-d array (only ``axis=None``)."""
    one = flat_array(x)
    if name in ("reshape", "ravel", "flatten", "squeeze", "transpose", "swapaxes", "repeat",
                "take"):
        shaped = np.empty((), np.bool_)
        getattr(shaped, name)(*args, **kwargs)  # NumPy's errors for a 0-d array
        if name == "reshape":
            return one.reshape(*args, **kwargs)
        if name in ("ravel", "flatten"):
            return one
        return one.reshape(()) if name in ("squeeze", "transpose", "swapaxes") else getattr(
            one, name)(*args, **kwargs)
    axis = args[0] if args else kwargs.pop("axis", None)
    if axis not in (None, ()):
        raise np.exceptions.AxisError(f"{name}(axis={axis!r}) of a scalar: a 0-d value has "
                                      f"no axes (axis=None)")
    kwargs.pop("keepdims", None)  # a 0-d result either way
    return getattr(one, name)(*args[1:], **kwargs)


install_array_support(elementwise, array_input, matmul, _from_objects, scalar_method)
