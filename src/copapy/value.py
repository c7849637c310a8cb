"""Traced scalar values: what users compute with (``cp.value``)."""

from __future__ import annotations

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

from . import dtypes as dt
from .dtypes import DType
from .graph import build
from .graph.intervals import Interval, rounded_bounds
from .graph.location import mark
from .graph.node import Node, const, fresh_input, input_initial
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
    "and / or / not, (lo < x) & (x < hi) for lo < x < hi; assigning it into a NumPy bool array "
    "asks for it: make that array traced (np.zeros(shape, bool, like=x))"
)


def _no_python_value(kind: str, conversion: str) -> str:
    return (f"{kind}() of a traced copapy value: it has no Python value yet (it is computed when "
            f"the program runs); convert it in the program with {conversion}, or run the "
            f"program (tg.compile / tg.run, or @cp.jit) and read the result (tg.read(x)). "
            f"Assigning it into a NumPy array (J = np.zeros(...); J[0, 0] = x) asks for this: "
            f"make that array traced instead, np.zeros(shape, like=x), np.zeros_like(x), or "
            f"a copy of a copapy array (y = x.copy()); then y[i] = value works")


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


class _ScalarMethod:
    """NumPy's array method of the same name on a traced scalar (a 0-d array: what NumPy's
    reductions give), computed by copapy.arrays as of a one-element vector."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Callable[..., Any]:
        name = self.name
        return lambda *args, **kwargs: ARRAYS.scalar_method(obj, name, args, kwargs)


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
        return NUMPY.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return NUMPY.function(func, args, kwargs)

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

    # NumPy's scalar attributes and array methods: a reduction's result is a NumPy scalar
    # (a 0-d array) in NumPy, and code written for NumPy uses them (x.sum(0).shape,
    # np.any(x[0]), x.max().reshape(1)); the methods compute as of a one-element vector
    shape: tuple[int, ...] = ()
    ndim = 0
    size = 1

    @property
    def T(self) -> Value[Any]:
        """The value itself (NumPy's transpose of a 0-d array)."""
        return self

    sum = _ScalarMethod()
    prod = _ScalarMethod()
    min = _ScalarMethod()
    max = _ScalarMethod()
    mean = _ScalarMethod()
    any = _ScalarMethod()
    all = _ScalarMethod()
    argmax = _ScalarMethod()
    argmin = _ScalarMethod()
    cumsum = _ScalarMethod()
    cumprod = _ScalarMethod()
    reshape = _ScalarMethod()
    ravel = _ScalarMethod()
    flatten = _ScalarMethod()
    squeeze = _ScalarMethod()
    transpose = _ScalarMethod()
    swapaxes = _ScalarMethod()
    repeat = _ScalarMethod()
    take = _ScalarMethod()


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
    scalar_method: Callable[..., Any] = _no_arrays


ARRAYS = _ArraySupport()


def install_array_support(elementwise: Callable[..., Any], array_input: Callable[..., Any],
                          matmul: Callable[..., Any], from_objects: Callable[..., Any],
                          scalar_method: Callable[..., Any]) -> None:
    ARRAYS.elementwise = elementwise
    ARRAYS.array_input = array_input
    ARRAYS.matmul = matmul
    ARRAYS.from_objects = from_objects
    ARRAYS.scalar_method = scalar_method


def _numpy_not_loaded(*_: Any, **__: Any) -> Any:
    raise RuntimeError("copapy.numpy_dispatch is not loaded (import copapy, not copapy.value "
                       "alone)")


class _NumpySupport:
    """How NumPy's ufuncs and functions compute on traced values. Their tables name arrays and
    copapy functions built on values, so this module cannot import them: copapy.numpy_dispatch
    installs its two entry points here when it loads."""

    ufunc: Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any] = _numpy_not_loaded
    function: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any] = _numpy_not_loaded


NUMPY = _NumpySupport()


def install_numpy_support(ufunc: Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any],
                          function: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]
                          ) -> None:
    NUMPY.ufunc = ufunc
    NUMPY.function = function


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
