"""The strided-view stencils (sgather, sscatter: issue 31, item 1) on every architecture with C
stencils, on the emulators LocalTarget uses (tests/support/archs.py): the same bits as NumPy's
fancy indexing, NaN payloads included (the stencils move integers of the element's width)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from copapy.arrays import array_input
from copapy.graph import build
from copapy.graph.node import Node

from .support.archs import CONFIG_IDS, CONFIGS, Config, has_float64, run_one_input

#: (start, step, count) over 203 elements: forward, backward, one element, the whole array
VIEWS = [(0, 2, 102), (1, 2, 101), (202, -1, 203), (5, 3, 60), (200, -7, 29), (77, 5, 1),
         (0, 1, 203)]


def inputs(dtype: str) -> Any:
    rng = np.random.default_rng(11)
    if dtype == "int32":
        return rng.integers(-(2**31), 2**31 - 1, 203).astype(np.int32)
    raw = rng.integers(0, 2**63, 203, dtype=np.uint64)
    if dtype == "float32":  # every bit pattern, signalling NaNs among them
        return (raw & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return raw.view(np.float64)


def program(dtype: str) -> tuple[Node, list[Node]]:
    x = array_input(np.zeros(203, np.dtype(dtype)), packed=True, dtype=dtype).node()
    outs = [build.strided(x, *v) for v in VIEWS]
    outs += [build.scatter(build.strided(x, s, k, c), s, k, 203) for s, k, c in VIEWS[:5]]
    return x, outs


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_strided_views_and_their_adjoints_bit_for_bit(config: Config, dtype: str) -> None:
    if dtype == "float64" and not has_float64(config.arch):
        return  # the compiler refuses float64 there (tests/test_cross_arch.py checks that)
    x, outs = program(dtype)
    results = run_one_input(config, x, outs, inputs(dtype), "sgather")
    for k, (got, want) in enumerate(results or []):
        assert got == want.tobytes(), (config.id, k, outs[k].attr)
