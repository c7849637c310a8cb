"""Unpacked reductions (issue 13, point 4), executing generated code.

``@``, ``sum``, ``min`` and ``max`` of unpacked vectors build the fixed lane order of
graph/lanes.py from scalar nodes; the packed forms run the array stencils. Both, compiled into
one program and run natively (x86_64) and on unicorn (aarch64, rv64), must equal the lane-order
NumPy reference (``lanes.np_reduce`` / ``lanes.np_dot``) bit for bit (any NaN equals any NaN,
as in the cross-architecture suite), for float32, float64 and int32, lengths 1 to 40 and a few
hundred (hypothesis).

From 16 elements of regular element expressions on, the compiler runs an unpacked reduction on
the packed stencils (compiler/lanepack.py; tests/test_lanepack.py), so these comparisons check
that rewrite too. Where it does not apply (irregular elements), the scalar lowering keeps each
lane's accumulator in a register while the lane's elements are added (docs/design.md,
"Unpacked reductions: the accumulators are not spilled"): the stores of an unpacked reduction
are the lanes' partial results and the output, a number that does not grow with the length.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from copapy import dtypes as dt
from copapy.arrays import Array, array_input
from copapy.compiler import compile_program
from copapy.graph import lanes
from copapy.graph.node import Node
from copapy.value import Value

from .support.archs import Batch, Config, execute, first_difference, stencil_sequence
from .test_fused import random_elements

CONFIGS = [Config("x86_64", "native"), Config("aarch64", "unicorn"), Config("rv64", "unicorn")]
OPS = ("dot", "sum", "min", "max")
TYPES = ("float32", "float64", "int32")
LENGTHS = st.integers(1, 40) | st.sampled_from([200, 257, 333])


def reduction(op: str, a: Array, b: Array) -> Node:
    result: Value[Any] = a @ b if op == "dot" else getattr(a, op)()
    return result.node


def reference(op: str, a: Any, b: Any) -> Any:
    if op == "dot":
        return lanes.np_dot(np, a, b)
    return lanes.np_reduce(np, a, op)


def inputs(n: int, dtype: str, packed: bool) -> Array:
    kind = dt.as_dtype(dtype)
    return array_input(np.zeros(n, kind.numpy), packed=packed, dtype=kind)


def values(rng: np.random.Generator, n: int, dtype: str, specials: bool) -> Any:
    """Elements of every magnitude; with ``specials`` also infinities and NaNs (which make
    most results NaN), else finite (zeros of both signs and subnormals included)."""
    x = random_elements(rng, n, dtype)
    if not specials and dtype != "int32":
        x[~np.isfinite(x)] = -0.0
    return x


def element_nodes(a: Array) -> list[Node]:
    return [a.node()] if a.packed else [v.node for v in a.items()]


def run_both(op: str, dtype: str, n: int, values: tuple[Any, Any], config: Config
             ) -> tuple[bytes, bytes]:
    """(unpacked, packed) result bytes of one program computing both forms."""
    arrays = {form: (inputs(n, dtype, form), inputs(n, dtype, form)) for form in (False, True)}
    outputs = [reduction(op, *arrays[False]), reduction(op, *arrays[True])]
    compiled = compile_program(outputs, config.arch)
    ports = compiled.ports
    writes = []
    for pair in arrays.values():
        for array, data in zip(pair, values, strict=True):
            nodes = element_nodes(array)
            chunks = [data] if array.packed else list(data)
            for node, chunk in zip(nodes, chunks, strict=True):
                if node in ports:  # an operand the program does not read (b of sum)
                    writes.append((ports[node].offset, np.asarray(chunk).tobytes()))
    batch = Batch(compiled.image, [writes], [(ports[o].offset, o.nbytes) for o in outputs])
    execute(config, [batch])
    unpacked, packed = batch.results[0]
    return unpacked, packed


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
def test_unpacked_equals_packed_equals_lane_reference(config: Config, op: str,
                                                      dtype: str) -> None:
    examples = 25 if config.runner == "native" else 8

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(LENGTHS, st.integers(0, 2**32 - 1), st.booleans())
    def prop(n: int, seed: int, specials: bool) -> None:
        rng = np.random.default_rng(seed)
        a, b = values(rng, n, dtype, specials), values(rng, n, dtype, specials)
        want = np.asarray(reference(op, a, b), dtype=dt.as_dtype(dtype).numpy).tobytes()
        unpacked, packed = run_both(op, dtype, n, (a, b), config)
        kind = dt.as_dtype(dtype)
        for label, got in (("unpacked", unpacked), ("packed", packed)):
            assert first_difference(got, want, kind) < 0, (
                f"{config.id}: {op} {dtype} n={n}: {label} {np.frombuffer(got, kind.numpy)} "
                f"!= lane reference {np.frombuffer(want, kind.numpy)}")

    prop()


def irregular(a: Array) -> Array:
    """``a`` with its first element squared: the elements are no longer one expression, so
    the reduction stays scalar."""
    items = a.items()
    return Array(a.shape, items=[items[0] * items[0], *items[1:]])


def stores(outputs: list[Node], arch: str) -> tuple[int, int]:
    """(stores, stencils) of the chain of ``outputs``."""
    names = stencil_sequence(outputs, arch)
    return sum(name.startswith("store_") for name in names), len(names)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", TYPES)
def test_lane_accumulators_are_not_stored_per_element(arch: str, op: str, dtype: str) -> None:
    """At most one store per lane (its partial result, while the next lane is computed) plus
    the output, the same count for 16, 40 and 300 elements (irregular elements: the scalar
    lowering)."""
    counts = {}
    for n in (16, 40, 300):
        a, b = inputs(n, dtype, False), inputs(n, dtype, False)
        counts[n], total = stores([reduction(op, irregular(a), b)], arch)
        assert total >= n - 1  # one operation per element at least: the elements are there
    assert max(counts.values()) <= lanes.LANES, counts
    assert len(set(counts.values())) == 1, counts


def test_benchmark_term_stores_per_lane() -> None:
    """The benchmark term (ten unpacked dot products) with irregular v1 (scalar lowering):
    its stores do not grow with v_size."""
    counts = {}
    for n in (50, 500):
        v1, v2 = inputs(n, "float32", False), inputs(n, "float32", False)
        term = sum((irregular(v1) + float(i)) @ v2 for i in range(10))
        counts[n], total = stores([term.node], "x86_64")
        assert total > 2 * 10 * n
    # + 1: the squared element, which the ten dot products share, is stored once
    assert counts[50] == counts[500] <= 10 * lanes.LANES + 1, counts


def test_benchmark_term_runs_packed() -> None:
    """The benchmark term itself runs on the packed stencils: ten fused dot products and the
    sum of their results, the same stencils for v_size 50 and 500 (14579 scalar stencils at
    500 before compiler/lanepack.py)."""
    sequences = {}
    for n in (50, 500):
        v1, v2 = inputs(n, "float32", False), inputs(n, "float32", False)
        term = sum((v1 + float(i)) @ v2 for i in range(10))
        sequences[n] = stencil_sequence([term.node], "x86_64")
    assert sequences[50] == sequences[500], sequences
    names = sequences[500]
    assert len(names) <= 2 * 10 + 1, names
    assert sum(name.startswith("dotadd_f32__") for name in names) == 9, names
    assert sum(name.startswith("dot_f32__") for name in names) == 1, names
