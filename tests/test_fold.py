"""Constant folding's quick scalar paths (plain Python arithmetic) give exactly the NumPy
reference's bits, special values included."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from copapy import dtypes as dt
from copapy.graph import fold
from copapy.graph.node import const, const_value
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_reference

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
