"""Hash-consing in C (graph/_intern.c) against its rules written out in Python: the node's
fingerprint formula, make's C path against the Python make, and the nodes' absence from the
cycle collector."""

from __future__ import annotations

import gc
import weakref
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import dtypes as dt
from copapy.graph import build
from copapy.graph import node as node_module
from copapy.graph.node import Node, stable_hash
from copapy.graph.ops import REGISTRY
from copapy.graph.traverse import live_nodes


def expected_fingerprint(node: Node) -> int:
    """node.py's fingerprint rule, computed here from the node's fields."""
    identity = node.attr[1] if node.op in ("input", "state") else node.attr  # type: ignore[index]
    own = 0 if identity is None else stable_hash(identity)
    return hash((zlib.crc32(node.op.encode()), node.dtype.code, own,
                 *[a.fingerprint for a in node.args]))


BINARY = sorted(name for name, spec in REGISTRY.items() if spec.arity == 2
                and spec.shape_rule == "elementwise" and not spec.name.startswith("cast"))


@st.composite
def expressions(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """A list of (operation, operand index, operand index) over a growing pool of nodes."""
    steps = []
    for k in range(draw(st.integers(1, 12))):
        pool = 9 + k
        steps.append((draw(st.sampled_from(BINARY)), draw(st.integers(0, pool - 1)),
                      draw(st.integers(0, pool - 1))))
    return steps


def pool_of() -> list[Node]:
    f32 = dt.float32
    x, y = cp.value(1.5), cp.value(-2.0, name="y")
    i, b = cp.value(3), cp.value(True)
    v = cp.vector([1.0, 2.0, 3.0]).node()
    consts = [node_module.const(c, f32) for c in (0.5, 0.0, 1.0)]
    return [x.node, y.node, i.node, b.node, v, *consts, node_module.const(3, dt.int32)]


@settings(max_examples=200, deadline=None)
@given(expressions())
def test_make_in_c_builds_what_the_python_make_builds(steps: list[tuple[str, int, int]]) -> None:
    pool = pool_of()
    for name, i, j in steps:
        spec = REGISTRY[name]
        a, b = pool[i], pool[j]
        try:
            built = build.apply(name, a, b)
        except (TypeError, ValueError):
            pool.append(a)
            continue
        pool.append(built)
        if built.op != name or len(built.args) != 2:
            continue  # simplified: not a plain node of this operation
        # the Python make finds the very node (same key: operand order, type, attribute, shape)
        assert build._make_python(spec, built.args, built.attr) is built
        if spec.commutative:
            assert build._make_python(spec, built.args[::-1], built.attr) is built
            assert build.make(spec, built.args[::-1], built.attr) is built
    for node in live_nodes(pool):
        assert node.fingerprint == expected_fingerprint(node), node


def test_fingerprints_of_leaves_follow_the_rule() -> None:
    nodes = [cp.value(1.0).node, cp.value(2, name="n").node, cp.vector([1, 2]).node(),
             node_module.const(7.0, dt.float64), node_module.const_array(b"\0" * 8, dt.int32, (2,))]
    for node in nodes:
        assert node.fingerprint == expected_fingerprint(node)
    # an input's fingerprint is its name's: the same for the same name, whatever its value
    assert cp.value(1.0, name="p").node.fingerprint == cp.value(9.0, name="p").node.fingerprint


def test_nodes_and_their_entries_are_not_in_the_cycle_collector() -> None:
    x, y = cp.value(1.5), cp.value(2.5)
    z = (x * y + x) * (y - x * 0.5)
    gradient = cp.grad(z, [x, y])
    nodes = live_nodes([z.node, *[g.node for g in gradient]])
    assert len(nodes) > 5
    for node in nodes:
        assert not gc.is_tracked(node)
        assert not gc.is_tracked(node.args)
    young = {id(o) for o in gc.get_objects()}
    assert not any(id(node) in young for node in nodes)


def test_a_dropped_gradient_leaves_the_intern_table() -> None:
    x = cp.value(0.25)
    y = cp.sin(x) * x + x * x
    gc.collect()
    before = len(node_module._interned)
    gradient = cp.grad(y, x)
    probe = weakref.ref(gradient.node)
    assert len(node_module._interned) > before
    del gradient
    gc.collect()
    assert probe() is None
    assert len(node_module._interned) == before
