"""The index stencils (stencils/include/cp_index.h: ngather/nscatter, argsort, pgather,
pscatter; issue 31; ngather also as axis permutations, their adjoints and the matrix
transpose) on every architecture with C stencils, on the emulators LocalTarget uses
(tests/support/archs.py): the same bits as NumPy, for every bit pattern of the elements (NaN
payloads, signalling NaNs, subnormals: the stencils compare integer keys and move integers)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from copapy.arrays import array_input
from copapy.graph import build, levels
from copapy.graph.node import Node
from copapy.graph.ops import REGISTRY

from .support.archs import CONFIG_IDS, CONFIGS, Config, has_float64, run_one_input

SHAPE = (6, 35)
#: (start, levels) over the 6 x 35 array: rows and columns stepped both ways, three levels
VIEWS = [(0, [(3, 70), (18, 2)]), (175, [(6, -35), (12, 3)]), (34, [(6, 35), (5, -7)]),
         (36, [(2, 70), (3, 12), (4, 2)]), (209, [(2, -100), (3, -30), (4, -7)])]


#: axis permutations of the 210 elements as 2-D to 4-D arrays (the 4-D reversal: two passes)
TRANSPOSES = [((6, 35), (1, 0)), ((6, 5, 7), (2, 0, 1)), ((2, 3, 5, 7), (3, 1, 2, 0)),
              ((2, 3, 5, 7), (2, 0, 3, 1))]


def grad_of(t: Node, x: Node) -> Node:
    """The adjoints of the gathers that made ``t`` from ``x``, applied to ``t``: ``x`` again
    (each one the inverse gather, graph/levels.scatter)."""
    g, node = t, t
    while node is not x:
        if node.op == "ngather":
            g = levels.scatter(g, *levels.level_attr(node)[:2], node.args[0].size)
        node = node.args[0]
    assert g.op == "ngather" and g.size == x.size
    return g


def inputs(dtype: str, n: int, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-4, 4, n).astype(np.int32)  # ties
    raw = rng.integers(0, 2**63, n, dtype=np.uint64)
    if dtype == "float32":  # every bit pattern, signalling NaNs among them
        bits = (raw & 0xFFFFFFFF).astype(np.uint32)
        bits[::5] = bits[1::5][: len(bits[::5])] ^ 0x80000000  # ±x pairs, ±0 among them
        bits[3::17] = 0x80000000
        bits[4::17] = 0
        return bits.view(np.float32)
    raw[::5] = raw[1::5][: len(raw[::5])] ^ (1 << 63)
    raw[3::17] = 1 << 63
    raw[4::17] = 0
    return raw.view(np.float64)


def program(dtype: str) -> tuple[Node, list[Node]]:
    x = array_input(np.zeros(SHAPE, np.dtype(dtype)), packed=True, dtype=dtype).node()
    outs = []
    for start, lv in VIEWS:
        g = levels.gather(x, start, lv)
        outs.append(g)
        outs.append(levels.scatter(g, g.attr[0], g.attr[1], g.args[0].size))  # type: ignore[index]
    for shape, perm in TRANSPOSES:  # axis permutations and their adjoints (inverse gathers)
        t = levels.permute(x, shape, perm)
        outs.append(t)
        outs.append(grad_of(t, x))
    outs.append(build.apply("transpose", x))  # the matrix transpose op: the level stencil too
    order = build.make(REGISTRY["argsort"], (x,))
    outs += [order, build.make(REGISTRY["pgather"], (order, x)),
             build.make(REGISTRY["pscatter"], (order, x))]
    return x, outs


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_index_stencils_bit_for_bit(config: Config, dtype: str) -> None:
    if dtype == "float64" and not has_float64(config.arch):
        return  # the compiler refuses float64 there (tests/test_cross_arch.py checks that)
    x, outs = program(dtype)
    results = run_one_input(config, x, outs, inputs(dtype, x.size, 13), "ngather")
    for k, (got, want) in enumerate(results or []):
        assert got == want.tobytes(), (config.id, k, outs[k].op)
    if results:  # the permutations against NumPy's transpose itself, the adjoints give x back
        data = inputs(dtype, x.size, 13)
        first = 2 * len(VIEWS)
        for k, (shape, perm) in enumerate(TRANSPOSES):
            assert results[first + 2 * k][0] == data.reshape(shape).transpose(perm).tobytes()
            assert results[first + 2 * k + 1][0] == data.tobytes()
        assert results[first + 2 * len(TRANSPOSES)][0] == data.reshape(SHAPE).T.tobytes()
