"""Traced scalar values: what users compute with (``cp.value``)."""

from __future__ import annotations

import math
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    NoReturn,
    Protocol,
    TypeVar,
    overload,
    runtime_checkable,
)

from . import array_shapes as shp
from . import dtypes as dt
from .dtypes import DType
from .graph import build
from .graph.intervals import Interval, rounded_bounds
from .graph.location import mark
from .graph.node import Node, const, fresh_input, input_initial
from .graph.ops import REGISTRY
from .graph.ranges import declare

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .arrays import Array

Scalar = bool | int | float
#: what a value holds, as a Python type: bool, int (int32) or float (float32/float64)
T = TypeVar("T", covariant=True)

_TRUTH_HINT = (
    "the truth value of a traced copapy value is not known while tracing (it is computed at "
    "run time); use cp.where(cond, a, b) to select between values, or compute on the result: "
    "cp.min / cp.max / cp.clamp for Python's min() and max(), & | ~ (or cp.logical_and) for "
    "and / or / not, (lo < x) & (x < hi) for lo < x < hi"
)


def _no_python_value(kind: str, conversion: str) -> str:
    return (f"{kind}() of a traced copapy value: it has no Python value yet (it is computed when "
            f"the program runs); convert it in the program with {conversion}, or run the "
            f"program (tg.compile / tg.run, or @cp.jit) and read the result (tg.read(x))")


def format_traced(x: object, spec: str) -> str:
    """``f"{x}"`` of a traced value or array is its repr; a format spec has no number to format."""
    if spec:
        raise TypeError(f"format {spec!r} of a traced copapy {type(x).__name__}: it has no Python "
                        f"value yet; format the result you read (tg.read(x))")
    return repr(x)


def _no_python_function(name: str) -> str:
    return (f"{name}() of a traced copapy value gives a Python int, which is not known until "
            f"the program runs; use cp.{name}(x) (a float value; cp.cast(cp.{name}(x), "
            f"cp.int32) for an int32 one)")


@runtime_checkable
class Traced(Protocol):
    """What tasks and targets accept: anything that names the graph nodes it computes
    (values, arrays, quaternions)."""

    def nodes(self) -> list[Node]: ...


def is_traced(x: object) -> bool:
    """``isinstance(x, Traced)`` without typing's protocol check, which costs microseconds
    per call (a jitted call that misses its fast plan made one per argument)."""
    return hasattr(type(x), "nodes")


def flatten(values: Iterable[Any], what: str) -> list[Any]:
    """The graph nodes behind values, arrays and quaternions."""
    nodes: list[Any] = []
    for v in values:
        if is_traced(v):
            nodes.extend(v.nodes())
        else:
            raise TypeError(f"{what} takes copapy values, arrays or quaternions, got "
                            f"{type(v).__name__}")
    return nodes


def is_array(x: Any) -> bool:
    """Whether an operand is an array (copapy array, NumPy array, list or tuple): the one rule
    deciding between a scalar operation and an element-wise one (``arrays.elementwise``)."""
    return isinstance(x, list | tuple) or getattr(x, "ndim", 0) > 0


def _node(x: Any) -> Node | Scalar:
    """The node or number of a scalar operand."""
    if isinstance(x, Value):
        return x.node
    if isinstance(x, bool | int | float):
        return x
    item = getattr(x, "item", None)
    if callable(item) and getattr(x, "ndim", 0) == 0:
        return item()  # type: ignore[no-any-return]
    raise TypeError(
        f"unsupported operand {type(x).__name__} {x!r}: expected a copapy value or a number"
    )


class Value(Generic[T]):
    """A scalar in the computation graph. Arithmetic builds new values; nothing runs yet."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def dtype(self) -> DType:
        return self.node.dtype

    def __repr__(self) -> str:
        return f"<copapy value {self.node!r}>"

    def __bool__(self) -> NoReturn:
        raise TypeError(_TRUTH_HINT)

    __hash__ = None  # type: ignore[assignment]  # == builds a comparison, so no hashing

    def __index__(self) -> NoReturn:
        raise TypeError("a traced copapy value cannot be used as a Python index or size: it "
                        "has no value until the program runs; index with Python ints, select "
                        "with cp.where(cond, a, b)")

    def __float__(self) -> NoReturn:
        raise TypeError(_no_python_value("float", "cp.cast(x, cp.float32)"))

    def __int__(self) -> NoReturn:
        raise TypeError(_no_python_value("int", "cp.cast(x, cp.int32)"))

    def __complex__(self) -> NoReturn:
        raise TypeError("copapy has no complex numbers; a traced value has no Python value "
                        "until the program runs")

    def __round__(self, ndigits: int | None = None) -> NoReturn:
        raise TypeError(_no_python_function("round"))

    def __floor__(self) -> NoReturn:
        raise TypeError(_no_python_function("floor"))

    def __ceil__(self) -> NoReturn:
        raise TypeError(_no_python_function("ceil"))

    def __trunc__(self) -> NoReturn:
        raise TypeError(_no_python_function("trunc"))

    def __format__(self, spec: str) -> str:
        return format_traced(self, spec)

    def __pos__(self) -> Value[T]:
        return self

    def conjugate(self) -> Value[T]:
        """The value itself: copapy's numbers are real (NumPy's np.vdot asks for it)."""
        return self

    def conj(self) -> Value[T]:
        """The value itself: copapy's numbers are real."""
        return self

    def nodes(self) -> list[Node]:
        """What the compiler computes for this value (the traced-value protocol that targets
        and tasks use for values, arrays and quaternions alike)."""
        return [self.node]

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return array_function(func, args, kwargs)

    def astype(self, dtype: Any) -> Value[Any]:
        """``cp.cast(self, dtype)``, as NumPy's ``x.astype(np.int32)`` reads."""
        return Value(mark(build.cast(self.node, dt.as_dtype(dtype))))

    def round(self, decimals: int = 0, out: None = None) -> Value[T]:
        """``cp.round(self)``, which ``np.round(value)`` calls; ``decimals`` as NumPy's."""
        result: Value[T] = round_decimals(self, decimals, out)
        return result

    # the operators; result types follow docs/semantics.md (int op float -> float)
    # ---- generated by tools/gen_api.py from the registry: do not edit ----
    @overload
    def __add__(self: Value[bool], o: bool | Value[bool]) -> Value[int]: ...
    @overload
    def __add__(self: Value[int], o: int | Value[int]) -> Value[int]: ...
    @overload
    def __add__(self, o: float | Value[Any]) -> Value[float]: ...
    def __add__(self, o: Any) -> Value[Any]:
        return _op("add", self, o)

    @overload
    def __radd__(self: Value[bool], o: bool) -> Value[int]: ...
    @overload
    def __radd__(self: Value[int], o: int) -> Value[int]: ...
    @overload
    def __radd__(self, o: float) -> Value[float]: ...
    def __radd__(self, o: Any) -> Value[Any]:
        return _op("add", o, self)

    @overload
    def __sub__(self: Value[bool], o: bool | Value[bool]) -> Value[int]: ...
    @overload
    def __sub__(self: Value[int], o: int | Value[int]) -> Value[int]: ...
    @overload
    def __sub__(self, o: float | Value[Any]) -> Value[float]: ...
    def __sub__(self, o: Any) -> Value[Any]:
        return _op("sub", self, o)

    @overload
    def __rsub__(self: Value[bool], o: bool) -> Value[int]: ...
    @overload
    def __rsub__(self: Value[int], o: int) -> Value[int]: ...
    @overload
    def __rsub__(self, o: float) -> Value[float]: ...
    def __rsub__(self, o: Any) -> Value[Any]:
        return _op("sub", o, self)

    @overload
    def __mul__(self: Value[bool], o: bool | Value[bool]) -> Value[int]: ...
    @overload
    def __mul__(self: Value[int], o: int | Value[int]) -> Value[int]: ...
    @overload
    def __mul__(self, o: float | Value[Any]) -> Value[float]: ...
    def __mul__(self, o: Any) -> Value[Any]:
        return _op("mul", self, o)

    @overload
    def __rmul__(self: Value[bool], o: bool) -> Value[int]: ...
    @overload
    def __rmul__(self: Value[int], o: int) -> Value[int]: ...
    @overload
    def __rmul__(self, o: float) -> Value[float]: ...
    def __rmul__(self, o: Any) -> Value[Any]:
        return _op("mul", o, self)

    def __truediv__(self, o: Any) -> Value[float]:
        return _op("div", self, o)

    def __rtruediv__(self, o: Any) -> Value[float]:
        return _op("div", o, self)

    @overload
    def __floordiv__(self: Value[bool], o: bool | Value[bool]) -> Value[int]: ...
    @overload
    def __floordiv__(self: Value[int], o: int | Value[int]) -> Value[int]: ...
    @overload
    def __floordiv__(self, o: float | Value[Any]) -> Value[float]: ...
    def __floordiv__(self, o: Any) -> Value[Any]:
        return _op("floordiv", self, o)

    @overload
    def __rfloordiv__(self: Value[bool], o: bool) -> Value[int]: ...
    @overload
    def __rfloordiv__(self: Value[int], o: int) -> Value[int]: ...
    @overload
    def __rfloordiv__(self, o: float) -> Value[float]: ...
    def __rfloordiv__(self, o: Any) -> Value[Any]:
        return _op("floordiv", o, self)

    @overload
    def __mod__(self: Value[bool], o: bool | Value[bool]) -> Value[int]: ...
    @overload
    def __mod__(self: Value[int], o: int | Value[int]) -> Value[int]: ...
    @overload
    def __mod__(self, o: float | Value[Any]) -> Value[float]: ...
    def __mod__(self, o: Any) -> Value[Any]:
        return _op("mod", self, o)

    @overload
    def __rmod__(self: Value[bool], o: bool) -> Value[int]: ...
    @overload
    def __rmod__(self: Value[int], o: int) -> Value[int]: ...
    @overload
    def __rmod__(self, o: float) -> Value[float]: ...
    def __rmod__(self, o: Any) -> Value[Any]:
        return _op("mod", o, self)

    @overload
    def __pow__(self: Value[bool], o: bool | Value[bool]) -> Value[int]: ...
    @overload
    def __pow__(self: Value[int], o: int | Value[int]) -> Value[int]: ...
    @overload
    def __pow__(self, o: float | Value[Any]) -> Value[float]: ...
    def __pow__(self, o: Any) -> Value[Any]:
        return _op("pow", self, o)

    @overload
    def __rpow__(self: Value[bool], o: bool) -> Value[int]: ...
    @overload
    def __rpow__(self: Value[int], o: int) -> Value[int]: ...
    @overload
    def __rpow__(self, o: float) -> Value[float]: ...
    def __rpow__(self, o: Any) -> Value[Any]:
        return _op("pow", o, self)

    def __neg__(self) -> Value[T]:
        return _op("neg", self)

    def __abs__(self) -> Value[T]:
        return _op("abs", self)

    def __lt__(self, o: Any) -> Value[bool]:
        return _op("lt", self, o)

    def __le__(self, o: Any) -> Value[bool]:
        return _op("le", self, o)

    def __gt__(self, o: Any) -> Value[bool]:
        return _op("gt", self, o)

    def __ge__(self, o: Any) -> Value[bool]:
        return _op("ge", self, o)

    def __eq__(self, o: Any) -> Value[bool]:  # type: ignore[override]
        return _op("eq", self, o)

    def __ne__(self, o: Any) -> Value[bool]:  # type: ignore[override]
        return _op("ne", self, o)

    @overload
    def __and__(self: Value[bool], o: bool | Value[bool]) -> Value[bool]: ...
    @overload
    def __and__(self, o: int | Value[int]) -> Value[int]: ...
    def __and__(self, o: Any) -> Value[Any]:
        return _op("and", self, o)

    @overload
    def __rand__(self: Value[bool], o: bool) -> Value[bool]: ...
    @overload
    def __rand__(self, o: int) -> Value[int]: ...
    def __rand__(self, o: Any) -> Value[Any]:
        return _op("and", o, self)

    @overload
    def __or__(self: Value[bool], o: bool | Value[bool]) -> Value[bool]: ...
    @overload
    def __or__(self, o: int | Value[int]) -> Value[int]: ...
    def __or__(self, o: Any) -> Value[Any]:
        return _op("or", self, o)

    @overload
    def __ror__(self: Value[bool], o: bool) -> Value[bool]: ...
    @overload
    def __ror__(self, o: int) -> Value[int]: ...
    def __ror__(self, o: Any) -> Value[Any]:
        return _op("or", o, self)

    @overload
    def __xor__(self: Value[bool], o: bool | Value[bool]) -> Value[bool]: ...
    @overload
    def __xor__(self, o: int | Value[int]) -> Value[int]: ...
    def __xor__(self, o: Any) -> Value[Any]:
        return _op("xor", self, o)

    @overload
    def __rxor__(self: Value[bool], o: bool) -> Value[bool]: ...
    @overload
    def __rxor__(self, o: int) -> Value[int]: ...
    def __rxor__(self, o: Any) -> Value[Any]:
        return _op("xor", o, self)

    def __invert__(self) -> Value[T]:
        return _op("lnot" if self.dtype.is_bool else "invert", self)

    def __lshift__(self, o: int | Value[int]) -> Value[int]:
        return _op("shl", self, o)

    def __rlshift__(self, o: int) -> Value[int]:
        return _op("shl", o, self)

    def __rshift__(self, o: int | Value[int]) -> Value[int]:
        return _op("shr", self, o)

    def __rrshift__(self, o: int) -> Value[int]:
        return _op("shr", o, self)
    # ---- end of generated code ----


def round_decimals(x: Any, decimals: int, out: Any) -> Any:
    """NumPy's ``round(x, decimals)`` of a traced value or array: the elements scaled by
    10**|decimals| (a weak constant, so in their type, as NumPy 2's), rounded half to even and
    scaled back; ints and bools unchanged for decimals >= 0 (NumPy's)."""
    if out is not None or not isinstance(decimals, int):
        raise ValueError(f"round(decimals={decimals!r}{', out=...' if out is not None else ''})"
                         f": copapy takes an int decimals= and no out= (arrays are immutable)")
    if not x.dtype.is_float:
        if decimals >= 0:
            return x
        raise ValueError(f"round(decimals={decimals}) of int32 or bool values: cast to floats "
                         f"first (x.astype(np.float32))")
    if decimals == 0:
        return _op("round", x)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return _op("div", _op("round", _op("mul", x, scale)), scale)
    return _op("mul", _op("round", _op("div", x, scale)), scale)


def _no_arrays(*_: Any, **__: Any) -> Any:
    raise RuntimeError("copapy.arrays is not loaded (import copapy, not copapy.value alone)")


class _ArraySupport:
    """How operations with array operands are computed. Arrays are built from values, so this
    module cannot import them: copapy.arrays installs its functions here when it loads."""

    elementwise: Callable[..., Any] = _no_arrays
    array_input: Callable[..., Any] = _no_arrays
    matmul: Callable[..., Any] = _no_arrays
    from_objects: Callable[..., Any] = _no_arrays


ARRAYS = _ArraySupport()


def install_array_support(elementwise: Callable[..., Any], array_input: Callable[..., Any],
                          matmul: Callable[..., Any], from_objects: Callable[..., Any]) -> None:
    ARRAYS.elementwise = elementwise
    ARRAYS.array_input = array_input
    ARRAYS.matmul = matmul
    ARRAYS.from_objects = from_objects


def _op(name: str, *operands: Any) -> Value[Any]:
    """``name`` applied to the operands: a Value for scalars, an Array (element-wise) as soon
    as one operand is an array. Every operator and function of the DSL goes through here.

    (Typed for the scalar case, which the operators' overloads describe; for array operands
    type checkers use the operators of Array.)"""
    args: list[Node | Scalar] = []
    for o in operands:
        if isinstance(o, Value):
            args.append(o.node)
        elif is_array(o):
            return ARRAYS.elementwise(name, *operands)  # type: ignore[no-any-return]
        else:
            args.append(_node(o))
    return Value(mark(build.apply(name, *args), 3))


#: NumPy ufuncs that compute a registry operation, by the ufunc's name: np.sin(x) on a traced
#: value is cp.sin(x). The bool-converting public functions (np.logical_and) come too.
UFUNCS: dict[str, tuple[str, str]] = {
    **{spec.numpy: (spec.name, "") for spec in REGISTRY.values() if spec.numpy},
    **{spec.api: (spec.name, spec.api_cast) for spec in REGISTRY.values()
       if spec.api.startswith("logical_")},
}


#: NumPy ufuncs that are a short exact expression of registry operations (their NumPy result:
#: x != x is True exactly for NaN, x - x is 0 exactly for finite x)
_COMPOSED: dict[str, Callable[..., Any]] = {
    "isnan": lambda x: _op("ne", x, x),
    "isinf": lambda x: _op("eq", _op("abs", x), float("inf")),
    "isfinite": lambda x: _op("eq", _op("sub", x, x), 0),
    "square": lambda x: _op("mul", x, x),
    # angles, logarithms, hyperbolics and NaN-ignoring extremes control code calls: a few
    # registry operations each, within float32 rounding of NumPy's (docs/semantics.md)
    "deg2rad": lambda x: _op("mul", _floating(x), math.pi / 180),
    "radians": lambda x: _op("mul", _floating(x), math.pi / 180),
    "rad2deg": lambda x: _op("mul", _floating(x), 180 / math.pi),
    "degrees": lambda x: _op("mul", _floating(x), 180 / math.pi),
    "log10": lambda x: _log_base(_floating(x), 10.0),
    "log2": lambda x: _log_base(_floating(x), 2.0),
    "sinh": lambda x: _op("mul", _op("sub", _op("expm1", _floating(x)),
                                      _op("expm1", _op("neg", _floating(x)))), 0.5),
    "cosh": lambda x: _op("mul", _op("add", _op("exp", _floating(x)),
                                      _op("exp", _op("neg", _floating(x)))), 0.5),
    "fmax": lambda a, b: _nan_ignoring("max", a, b),
    "fmin": lambda a, b: _nan_ignoring("min", a, b),
    "heaviside": lambda x, h0: _heaviside(_floating(x), _floating(h0)),
    "vecdot": lambda a, b: _vecdot(a, b),
}


def _vecdot(a: Any, b: Any) -> Any:
    """np.vecdot: Σ a·b along the last axis (copapy's numbers are real: no conjugate)."""
    product: Any = _op("mul", a, b)
    return product.sum(axis=-1) if is_array(product) else product


def _heaviside(x: Any, h0: Any) -> Any:
    """np.heaviside: 0 below zero, 1 above, h0 at zero, NaN for NaN (floats, as NumPy's)."""
    step = _op("where", _op("lt", x, 0), 0.0, _op("where", _op("gt", x, 0), 1.0, h0))
    return _op("where", _op("ne", x, x), x, step)


def _log_base(x: Any, base: float) -> Any:
    """np.log2 / np.log10 as log(x) / log(base): float32 through float64 and rounded once, so
    that log2(8) is 3 and log10(1000) is 3 (in float32 the product's two roundings gave
    2.9999998); float64 keeps the composition (a few ulps, docs/semantics.md)."""
    if getattr(getattr(x, "dtype", None), "name", "float32") == "float64":
        return _op("mul", _op("log", x), 1 / math.log(base))
    return _op("cast_f32", _op("mul", _op("log", _op("cast_f64", x)), 1 / math.log(base)))


def _floating(x: Any) -> Any:
    """x as floats for a float-valued ufunc (int32 and bool as float32)."""
    kind = getattr(x, "dtype", None)
    return x if getattr(kind, "is_float", True) else _op("cast_f32", x)


def _nan_ignoring(op: str, a: Any, b: Any) -> Any:
    """np.fmax / np.fmin: the other operand where one is NaN."""
    return _op("where", _op("ne", b, b), a, _op("where", _op("ne", a, a), b, _op(op, a, b)))


def array_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """A NumPy ufunc called on traced values: the copapy operation it names, or an error that
    says which copapy function to use."""
    name = getattr(ufunc, "__name__", str(ufunc))
    if name == "matmul" and method == "__call__" and not kwargs:
        return ARRAYS.matmul(*inputs)
    if (name in _BOOL_UFUNCS and method == "__call__" and not kwargs
            and all(_is_bool(o) for o in inputs)):
        logical = _BOOL_UFUNCS[name]  # NumPy's bool loops: np.add of bools is or, not 2
        return inputs[0] if logical is None else _op(logical, *inputs)
    composed = _COMPOSED.get(name)
    if composed is not None and method == "__call__" and not kwargs:
        return composed(*inputs)
    found = UFUNCS.get(name)
    if found is None or method != "__call__" or kwargs:
        known = sorted(spec.api for spec in REGISTRY.values() if spec.api)
        what = (f"np.{name}.{method}" if method != "__call__" else
                f"np.{name} with {', '.join(kwargs)}=" if kwargs else f"np.{name}")
        raise TypeError(f"{what} cannot compute on traced copapy values (they are computed "
                        f"when the program runs); use copapy's functions (cp.{', cp.'.join(known)})"
                        f" and operators")
    op, cast = found
    kinds = [getattr(getattr(o, "dtype", None), "is_float", True) for o in inputs]
    if name in _WHOLE_ALREADY and not any(kinds):
        return inputs[0]  # NumPy 2's floor/ceil/trunc of ints and bools: the input unchanged
    if op == "invert" and getattr(getattr(inputs[0], "dtype", None), "is_bool", False):
        op = "lnot"  # np.invert of bools is logical, as ~ (it gave the int32 -2 and -1)
    operands = [_op(f"cast_{cast}", o) for o in inputs] if cast else inputs
    return _op(op, *operands)


#: ufuncs whose NumPy loop for bools is logical (bool result): add and maximum are or,
#: multiply and minimum are and, absolute is the input (copapy's int32 arithmetic gave 2)
_BOOL_UFUNCS: dict[str, str | None] = {"add": "or", "maximum": "or", "fmax": "or",
                                       "multiply": "and", "minimum": "and", "fmin": "and",
                                       "absolute": None}


def _is_bool(o: Any) -> bool:
    """A bool operand: a traced bool or a Python/NumPy bool constant."""
    kind = getattr(o, "dtype", None)
    return bool(getattr(kind, "is_bool", False)) or isinstance(o, bool) or (
        getattr(kind, "kind", "") == "b")


#: ufuncs that give an int or bool input back unchanged in NumPy 2 (copapy's float kernels
#: would make them float32 and round integers beyond 2**24)
_WHOLE_ALREADY = ("floor", "ceil", "trunc")


def _np_clip(a: Any, a_min: Any = None, a_max: Any = None, out: None = None, *,
             min: Any = None, max: Any = None) -> Any:
    low = a_min if a_min is not None else min
    high = a_max if a_max is not None else max
    if out is not None or (low is None and high is None):
        raise TypeError("np.clip of traced copapy values takes a bound and no out=: "
                        "cp.clamp(x, low, high), cp.max(x, low) or cp.min(x, high)")
    if high is None:  # NumPy's one-sided clip is np.maximum(a, low): low on a tie (0.0, -0.0)
        return _op("max", a, low)
    if low is None:
        return _op("min", a, high)
    return _op("min", high, _op("max", low, a))  # cp.clamp's definition: a kept on a tie


def _np_var(a: Any, std: bool, axis: Any = None, dtype: Any = None, out: Any = None,
            ddof: Any = 0, keepdims: Any = False, **numpy: Any) -> Any:
    """np.var / np.std as NumPy defines them, over ``axis`` (all axes without it):
    mean((a - mean(a))**2) * n / max(n - ddof, 0), std its square root (NumPy's own code asked
    the elements for a NumPy dtype)."""
    name = "std" if std else "var"
    correction = numpy.pop("correction", None)
    extras = [k for k, v in (("dtype", dtype), ("out", out), *numpy.items())
              if v is not None and v is not True and not _no_value(v)]
    if extras:
        raise TypeError(f"np.{name} of a copapy array takes axis=, ddof= (or correction=) and "
                        f"keepdims= only, got {', '.join(extras)}")
    if correction is not None and not _no_value(correction):
        ddof = correction
    keep = False if _no_value(keepdims) else bool(keepdims)
    centred = a - a.mean(axis=axis, keepdims=True)
    count = math.prod(a.shape[k] for k in shp.normalize_axes(axis, a.ndim, f"np.{name}"))
    var = (centred * centred).sum(axis=axis, keepdims=keep) / float(max(count - ddof, 0))
    return _op("sqrt", var) if std else var


def _no_value(v: Any) -> bool:
    """NumPy's placeholder of an argument not given (np._NoValue)."""
    return type(v).__name__ == "_NoValueType"


#: NumPy functions copapy implements itself, by module and name ("numpy.sort",
#: "numpy.linalg.solve": a name alone clashes across NumPy's modules). array_ops.py and
#: numpy_functions.py register them: ``np.sort(x)`` on a traced array calls ``cp.sort(x)``
NUMPY_FUNCTIONS: dict[str, Callable[..., Any]] = {}

#: NumPy functions whose result's shape depends on the elements' values: a traced array has a
#: fixed shape, so they have no compiled form (the value: what to write instead)
DATA_SHAPED: dict[str, str] = {
    "numpy.unique": "sort instead (np.sort keeps the shape) or count matches of known values "
                    "((x == v).sum() for each v)",
    "numpy.nonzero": "select with cp.where(mask, x, 0.0), or count with mask.sum()",
    "numpy.flatnonzero": "select with cp.where(mask, x, 0.0), or count with mask.sum()",
    "numpy.argwhere": "select with cp.where(mask, x, 0.0), or count with mask.sum()",
    "numpy.extract": "select with cp.where(mask, x, 0.0)",
    "numpy.trim_zeros": "keep the zeros (cp.where) or index with constant bounds",
    "numpy.intersect1d": "compare against the known values ((x == v).any() for each v)",
    "numpy.union1d": "compare against the known values ((x == v).any() for each v)",
    "numpy.setdiff1d": "compare against the known values ((x == v).any() for each v)",
}

#: NumPy functions and modules (a name ending in ".") copapy does not compute on traced
#: values; refused by name (their own code fails deep inside on traced elements)
UNSUPPORTED = ("numpy.fft.", "numpy.random.", "numpy.polynomial.", "numpy.linalg.eig",
               "numpy.linalg.eigh", "numpy.linalg.eigvals", "numpy.linalg.eigvalsh",
               "numpy.linalg.svd", "numpy.linalg.svdvals", "numpy.linalg.qr",
               "numpy.linalg.lstsq", "numpy.linalg.pinv", "numpy.linalg.matrix_rank",
               "numpy.linalg.cond", "numpy.linalg.tensorsolve", "numpy.linalg.tensorinv",
               "numpy.ix_")


def register_numpy_function(name: str, implementation: Callable[..., Any]) -> None:
    """``implementation`` computes NumPy's function ``name`` ("numpy.sort",
    "numpy.linalg.solve": its module and name) on traced arrays."""
    NUMPY_FUNCTIONS[name] = implementation


def numpy_name(func: Any) -> str:
    """NumPy's function as its module and name ("numpy.linalg.solve")."""
    return f"{getattr(func, '__module__', None) or 'numpy'}.{getattr(func, '__name__', func)}"


def shown(qualified: str) -> str:
    """``numpy.linalg.eig`` as users write it: ``np.linalg.eig``."""
    return "np" + qualified.removeprefix("numpy")


def _covered() -> str:
    return (f"NumPy's ufuncs, reductions, np.where, np.clip, "
            f"{', '.join(sorted(shown(n) for n in NUMPY_FUNCTIONS))} "
            f"(docs/guide/concepts/arrays.md, 'NumPy functions on traced arrays')")


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A NumPy function called on traced values: copapy's own implementation (registered, or
    np.where and np.clip as select and clamp); a clear TypeError for what has no fixed-shape
    compiled form or no copapy implementation; else NumPy's implementation on the elements."""
    qualified = numpy_name(func)
    name = getattr(func, "__name__", "")
    own = NUMPY_FUNCTIONS.get(qualified)
    if own is not None:
        return own(*args, **kwargs)
    if qualified == "numpy.where" and len(args) == 3 and not kwargs:
        return _op("where", *args)
    if qualified == "numpy.clip":
        return _np_clip(*args, **kwargs)
    if qualified in ("numpy.var", "numpy.std") and args and hasattr(args[0], "mean"):
        return _np_var(args[0], name == "std", *args[1:], **kwargs)
    instead = DATA_SHAPED.get(qualified)
    if instead is not None:
        raise TypeError(f"{shown(qualified)} of a traced copapy array: its result's shape "
                        f"depends on the elements' values, which exist only when the program "
                        f"runs (a compiled result has a fixed shape); {instead}")
    if any(qualified == u or (u.endswith(".") and qualified.startswith(u)) for u in UNSUPPORTED):
        raise TypeError(f"{shown(qualified)} is not supported on traced copapy values; copapy "
                        f"computes {_covered()}")
    implementation = getattr(func, "_implementation", getattr(func, "__wrapped__", None))
    if implementation is None:
        return NotImplemented
    try:
        result = implementation(*args, **kwargs)
    except Exception as error:  # re-raised as is unless NumPy's code failed
        if not _needs_values(error):
            raise
        raise TypeError(f"{shown(qualified)} is not supported on traced copapy values: NumPy's "
                        f"own implementation needs the elements' values, which exist only when "
                        f"the program runs ({type(error).__name__} inside NumPy: "
                        f"{str(error)[:120]}); copapy computes {_covered()}") from error
    return _traced_objects(result)


def _traced_objects(result: Any) -> Any:
    """NumPy's result with its object arrays of traced values as copapy arrays (np.concatenate,
    np.tensordot and others build them: later operations, np.sort, the jit's result, want
    copapy arrays); anything else unchanged."""
    if isinstance(result, tuple | list) and any(_is_object_array(r) for r in result):
        return type(result)(_traced_objects(r) for r in result)
    if _is_object_array(result):
        return ARRAYS.from_objects(result)
    if type(result).__name__ == "ndarray" and result.ndim == 0 and isinstance(result.item(),
                                                                              Value):
        return result.item()  # a 0-d object array (np.tensordot over every axis)
    return result


def _is_object_array(x: Any) -> bool:
    kind = getattr(x, "dtype", None)
    return (type(x).__name__ == "ndarray" and getattr(kind, "kind", "") == "O" and x.size > 0
            and x.ndim > 0 and any(isinstance(v, Value) for v in x.flat))


def _needs_values(error: Exception) -> bool:
    """Whether NumPy's implementation failed on the traced values rather than copapy refusing
    clearly: any exception raised inside NumPy's own code (its last frame there: a ufunc loop
    of NumPy dtypes, an attribute of ndarrays, an index of object arrays), or copapy's refusal
    to give a traced value a truth or float value that NumPy asked for."""
    frames = traceback.extract_tb(error.__traceback__)
    if len(frames) == 1:
        return True  # raised by NumPy's C implementation itself (np.packbits)
    numpy_dir = os.path.dirname(getattr(sys.modules.get("numpy"), "__file__", None) or "")
    if numpy_dir and frames and frames[-1].filename.startswith(numpy_dir + os.sep):
        return True
    text = str(error)
    return ("traced copapy" in text or "dtype('O')" in text
            or "not supported for the input types" in text)


@overload
def value(x: bool, dtype: None = None, *, name: str | None = None,
          range: tuple[float, float] | None = None) -> Value[bool]: ...
@overload
def value(x: int, dtype: None = None, *, name: str | None = None,
          range: tuple[float, float] | None = None) -> Value[int]: ...
@overload
def value(x: float, dtype: None = None, *, name: str | None = None,
          range: tuple[float, float] | None = None) -> Value[float]: ...
@overload
def value(x: Scalar, dtype: Any, *, name: str | None = None,
          range: tuple[float, float] | None = None) -> Value[Any]: ...
@overload
def value(x: list[Any] | tuple[Any, ...] | NDArray[Any], dtype: Any = None, *,
          name: str | None = None, packed: bool | None = None,
          range: tuple[float, float] | None = None) -> Array: ...
def value(x: Any, dtype: Any = None, *, name: str | None = None,
          packed: bool | None = None, range: tuple[float, float] | None = None) -> Any:
    """An input of the computation: a leaf whose value can be written before each run.

    ``x`` is the initial value. Without ``dtype``, a float becomes float32, an int int32 and a
    bool a bool. A list or NumPy array gives an input vector/matrix (``packed=None``: packed
    above 64 elements).

    ``range=(lo, hi)`` declares the values the input takes (every element of an array):
    the range analysis (cp.check, cp.ranges, tg.compile(check=True)) starts from it.
    """
    if range is not None:
        made = value(x, dtype, name=name, packed=packed) if is_array(x) else value(
            x, dtype, name=name)
        for node in made.nodes():
            declare_input(node, range, x)
        return made
    if isinstance(x, Value) or hasattr(x, "nodes"):
        raise TypeError(f"cp.value() takes numbers (an input's initial value); this is already "
                        f"traced (a copapy {type(x).__name__})")
    if name is not None and (not isinstance(name, str) or "\0" in name):
        raise TypeError(f"name= is the port's name, a str without NUL characters, got "
                        f"{type(name).__name__} {name!r}")
    if is_array(x):
        return ARRAYS.array_input(x, packed=packed, dtype=dtype, name=name)
    scalar = build._check_scalar(x) if dtype is None or not isinstance(x, int) else x
    kind = dt.scalar_type(scalar) if dtype is None else dt.as_dtype(dtype)
    if kind.is_int and isinstance(x, float) and not float(x).is_integer():
        raise TypeError(f"cp.value({x!r}, dtype=int32) would truncate; pass an int")
    return Value(fresh_input(kind, _convert(scalar, kind), name))


def declare_input(node: Node, span: Any, initial: Any) -> None:
    """``cp.value(..., range=span)``: checked, rounded outward into the input's type."""
    try:
        lo, hi = (float(v) for v in span)
    except (TypeError, ValueError):
        raise TypeError(f"range is (lo, hi), two numbers, got {span!r}") from None
    if not lo <= hi:
        raise ValueError(f"range=({lo}, {hi}): lo must be <= hi (and neither NaN)")
    interval = rounded_bounds(Interval(lo, hi), node.dtype)
    declare(node, interval.lo, interval.hi)
    if node.shape:
        return
    init = node.dtype.unpack(input_initial(node))
    if not interval.lo <= float(init) <= interval.hi:
        raise ValueError(f"cp.value({initial!r}, range=({lo:g}, {hi:g})): the initial value is "
                         f"outside the declared range")


def constant(x: Scalar, dtype: Any = None) -> Value[Any]:
    """A compile-time constant (folded into the program)."""
    if isinstance(x, Value):
        raise TypeError("cp.constant() takes a number; it is already a copapy value")
    scalar = build._check_scalar(x, weak=dtype is not None)  # _convert checks the range
    kind = dt.scalar_type(scalar) if dtype is None else dt.as_dtype(dtype)
    return Value(const(_convert(scalar, kind), kind))


def _convert(x: Scalar, kind: DType) -> Scalar:
    if kind.is_bool:
        return bool(x)
    if kind.is_int:
        if isinstance(x, float) and not x.is_integer():
            raise TypeError(f"{x!r} is not an integer")
        v = int(x)
        if not dt.INT32_MIN <= v <= dt.INT32_MAX:
            raise OverflowError(f"{v} does not fit in int32")
        return v
    return float(x)


def wrap(x: Any) -> Value[Any]:
    """Turn a number or value into a Value."""
    if isinstance(x, Value):
        return x
    return constant(_node(x))  # type: ignore[arg-type]
