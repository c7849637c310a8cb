"""Math and selection functions of the public API (``cp.sqrt``, ``cp.where``, ...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from .dtypes import as_dtype
from .graph import build
from .graph.node import Node
from .value import Value, _node, _op


def _unary(name: str) -> Callable[[Any], Value[float]]:
    def f(x: Any) -> Value[float]:
        return _op(name, x)

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
    return _op("atan2", y, x)


def pow(x: Any, y: Any) -> Value[Any]:
    return _op("pow", x, y)


def min(a: Any, b: Any) -> Value[Any]:
    """Smaller of a and b; NaN if either is NaN (as numpy.minimum)."""
    return _op("min", a, b)


def max(a: Any, b: Any) -> Value[Any]:
    """Larger of a and b; NaN if either is NaN (as numpy.maximum)."""
    return _op("max", a, b)


def clamp(x: Any, low: Any, high: Any) -> Value[Any]:
    return max(min(x, high), low)


def where(cond: Any, a: Any, b: Any) -> Value[Any]:
    """``a`` where cond is true, else ``b``: a select, both sides computed, nothing leaks."""
    return Value(build.apply("where", _node(cond), _node(a), _node(b)))


def cast(x: Any, dtype: Any) -> Value[Any]:
    """Convert to ``dtype``; float to int truncates toward zero and saturates (NaN gives 0)."""
    node = _node(x)
    target = as_dtype(dtype)
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
def grad(y: Any, x: Sequence[Value[Any]]) -> list[Value[float]]: ...
def grad(y: Any, x: Any) -> Any:
    """Reverse-mode gradient of ``y`` with respect to ``x`` (a value) or to each of a list.

    Returns graph values that compile like any other. Non-differentiable points follow JAX's
    conventions (docs/semantics.md).
    """
    from .graph.grad import gradients
    from .value import wrap

    y_value = wrap(y)
    if isinstance(x, Value):
        return Value(gradients(y_value.node, [x.node])[0])
    xs = list(x)
    for item in xs:
        if not isinstance(item, Value):
            raise TypeError(f"grad() differentiates with respect to copapy values, got "
                            f"{type(item).__name__}")
    return [Value(g) for g in gradients(y_value.node, [v.node for v in xs])]
