"""The lowering order keeps the register need low whatever order commutative operands have.

Regression: the canonical operand order (a structural hash, for deterministic images) put the
short operand of `s + x*y` first in about half the additions of a dot product, and the
lowering, which visited operands in their listed order, then held x*y in a register while it
computed the long chain s: the benchmark term's 10-element form went from 299 to 344 stencils
(55 spill stores instead of 10)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.compiler import compile_program
from copapy.compiler.schedule import _needs, evaluation_order, register_needs
from copapy.graph import build
from copapy.graph.traverse import live_nodes

from .support.checks import examples


def stores(n_stencils: int, n_ops: int) -> int:
    """Stencils beyond one per operation: stores (spills and output writes)."""
    return n_stencils - n_ops


def dot(n: int) -> cp.value[float]:
    xs = [cp.value(float(j)) for j in range(n)]
    ys = [cp.value(5.0) for _ in range(n)]
    s = xs[0] * ys[0]
    for x, y in zip(xs[1:], ys[1:], strict=True):
        s = s + (x + 1.0) * y
    return s


def test_a_dot_product_chain_spills_nothing() -> None:
    for n in (3, 10, 50, 200):
        prog = compile_program([dot(n).node], "x86_64")
        assert stores(prog.stencil_count, prog.op_count) == 1, n  # the output only


def test_sum_of_dots_spills_once_per_dot() -> None:
    # each dot needs both registers; adding it to the running sum needs a third: one spill
    total = dot(10)
    for _ in range(9):
        total = total + dot(10)
    prog = compile_program([total.node], "x86_64")
    assert stores(prog.stencil_count, prog.op_count) <= 10


def test_order_is_topological_and_complete() -> None:
    total = dot(7) + cp.sqrt(dot(4) * dot(3))
    natural = live_nodes([total.node])
    order = evaluation_order([total.node])
    assert set(map(id, order)) == set(map(id, natural)) and len(order) == len(natural)
    position = {id(n): i for i, n in enumerate(order)}
    assert all(position[id(a)] < position[id(n)] for n in order for a in n.args)


def test_register_needs_are_ershov_numbers() -> None:
    a, b, c, d = (cp.value(float(i)) for i in range(4))
    e = (a + b) * (c + d)  # both operands need 1: the product needs 2
    f = e + a              # a is in memory: still 2
    need = register_needs(live_nodes([f.node]), ())
    assert [need[n.node] for n in (a, a + b, e, f)] == [0, 1, 2, 2]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.booleans()),
                min_size=1, max_size=60), st.integers(0, 3))
def test_a_walk_given_by_the_caller_gives_the_same_order(steps: list[tuple[int, int, bool]],
                                                        extra: int) -> None:
    # the compiler passes the closure it walked already (another root order, more leaves):
    # the schedule must be the one of its own walk, node for node
    pool = [cp.value(float(i)).node for i in range(4)]
    for i, j, mul in steps:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        pool.append(build.apply("mul" if mul else "add", a, b))
    roots = pool[-1 - extra:]
    stop = {pool[0]}
    walked = live_nodes([*reversed(roots), *pool[:4]], stop=stop)
    assert evaluation_order(roots, stop, live=walked) == evaluation_order(roots, stop)


def reference_walk(roots: list[build.Node], stop: set[build.Node],
                   reorder: dict[build.Node, list[build.Node]]) -> list[build.Node]:
    """The post-order of graph/traverse.py written as the plain recursion it stands for."""
    order: list[build.Node] = []
    seen: set[build.Node] = set()

    def visit(node: build.Node) -> None:
        seen.add(node)
        if (node.args or node in reorder) and node not in stop:
            for child in reorder.get(node, node.args):
                if child not in seen:
                    visit(child)
        order.append(node)

    for root in roots:
        if root not in seen:
            visit(root)
    return order


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 2)),
                min_size=1, max_size=80),
       st.lists(st.integers(0, 10**6), min_size=1, max_size=5),
       st.sets(st.integers(0, 10**6), max_size=6), st.sets(st.integers(0, 10**6), max_size=6),
       st.sampled_from(["set", "dict", "tuple"]),
       st.dictionaries(st.integers(0, 2), st.integers(0, 10**6), max_size=2))
def test_live_nodes_is_the_recursive_post_order(steps: list[tuple[int, int, int]],
                                                picks: list[int], stops: set[int],
                                                flips: set[int], stop_kind: str,
                                                aliases: dict[int, int]) -> None:
    # live_nodes runs in C (graph/_walk.c): the same order as the recursion, with leaves in
    # ``stop`` (any container the compiler passes: a set, the placed dict, a tuple), operands
    # visited in a given order for some nodes, unary nodes, shared operands, repeated roots,
    # leaves walked through the operand reorder gives them (graph/lift.py's aliases; a cycle
    # through one is walked once, as the recursion does)
    pool = [cp.value(float(i)).node for i in range(3)]
    for i, j, kind in steps:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        pool.append(build.apply("neg", a) if kind == 2 else
                    build.apply("mul" if kind else "add", a, b))
    roots = [pool[k % len(pool)] for k in picks]
    stop_set = {pool[k % len(pool)] for k in stops}
    reorder = {n: list(reversed(n.args)) for n in (pool[k % len(pool)] for k in flips)
               if len(n.args) == 2}
    reorder.update({pool[leaf]: [pool[k % len(pool)]] for leaf, k in aliases.items()})
    stop: set[build.Node] | dict[build.Node, int] | tuple[build.Node, ...] = (
        stop_set if stop_kind == "set" else dict.fromkeys(stop_set, 0) if stop_kind == "dict"
        else tuple(stop_set))
    expected = reference_walk(roots, stop_set, reorder)
    assert live_nodes(roots, stop, reorder) == expected
    assert live_nodes(iter(roots), stop, reorder or None) == expected


def test_live_nodes_walks_a_deep_chain_without_recursion() -> None:
    x = cp.value(1.0).node
    node = x
    for _ in range(200_000):
        node = build.apply("add", node, x)
    order = live_nodes([node])
    assert len(order) == 200_001 and order[0] is x and order[-1] is node


def reference_needs(order: list[build.Node], stop: set[build.Node]) -> dict[build.Node, int]:
    """Ershov numbers as the definition gives them (sorted operand needs)."""
    need: dict[build.Node, int] = {}
    for node in order:
        if not node.args or node in stop:
            need[node] = 0
        else:
            child = sorted((need[a] for a in node.args), reverse=True)
            need[node] = max(1, *(n + k for k, n in enumerate(child)))
    return need


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6),
                          st.integers(0, 3)), min_size=1, max_size=60),
       st.sets(st.integers(0, 10**6), max_size=4))
def test_register_needs_and_operand_order(steps: list[tuple[int, int, int, int]],
                                          stops: set[int]) -> None:
    # the needs and the reordering run in C (compiler/_lower.c), selects in Python: both
    # against the definition, and every reordered node visits its larger need first
    pool = [cp.value(float(i)).node for i in range(3)]
    for i, j, k, kind in steps:
        a, b, c = (pool[x % len(pool)] for x in (i, j, k))
        pool.append(build.apply("neg", a) if kind == 0 else build.apply("add", a, b)
                    if kind == 1 else build.apply("where", build.apply("lt", a, b), b, c)
                    if kind == 2 else build.apply("mul", a, c))
    stop = {pool[x % len(pool)] for x in stops}
    order = live_nodes([pool[-1]], stop=stop)
    need, reordered = _needs(order, stop)
    assert need == reference_needs(order, stop)
    for node in order:
        if node.args and node not in stop:
            visit = reordered.get(node, node.args)
            assert sorted(map(id, visit)) == sorted(map(id, node.args))
            needs = [need[a] for a in visit]
            assert needs == sorted(needs, reverse=True)
            if node in reordered:  # only where the listed order is not already the best
                assert [need[a] for a in node.args] != needs
