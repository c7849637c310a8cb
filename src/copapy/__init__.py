"""copapy: deterministic real-time computation compiled by copy-and-patch.

Trace a computation with :func:`value` and ordinary operators, then compile and run it on a
target (``LocalTarget`` in-process). See README.md and docs/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import io
from .arrays import Array, cross, dot, matrix, norm, vector
from .dtypes import DType, bool_, float32, float64, int32
from .functions import (
    abs,
    acos,
    asin,
    atan,
    atan2,
    cast,
    ceil,
    clamp,
    cos,
    exp,
    floor,
    grad,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    max,
    min,
    pow,
    relu,
    round,
    sign,
    sin,
    sqrt,
    tan,
    tanh,
    trunc,
    where,
)
from .graph.options import simplify_options
from .jit import jit, map_to_numpy
from .quaternion import Quaternion, quaternion
from .runtime.errors import ProgramFault as ProgramFault
from .signals import (
    angular_rate,
    delay,
    dt,
    feedback,
    first_run,
    integrate,
    integrate_rotation,
    rate,
)
from .task import Task
from .value import Value, constant, value

if TYPE_CHECKING:
    from .local_target import LocalTarget
    from .serial_target import SerialTarget

__version__ = "0.1.0"

__all__ = [
    "Array",
    "DType",
    "LocalTarget",
    "Quaternion",
    "SerialTarget",
    "Task",
    "Value",
    "abs",
    "acos",
    "angular_rate",
    "asin",
    "atan",
    "atan2",
    "bool_",
    "cast",
    "ceil",
    "clamp",
    "constant",
    "cos",
    "cross",
    "delay",
    "dot",
    "dt",
    "exp",
    "feedback",
    "first_run",
    "float32",
    "float64",
    "floor",
    "grad",
    "int32",
    "integrate",
    "integrate_rotation",
    "io",
    "jit",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "map_to_numpy",
    "matrix",
    "max",
    "min",
    "norm",
    "pow",
    "quaternion",
    "rate",
    "relu",
    "round",
    "sign",
    "simplify_options",
    "sin",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
    "value",
    "vector",
    "where",
]


def __getattr__(name: str) -> Any:
    # targets pull in the runner extension; load them on first use to keep import fast
    if name == "LocalTarget":
        from .local_target import LocalTarget

        return LocalTarget
    if name == "SerialTarget":
        from .serial_target import SerialTarget

        return SerialTarget
    raise AttributeError(f"module 'copapy' has no attribute {name!r}")
