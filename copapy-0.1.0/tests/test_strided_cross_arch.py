"""The strided-view stencils (sgather, sscatter: issue 31, item 1) on every architecture with C
stencils, on the emulators LocalTarget uses (tests/support/archs.py): the same bits as NumPy's
fancy indexing, NaN payloads included (the stencils move integers of the element's width)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from copapy.arch.targets import by_name
from copapy.arrays import array_input
from copapy.compiler import compile_program
from copapy.compiler.lower import CompileError
from copapy.graph import build
from copapy.graph.node import Node
from copapy.graph.reference import evaluate_graph

from .support.archs import CONFIG_IDS, CONFIGS, Batch, Config, execute, has_float64

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
    lacks = by_name(config.arch)
    if "sgather" in lacks.table_lacks:  # declared in its toml: the compiler must say why
        with pytest.raises(CompileError, match="predates this operation"):
            compile_program(outs, config.arch)
        return
    compiled = compile_program(outs, config.arch)
    ports = compiled.ports
    data = inputs(dtype)
    batch = Batch(compiled.image, [[(ports[x].offset, data.tobytes())]],
                  [(ports[o].offset, o.nbytes) for o in outs])
    execute(config, [batch])
    want = evaluate_graph(outs, {x: data})
    for k, (o, w) in enumerate(zip(outs, want, strict=True)):
        assert batch.results[0][k] == np.ascontiguousarray(w).tobytes(), (config.id, k, o.attr)
