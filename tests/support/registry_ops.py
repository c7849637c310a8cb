"""The operations the tests run, taken from the registry (copapy.graph.ops.REGISTRY).

Tests never list operations by hand: a new registry row is picked up by every test that runs
element-wise operations, and a test that needs a property (arity, operand types, approximated
or exact) asks for it here.
"""

from __future__ import annotations

import copapy as cp
from copapy.graph import build
from copapy.graph.ops import CASTS, REGISTRY

DTYPES = {"float32": cp.float32, "float64": cp.float64, "int32": cp.int32, "bool": cp.bool_}

#: the element-wise operations (the array operations have shape rules of their own)
ELEMENTWISE = sorted(n for n, s in REGISTRY.items() if s.shape_rule == "elementwise")


def accepts(name: str, dtype: str) -> bool:
    """The type rule of ``name`` takes operands of ``dtype`` (converting them, if it must)."""
    try:
        build.apply(name, *[build.fresh_input_for_test(DTYPES[dtype])] * REGISTRY[name].arity)
    except (TypeError, build.ShapeOrTypeError):
        return False
    return True


def is_kernel(name: str) -> bool:
    """Approximated on floats: folded through (and tested against) the C kernels."""
    return bool(REGISTRY[name].kernel)


def is_cast(name: str) -> bool:
    """A conversion (cp.cast): the result type is the operation's, whatever the operand."""
    return name in CASTS.values()


def elementwise(arity: int | None = None, dtype: str | None = None,
                kernel: bool | None = None, cast: bool | None = None,
                result: str | None = None) -> list[str]:
    """The element-wise operations with these properties (None: any)."""
    return [n for n in ELEMENTWISE
            if (arity is None or REGISTRY[n].arity == arity)
            and (dtype is None or accepts(n, dtype))
            and (kernel is None or is_kernel(n) == kernel)
            and (cast is None or is_cast(n) == cast)
            and (result is None or REGISTRY[n].result == result)]
