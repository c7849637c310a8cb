"""Math and selection functions of the public API (``cp.sqrt``, ``cp.where``, ...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

from .dtypes import as_dtype
from .graph import build
from .graph.node import Node

if TYPE_CHECKING:
    from .arrays import Array
from .value import Value, _node, _op


def _dispatch(name: str, *operands: Any) -> Any:
    """Scalars give a Value, any array operand gives an Array (element-wise)."""
    from .arrays import Array, elementwise

    if any(isinstance(o, Array) or (hasattr(o, "ndim") and o.ndim > 0) or isinstance(o, list)
           for o in operands):
        return elementwise(name, *operands)
    return _op(name, *operands)


def _unary(name: str) -> Callable[[Any], Value[float]]:
    def f(x: Any) -> Value[float]:
        result: Value[float] = _dispatch(name, x)
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
    result: Value[float] = _dispatch("atan2", y, x)
    return result


def pow(x: Any, y: Any) -> Value[Any]:
    return _op("pow", x, y)


def min(a: Any, b: Any) -> Value[Any]:
    """Smaller of a and b; NaN if either is NaN (as numpy.minimum)."""
    result: Value[Any] = _dispatch("min", a, b)
    return result


def max(a: Any, b: Any) -> Value[Any]:
    """Larger of a and b; NaN if either is NaN (as numpy.maximum)."""
    result: Value[Any] = _dispatch("max", a, b)
    return result


def clamp(x: Any, low: Any, high: Any) -> Value[Any]:
    return max(min(x, high), low)


def where(cond: Any, a: Any, b: Any) -> Value[Any]:
    """``a`` where cond is true, else ``b``: a select, both sides computed, nothing leaks."""
    from .arrays import Array

    if any(isinstance(o, Array) for o in (cond, a, b)):
        result: Value[Any] = _dispatch("where", cond, a, b)
        return result
    return Value(build.apply("where", _node(cond), _node(a), _node(b)))


def cast(x: Any, dtype: Any) -> Value[Any]:
    """Convert to ``dtype``; float to int truncates toward zero and saturates (NaN gives 0)."""
    from .arrays import Array

    target = as_dtype(dtype)
    if isinstance(x, Array):
        if x.packed:
            return Array(x.shape, node=build.cast(x.node(), target))  # type: ignore[return-value]
        return Array(x.shape, items=[cast(v, target) for v in x.items()])  # type: ignore[return-value]
    node = _node(x)
    if not isinstance(node, Node):
        from .value import constant

        return constant(node, target) if not target.is_int else constant(int(node), target)
    return Value(build.cast(node, target))


def logical_and(a: Any, b: Any) -> Value[Any]:
    return Value(build.apply("and", *(build.cast(_as_node(v), _bool()) for v in (a, b))))


def logical_or(a: Any, b: Any) -> Value[Any]:
    return Value(build.apply("or", *(build.cast(_as_node(v), _bool()) for v in (a, b))))


def logical_xor(a: Any, b: Any) -> Value[Any]:
    return Value(build.apply("xor", *(build.cast(_as_node(v), _bool()) for v in (a, b))))


def logical_not(a: Any) -> Value[Any]:
    return Value(build.apply("lnot", build.cast(_as_node(a), _bool())))


def _bool() -> Any:
    from .dtypes import bool_

    return bool_


def _as_node(x: Any) -> Node:
    from .value import wrap

    return wrap(x).node


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
