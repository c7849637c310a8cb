"""graph/lift.py's closure is the shared walk (graph/traverse.closure: live_nodes through state
updates, an aliased input walked through its target) and gives the order of the Python walk it
replaced, or its refusal of a cycle through an alias (hypothesis over random scalar graphs of
inputs, states, aliases and element-wise operations)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from copapy import dtypes as dt
from copapy.graph import build
from copapy.graph import lift as lifting
from copapy.graph.lift import LiftError, lift
from copapy.graph.node import Node, fresh_array_input, fresh_input
from copapy.graph.state import new_state, set_update, update_of

from .support.checks import examples


def _operands(node: Node, alias: Mapping[Node, Node]) -> Iterable[Node]:
    target = alias.get(node)
    return node.args if target is None else (target,)


def reference_closure(roots: Sequence[Node], alias: Mapping[Node, Node]) -> list[Node]:
    """lift._closure before it used the shared walk (its own depth-first walk)."""
    order: list[Node] = []
    done: set[Node] = set()
    on_path: set[Node] = set()
    pending = list(roots)
    while pending:
        root = pending.pop(0)
        if root in done:
            continue
        stack: list[tuple[Node, Iterable[Node]]] = [(root, iter(_operands(root, alias)))]
        on_path.add(root)
        while stack:
            node, it = stack[-1]
            nxt = next((a for a in it if a not in done), None)
            if nxt is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
                order.append(node)
                if node.op == "state":
                    pending.append(update_of(node))
                continue
            if nxt in on_path:
                raise LiftError(f"{nxt!r} reads itself in one run through an I/O alias")
            on_path.add(nxt)
            stack.append((nxt, iter(_operands(nxt, alias))))
    return order


def graph(steps: list[tuple[int, int, int]], updates: list[int], aliases: dict[int, int],
          ) -> tuple[list[Node], list[Node], dict[Node, Node]]:
    """Three inputs and three states, then operations on earlier nodes; each state's update
    and each aliased input's target a node of the pool (so aliases may close cycles)."""
    inputs = [fresh_input(dt.float32, 0.0) for _ in range(3)]
    states = [new_state(dt.float32, float(k)) for k in range(3)]
    pool = [*inputs, *states]
    for i, j, kind in steps:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        pool.append(build.apply("neg", a) if kind == 2 else
                    build.apply("mul" if kind else "add", a, b))
    for s, k in zip(states, updates, strict=False):
        set_update(s, pool[k % len(pool)])
    alias = {inputs[i]: pool[k % len(pool)] for i, k in aliases.items()}
    return pool, inputs, alias


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 2)),
                max_size=40),
       st.lists(st.integers(0, 10**6), max_size=3),
       st.dictionaries(st.integers(0, 2), st.integers(0, 10**6), max_size=3),
       st.lists(st.integers(0, 10**6), min_size=1, max_size=4))
def test_the_lift_walks_as_its_own_walk_did(steps: list[tuple[int, int, int]],
                                            updates: list[int], aliases: dict[int, int],
                                            picks: list[int]) -> None:
    pool, inputs, alias = graph(steps, updates, aliases)
    roots = [pool[k % len(pool)] for k in picks]
    lanes = {} if inputs[0] in alias else {
        inputs[0]: fresh_array_input(dt.float32, bytes(16), (4,))}
    try:
        want: list[Node] | None = reference_closure(roots, alias)
    except LiftError:
        want = None
    if want is None:
        with pytest.raises(LiftError, match="reads itself in one run through an I/O alias"):
            lift(roots, lanes, 4, alias)
        return
    assert lifting._closure(roots, alias) == want
    lift(roots, lanes, 4, alias)  # and lifts it


def test_a_cycle_through_an_alias_is_refused() -> None:
    a = fresh_input(dt.float32, 0.0)
    t = build.apply("neg", build.apply("add", a, a))
    with pytest.raises(LiftError, match="reads itself in one run through an I/O alias"):
        lift([t], {}, 4, {a: t})
