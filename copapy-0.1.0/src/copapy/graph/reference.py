"""Evaluation through the registry's NumPy references (the oracle of the tests)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import _kernels  # the C kernels built for the host
from ..dtypes import DType
from .loop import CARRY, FORI, INDEX, LoopBody, body_of, result_index
from .node import Node
from .ops import REGISTRY, STRUCTURAL, OpSpec
from .traverse import live_nodes

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np


def evaluate_reference(spec: OpSpec, operands: Sequence[tuple[Any, DType]],
                       attr: Any = None) -> Any:
    """Apply ``spec``'s reference to operands given as (value or array, dtype) pairs."""
    arrays = [np.asarray(v, dtype=d.numpy) for v, d in operands]
    extra = (attr,) if spec.name in STRUCTURAL else ()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(spec.reference(np, *extra, *arrays))


def evaluate_graph(outputs: Sequence[Any], inputs: dict[Any, Any] | None = None,
                   kernels: bool = True) -> list[Any]:
    """Evaluate nodes with the NumPy references (the oracle of the differential tests).

    ``inputs`` maps input nodes to values (defaults: their initial values). With ``kernels``,
    approximated functions use the host build of the C kernels (bit-exact expectations);
    without, NumPy's own functions (for accuracy comparisons).
    """
    values: dict[int, Any] = {}
    loops: dict[int, list[Any]] = {}  # a loop's serial -> its final state
    for node in live_nodes(outputs):
        assert isinstance(node, Node)
        if node.op == FORI:
            loop = body_of(node)
            if loop.serial not in loops:
                loops[loop.serial] = _run_loop(loop, [values[id(a)] for a in node.args],
                                               inputs, kernels)
            values[id(node)] = loops[loop.serial][result_index(node)]
        elif node.op in (CARRY, INDEX):
            values[id(node)] = np.asarray(inputs[node], dtype=node.dtype.numpy)  # type: ignore[index]
        elif node.op == "const":
            values[id(node)] = leaf_array(node, node.attr)
        elif node.op in ("input", "state"):
            raw = inputs.get(node) if inputs else None
            if raw is None:
                values[id(node)] = leaf_array(node, node.attr[2])  # type: ignore[index]
            else:
                values[id(node)] = np.asarray(raw, dtype=node.dtype.numpy).reshape(node.shape)
        else:
            spec = REGISTRY[node.op]
            args = [values[id(a)] for a in node.args]
            if kernels and spec.kernel and node.dtype.is_float:
                values[id(node)] = kernel_eval(spec.kernel, node.dtype, args)
            else:
                typed = [(a, n.dtype) for a, n in zip(args, node.args, strict=True)]
                result = evaluate_reference(spec, typed, node.attr)
                values[id(node)] = np.asarray(result, dtype=node.dtype.numpy)
    return [values[id(o)] for o in outputs]


def _run_loop(loop: LoopBody, operands: list[Any], inputs: dict[Any, Any] | None,
              kernels: bool) -> list[Any]:
    """A counted loop's final state: the body evaluated ``loop.n`` times."""
    m = len(loop.carries)
    state = operands[:m]
    outer = dict(inputs or {})
    for i in range(loop.n):
        env = {**outer, **dict(zip(loop.carries, state, strict=True))}
        if loop.index is not None:
            env[loop.index] = np.int32(i)
        state = evaluate_graph(list(loop.outputs), env, kernels)
    return state


def leaf_array(node: Any, raw: Any) -> Any:
    """The value of a constant/input/state leaf from its stored bytes (bool stored as int32)."""
    fmt = "<i4" if node.dtype.is_bool else node.dtype.numpy
    values = np.frombuffer(raw, dtype=fmt).reshape(node.shape)
    return values.astype(node.dtype.numpy)


def kernel_eval(name: str, dtype: DType, args: list[Any]) -> Any:
    """An approximated function on arrays through the host build of the C kernels."""
    shape = np.broadcast_shapes(*(x.shape for x in args))
    arrays = [np.ascontiguousarray(np.broadcast_to(a, shape), dtype=dtype.numpy) for a in args]
    out = np.empty(shape, dtype=dtype.numpy)
    flat = out.reshape(-1)
    _kernels.apply(name, dtype.name == "float64", flat, *(a.reshape(-1) for a in arrays))
    return flat.reshape(shape)
