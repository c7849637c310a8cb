"""Random graphs compiled to machine code and run, against the NumPy reference evaluation."""

from __future__ import annotations

import os

from hypothesis import given

import copapy as cp
from copapy.graph.reference import evaluate_graph

from .support.checks import same_bits
from .support.randgraph import FLOAT_OPS, INT_OPS, KERNEL_OPS, Graph, graphs


def run_and_compare(g: Graph) -> None:
    tg = cp.LocalTarget(os.environ.get("CP_TEST_ARCH"))
    tg.compile(*g.outputs)
    for v, _initial, written in g.inputs:
        tg.write(v, written)
    tg.run()
    env = {v.node: written for v, _i, written in g.inputs}
    want = evaluate_graph([o.node for o in g.outputs], env)
    for out, expected in zip(g.outputs, want, strict=True):
        got = tg.read(out)
        assert same_bits(got, expected, out.dtype.numpy), (
            f"{out!r}: machine code gave {got!r}, reference {expected!r}")


@given(graphs(FLOAT_OPS + INT_OPS))
def test_random_exact_graphs(g: Graph) -> None:
    """+ - * / sqrt, comparisons, casts, bit operations: bit-exact against NumPy."""
    run_and_compare(g)


@given(graphs(FLOAT_OPS + KERNEL_OPS, dtypes=("float32", "int32")))
def test_random_graphs_with_kernels(g: Graph) -> None:
    """Elementary functions: bit-exact against the host build of the same C kernels."""
    run_and_compare(g)


@given(graphs(FLOAT_OPS + INT_OPS + KERNEL_OPS, dtypes=("float64", "float32", "int32", "bool")))
def test_random_graphs_float64(g: Graph) -> None:
    run_and_compare(g)
