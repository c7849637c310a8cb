"""Constant folding: evaluate an operation on constants exactly as the machine code would."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _kernels  # the C kernels built for the host
from ..dtypes import DType
from .node import Node, const_value
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
    if any(a.shape for a in args) or spec.shape_rule != "elementwise":
        folded: float | int | bool | bytes = _fold_array(spec, args, dtype, attr)
        return folded
    values = [const_value(a) for a in args]
    if spec.kernel and dtype.is_float:
        return _kernel(spec.kernel, dtype, values)
    operands = [(v, a.dtype) for v, a in zip(values, args, strict=True)]
    result: Any = evaluate_reference(spec, operands)
    return result.item()  # type: ignore[no-any-return]


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


def _kernel(name: str, dtype: DType, values: list[float | int | bool]) -> float:
    return float(_kernels.call(name, dtype.name == "float64", *[float(v) for v in values]))
