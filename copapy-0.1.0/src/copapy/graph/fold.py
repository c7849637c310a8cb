"""Constant folding: evaluate an operation on constants exactly as the machine code would."""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _kernels  # the C kernels built for the host
from ..dtypes import DType, saturate_f32
from .node import Node
from .ops import OpSpec
from .reference import evaluate_reference, kernel_eval, leaf_array

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np


def fold(spec: OpSpec, args: tuple[Node, ...], dtype: DType,
         attr: object = None) -> float | int | bool | bytes:
    """The value of ``spec(*args)`` for constant args.

    IEEE-exact operations fold through the NumPy reference. Approximated functions (sin, exp,
    pow ...) fold through the same C kernels the stencils call, so a folded constant equals the
    run-time result bit for bit and does not depend on which NumPy build did the folding.
    """
    if spec.shape_rule != "elementwise" or _any_array(args):
        folded: float | int | bool | bytes = _fold_array(spec, args, dtype, attr)
        return folded
    values = [_reader(a.dtype)(a.attr) for a in args]  # type: ignore[arg-type]
    if spec.kernel and dtype.is_float:
        return _kernel(spec.kernel, dtype, values)
    quick = _QUICK.get((spec.name, args[0].dtype.name))
    if quick is not None:
        folded = quick(*values)
        if folded is not None:
            return folded
    operands = [(v, a.dtype) for v, a in zip(values, args, strict=True)]
    result: Any = evaluate_reference(spec, operands)
    return result.item()  # type: ignore[no-any-return]


#: dtype -> the value of a scalar constant's bytes (DType.unpack without its two lookups and
#: the bool test per call: cp.grad of a chain folds a constant per node)
_READERS: dict[DType, Callable[[bytes], float | int | bool]] = {}


def _reader(dtype: DType) -> Callable[[bytes], float | int | bool]:
    read = _READERS.get(dtype)
    if read is None:
        if dtype.is_bool:
            read = dtype.unpack
        else:
            unpack = dtype.slot.struct.unpack_from

            def read(raw: bytes) -> float | int | bool:
                value: float | int = unpack(raw)[0]
                return value

        read = _READERS[dtype] = read
    return read


def _any_array(args: tuple[Node, ...]) -> bool:
    for a in args:
        if a.shape:
            return True
    return False


def _fold_array(spec: OpSpec, args: tuple[Node, ...], dtype: DType, attr: object) -> Any:
    """Arrays fold through the same references (kernels for approximated functions)."""
    arrays = [leaf_array(a, a.attr) for a in args]
    if spec.kernel and dtype.is_float:
        result = kernel_eval(spec.kernel, dtype, arrays)
    else:
        result = evaluate_reference(spec, [(v, a.dtype) for v, a in zip(arrays, args, strict=True)],
                                    attr)
    out = np.asarray(result, dtype=dtype.numpy)
    if out.ndim == 0:
        return out.item()
    return out.astype("<i4" if dtype.is_bool else out.dtype).tobytes()


# ---- IEEE-exact scalar folds in plain Python (NumPy costs ~20 µs a call; a gradient folds one
# constant per node). +, -, *, / of float32 values computed in double and rounded once to
# float32 give the correctly rounded float32 result (53 >= 2 * 24 + 2 bits, so the double
# rounding is innocuous); int32 wraps. Cases that need IEEE special handling Python does not
# have (division by zero) return None and fold through NumPy.

_F32 = struct.Struct("<f")


def _f32(x: float) -> float:
    result: float = _F32.unpack(_F32.pack(saturate_f32(x)))[0]
    return result


def _i32(x: int) -> int:
    return ((x + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def _div_f32(a: float, b: float) -> float | None:
    return _f32(a / b) if b != 0.0 else None


def _div_f64(a: float, b: float) -> float | None:
    return a / b if b != 0.0 else None


_QUICK: dict[tuple[str, str], Callable[..., Any]] = {
    ("add", "float32"): lambda a, b: _f32(a + b),
    ("sub", "float32"): lambda a, b: _f32(a - b),
    ("mul", "float32"): lambda a, b: _f32(a * b),
    ("div", "float32"): _div_f32,
    ("neg", "float32"): lambda a: -a,
    ("add", "float64"): lambda a, b: a + b,
    ("sub", "float64"): lambda a, b: a - b,
    ("mul", "float64"): lambda a, b: a * b,
    ("div", "float64"): _div_f64,
    ("neg", "float64"): lambda a: -a,
    ("add", "int32"): lambda a, b: _i32(a + b),
    ("sub", "int32"): lambda a, b: _i32(a - b),
    ("mul", "int32"): lambda a, b: _i32(a * b),
    ("neg", "int32"): lambda a: _i32(-a),
    **{(name, t): fn for t in ("float32", "float64", "int32", "bool") for name, fn in (
        ("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
        ("eq", operator.eq), ("ne", operator.ne))},
}


def _kernel(name: str, dtype: DType, values: list[float | int | bool]) -> float:
    return float(_kernels.call(name, dtype.name == "float64", *[float(v) for v in values]))
