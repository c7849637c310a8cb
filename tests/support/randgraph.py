"""Random expression graphs for differential tests (hypothesis strategies)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

import copapy as cp
from copapy.graph.build import ShapeOrTypeError
from copapy.graph.ops import REGISTRY

from .registry_ops import elementwise

#: the exact operations on floats (comparisons, selects and conversions included)
FLOAT_OPS = elementwise(dtype="float32", kernel=False)
#: the operations without float forms, and the approximated ones that are exact on integers
INT_OPS = ([n for n in elementwise(kernel=False) if n not in FLOAT_OPS]
           + [n for n in elementwise(kernel=True) if REGISTRY[n].operands == "num"])
#: the operations computed by the approximating math kernels on floats
KERNEL_OPS = elementwise(kernel=True)

DTYPES = {"float32": cp.float32, "int32": cp.int32, "bool": cp.bool_, "float64": cp.float64}


def scalar(dtype: str) -> st.SearchStrategy[object]:
    if dtype == "float32":
        return st.floats(width=32, allow_nan=True, allow_infinity=True) | st.sampled_from(
            [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e30, -7.25])
    if dtype == "float64":
        return st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
            [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e300, -7.25])
    if dtype == "int32":
        return st.integers(-(2**31), 2**31 - 1) | st.integers(-40, 40)
    return st.booleans()


@dataclass
class Graph:
    inputs: list[tuple[cp.Value, object, object]]  # value, initial, value written before run
    outputs: list[cp.Value]


@st.composite
def graphs(draw: st.DrawFn, ops: list[str], dtypes: tuple[str, ...] = ("float32", "int32", "bool"),
           max_ops: int = 20) -> Graph:
    inputs = []
    pool: list[object] = []
    for _ in range(draw(st.integers(1, 4))):
        dtype = draw(st.sampled_from(dtypes))
        initial = draw(scalar(dtype))
        written = draw(scalar(dtype))
        v = cp.value(initial, DTYPES[dtype])
        inputs.append((v, initial, written))
        pool.append(v)
    for _ in range(draw(st.integers(1, max_ops))):
        name = draw(st.sampled_from(ops))
        spec = REGISTRY[name]
        operands = []
        for _ in range(spec.arity):
            if draw(st.integers(0, 5)) == 0:
                dtype = draw(st.sampled_from(dtypes))
                operands.append(
                    draw(scalar(dtype)) if dtype != "float64" else draw(scalar("float32"))
                )
            else:
                operands.append(draw(st.sampled_from(pool)))
        try:
            result = apply_op(name, operands)
        except (ShapeOrTypeError, OverflowError, TypeError):
            continue
        pool.append(result)
    values = [p for p in pool if isinstance(p, cp.Value)]
    outputs = [values[-1], *draw(st.lists(st.sampled_from(values), max_size=3))]
    return Graph(inputs, outputs)


def apply_op(name: str, operands: list[object]) -> cp.Value:
    from copapy.graph import build
    from copapy.value import Value, _node

    return Value(build.apply(name, *(_node(o) for o in operands)))
