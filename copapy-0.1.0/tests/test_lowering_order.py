"""The lowering gives the same results for every valid order of the graph's nodes.

Found building the i686 wheel (docs/architectures.md): 32-bit Python hashes give another
canonical operand order, hence another node order, and `sum((a + i) @ b for i in range(3))`
with one-element packed arrays returned 4 instead of 3 — a register spill before a fused dot
was stored into the slot of an operand that the dot was about to read (the operands were
freed before the stencil, not after). Here every topological order of such graphs is lowered
on x86_64, so the host's own order no longer hides a wrong one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.compiler import lower
from copapy.graph.node import Node

LIMIT = 3000


def topological_orders(order: list[Node]) -> Iterator[list[Node]]:
    """Every order of ``order`` in which each node follows the arguments it has in ``order``."""
    inside = set(order)
    deps = {n: {a for a in n.args if a in inside} for n in order}
    placed: list[Node] = []
    done: set[Node] = set()

    def walk() -> Iterator[list[Node]]:
        if len(placed) == len(order):
            yield list(placed)
            return
        for n in order:
            if n not in done and deps[n] <= done:
                placed.append(n)
                done.add(n)
                yield from walk()
                placed.pop()
                done.discard(n)

    yield from walk()


def results_over_orders(build: Callable[[], tuple[Any, list[Any]]],
                        monkeypatch: pytest.MonkeyPatch) -> set[tuple[float, ...]]:
    """Compile and run ``build()``'s outputs once per node order (at most LIMIT orders)."""
    original = lower.evaluation_order
    chosen: list[list[Node]] = []

    def reordered(roots: Any, stop: Any = None, live: Any = None) -> list[Node]:
        natural = original(roots, stop=stop, live=live)
        return chosen[0] if chosen and set(chosen[0]) == set(natural) else natural

    out, _inputs = build()
    natural = original([o.node for o in out], stop={})
    results = set()
    monkeypatch.setattr(lower, "evaluation_order", reordered)
    for k, order in enumerate(topological_orders(natural)):
        if k == LIMIT:
            break
        chosen[:] = [order]
        tg = cp.LocalTarget()
        tg.compile(*out)
        tg.run()
        results.add(tuple(float(tg.read(o)) for o in out))
    return results


@pytest.mark.parametrize("n", [1, 3])
def test_fused_dots_any_order(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def build() -> tuple[Any, list[Any]]:
        a = cp.value(np.zeros(n, np.float32)).to_packed()
        b = cp.value(np.ones(n, np.float32)).to_packed()
        return [sum((a + i) @ b for i in range(3))], [a, b]

    assert results_over_orders(build, monkeypatch) == {(3.0 * n,)}


def test_reductions_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    def build() -> tuple[Any, list[Any]]:
        v = cp.value(np.arange(1, 5, dtype=np.float32)).to_packed()
        w = cp.value(np.full(4, 2.0, np.float32)).to_packed()
        s1 = (v * w).sum()
        s2 = (v + w).sum()
        return [s1 * s2 + (v @ w), s1 - s2], [v, w]

    assert results_over_orders(build, monkeypatch) == {(20.0 * 18.0 + 20.0, 2.0)}
