"""Constant folding's quick scalar paths (plain Python arithmetic) give exactly the NumPy
reference's bits, special values included."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import dtypes as dt
from copapy.graph import build, fold
from copapy.graph.node import const, const_value
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_graph, evaluate_reference

from .support.checks import examples
from .support.registry_ops import DTYPES, accepts, elementwise

SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 3.4028234663852886e38,
           1.401298464324817e-45, 1.1754943508222875e-38, -3.4028234663852886e38]
STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "float32": st.floats(width=32) | st.sampled_from(SPECIAL),
    "float64": st.floats() | st.sampled_from([*SPECIAL, 1.7976931348623157e308, 5e-324,
                                                            3.4028235677973366e38]),
    "int32": st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, -1, 2**31 - 1, -(2**31)]),
    "bool": st.booleans(),
}


@pytest.mark.parametrize("key", sorted(fold._QUICK), ids=lambda k: f"{k[0]}-{k[1]}")
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_quick_fold_equals_the_reference(key: tuple[str, str], data: st.DataObject) -> None:
    name, tname = key
    spec, dtype = REGISTRY[name], dt.BY_NAME[tname]
    values = [const_value(const(data.draw(STRATEGIES[tname]), dtype)) for _ in range(spec.arity)]
    quick = fold._QUICK[key](*values)
    if quick is None:
        return  # this case folds through NumPy
    want = evaluate_reference(spec, [(v, dtype) for v in values]).item()
    if isinstance(want, float) and want != want:
        assert quick != quick
    else:
        assert struct.pack("<d", float(quick)) == struct.pack("<d", float(want)) and type(
            quick) is type(want), (values, quick, want)


def _takes_as_is(name: str, tname: str) -> bool:
    """``name`` computes on operands of type ``tname`` without converting them."""
    if not accepts(name, tname):
        return False
    y, z = (build.fresh_input_for_test(DTYPES[tname]) for _ in range(2))
    return all(a.dtype is DTYPES[tname] for a in build.apply(name, y, z).args)


SCALAR_BINARY = [(n, t) for n in elementwise(arity=2, cast=False) for t in DTYPES
                 if _takes_as_is(n, t)]


@pytest.mark.parametrize("key", SCALAR_BINARY, ids=lambda k: f"{k[0]}-{k[1]}")
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_simplified_x_op_x_and_x_op_constant_keep_the_reference(key: tuple[str, str],
                                                                data: st.DataObject) -> None:
    # the builder rewrites x op x and x op c on the fly (build._identity, and its fast path
    # for two scalar operands): the rewritten graph must compute the operation's value, but
    # for the documented exceptions (docs/semantics.md): x * 0 (switched off here) and the
    # sign of a zero sum in x + 0
    name, tname = key
    spec, dtype = REGISTRY[name], dt.BY_NAME[tname]
    v = data.draw(STRATEGIES[tname])
    c = data.draw(st.sampled_from([0, 1]) if tname != "bool" else st.booleans())
    x = build.fresh_input_for_test(dtype)
    k = const(c, dtype)
    for args in ((x, x), (x, k), (k, x)):
        with cp.simplify_options(multiply_by_zero=False):
            node = build.apply(name, *args)
        (got,) = evaluate_graph([node], {x: v}, kernels=False)
        values = [(v if a is x else c, dtype) for a in args]
        want = np.asarray(evaluate_reference(spec, values), dtype=node.dtype.numpy)
        same = got.tobytes() == want.tobytes() or (
            got.dtype.kind == "f" and ((bool(np.isnan(got)) and bool(np.isnan(want)))
                                       or (name == "add" and got == want == 0)))
        assert same, (name, tname, args, v, c, got, want)
