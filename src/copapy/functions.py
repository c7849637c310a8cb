"""Math and selection functions of the public API (``cp.sqrt``, ``cp.where``, ...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

from .dtypes import as_dtype, bool_
from .graph import build
from .graph.node import Node

if TYPE_CHECKING:
    from .arrays import Array
from .value import Value, _node, _op, constant, is_array

# Every function goes through value._op, which gives a Value for scalar operands and an Array
# (element-wise) as soon as one operand is an array.


def _unary(name: str) -> Callable[[Any], Value[float]]:
    def f(x: Any) -> Value[float]:
        result: Value[float] = _op(name, x)
        return result

    f.__name__ = name
    f.__doc__ = f"Element-wise {name} (deterministic kernel, see docs/math.md)."
    return f


sqrt = _unary("sqrt")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
exp = _unary("exp")
log = _unary("log")
tanh = _unary("tanh")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
trunc = _unary("trunc")
sign = _unary("sign")
relu = _unary("relu")
abs = _unary("abs")


def atan2(y: Any, x: Any) -> Value[float]:
    """Angle of the point (x, y), quadrant-correct, as C99 atan2."""
    result: Value[float] = _op("atan2", y, x)
    return result


def pow(x: Any, y: Any) -> Value[Any]:
    result: Value[Any] = _op("pow", x, y)
    return result


def min(a: Any, b: Any) -> Value[Any]:
    """Smaller of a and b; NaN if either is NaN (as numpy.minimum)."""
    result: Value[Any] = _op("min", a, b)
    return result


def max(a: Any, b: Any) -> Value[Any]:
    """Larger of a and b; NaN if either is NaN (as numpy.maximum)."""
    result: Value[Any] = _op("max", a, b)
    return result


def clamp(x: Any, low: Any, high: Any) -> Value[Any]:
    return max(min(x, high), low)


def where(cond: Any, a: Any, b: Any) -> Value[Any]:
    """``a`` where cond is true, else ``b``: a select, both sides computed, nothing leaks."""
    result: Value[Any] = _op("where", cond, a, b)
    return result


def cast(x: Any, dtype: Any) -> Value[Any]:
    """Convert to ``dtype``; float to int truncates toward zero and saturates (NaN gives 0)."""
    from .arrays import Array, asarray

    target = as_dtype(dtype)
    if is_array(x):
        x = asarray(x)
        if x.packed:
            return Array(x.shape, node=build.cast(x.node(), target))  # type: ignore[return-value]
        return Array(x.shape, items=[cast(v, target) for v in x.items()])  # type: ignore[return-value]
    node = _node(x)
    if not isinstance(node, Node):
        return constant(node, target) if not target.is_int else constant(int(node), target)
    return Value(build.cast(node, target))


def logical_and(a: Any, b: Any) -> Value[Any]:
    """Element-wise logical and; numbers count as true when non-zero."""
    result: Value[Any] = _op("and", cast(a, bool_), cast(b, bool_))
    return result


def logical_or(a: Any, b: Any) -> Value[Any]:
    result: Value[Any] = _op("or", cast(a, bool_), cast(b, bool_))
    return result


def logical_xor(a: Any, b: Any) -> Value[Any]:
    result: Value[Any] = _op("xor", cast(a, bool_), cast(b, bool_))
    return result


def logical_not(a: Any) -> Value[Any]:
    result: Value[Any] = _op("lnot", cast(a, bool_))
    return result


@overload
def grad(y: Any, x: Value[Any]) -> Value[float]: ...
@overload
def grad(y: Any, x: Array) -> Array: ...
@overload
def grad(y: Any, x: Sequence[Value[Any]]) -> list[Value[float]]: ...
@overload
def grad(y: Any, x: Sequence[Value[Any] | Array]) -> list[Any]: ...
def grad(y: Any, x: Any) -> Any:
    """Reverse-mode gradient of ``y`` with respect to ``x`` (a value) or to each of a list.

    Returns graph values that compile like any other. Non-differentiable points follow JAX's
    conventions (docs/semantics.md).
    """
    from .arrays import Array as ArrayType
    from .graph.grad import gradients
    from .value import wrap

    if isinstance(y, ArrayType):
        raise TypeError("grad() needs a scalar output; reduce the array first (e.g. .sum())")
    y_value = wrap(y)
    targets = [x] if isinstance(x, Value | ArrayType) else list(x)
    nodes: list[Node] = []
    for item in targets:
        if isinstance(item, ArrayType):
            nodes.extend(item.nodes())
        elif isinstance(item, Value):
            nodes.append(item.node)
        else:
            raise TypeError(f"grad() differentiates with respect to copapy values or arrays, got "
                            f"{type(item).__name__}")
    grads = iter(gradients(y_value.node, nodes))
    out: list[Any] = []
    for item in targets:
        if isinstance(item, ArrayType):
            if item.packed:
                out.append(ArrayType(item.shape, node=next(grads)))
            else:
                out.append(ArrayType(item.shape,
                                     items=[Value(next(grads)) for _ in range(item.size)]))
        else:
            out.append(Value(next(grads)))
    return out[0] if isinstance(x, Value | ArrayType) else out


log1p = _unary("log1p")
log1p.__doc__ = "Element-wise log(1 + x), accurate near 0 (deterministic kernel, docs/math.md)."
expm1 = _unary("expm1")
expm1.__doc__ = "Element-wise exp(x) - 1, accurate near 0 (deterministic kernel, docs/math.md)."


def hypot(x: Any, y: Any) -> Value[float]:
    """sqrt(x*x + y*y) without overflow or underflow in between, as C99 hypot
    (hypot(inf, nan) = inf)."""
    result: Value[float] = _op("hypot", x, y)
    return result


def copysign(x: Any, y: Any) -> Value[float]:
    """|x| with the sign of y (a NaN y counts as positive: NaN signs differ between CPUs)."""
    result: Value[float] = _op("copysign", x, y)
    return result
