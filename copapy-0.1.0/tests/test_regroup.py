"""Constant regrouping and like terms (graph/build.py, _regroup): operation counts before and
after, results against NumPy (int32 exactly, float32 within the option's tolerance), and float
graphs unchanged bit for bit without ``reassociate_floats``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph import build
from copapy.graph.traverse import live_nodes

from .support.checks import examples


def operations(v: Any) -> int:
    """The operations (nodes with operands) the value's graph computes."""
    return sum(1 for n in live_nodes([v.node]) if n.args)


#: name -> (expression, operations written, operations after regrouping)
EXPRESSIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    "(x+1)+(y+2)": (lambda x, y: (x + 1) + (y + 2), 3, 2),
    "2*x+3*x": (lambda x, y: 2 * x + 3 * x, 3, 1),
    "(x*2)*(y*3)": (lambda x, y: (x * 2) * (y * 3), 3, 2),
    "((x+1)+y)+2": (lambda x, y: ((x + 1) + y) + 2, 3, 2),
    "3*x-x": (lambda x, y: 3 * x - x, 2, 1),
    "x*5-2*x+y": (lambda x, y: x * 5 - 2 * x + y, 4, 2),
    "(x+1)+(y+2)+(x+3)": (lambda x, y: (x + 1) + (y + 2) + (x + 3), 5, 3),
}


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_operation_counts(name: str) -> None:
    expr, written, regrouped = EXPRESSIONS[name]
    assert operations(expr(cp.value(1), cp.value(2))) == regrouped  # int32: always
    assert operations(expr(cp.value(1.0), cp.value(2.0))) == written  # float32: not by default
    with cp.simplify_options(reassociate_floats=True):
        assert operations(expr(cp.value(1.0), cp.value(2.0))) == regrouped


def run(out: Any) -> Any:
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.run()
    return tg.read(out)


# random expression trees over x, y, z and small constants
Tree = Any
leaves = st.sampled_from(["x", "y", "z"]) | st.integers(-4, 4)


def tree_of(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Tree]:
    return st.recursive(leaf, lambda sub: st.tuples(st.sampled_from(["add", "sub", "mul"]),
                                                     sub, sub), max_leaves=8)


trees = tree_of(leaves)
#: without 0: x + 0 -> x and x * 0 -> 0 are the documented exact-rule exceptions for -0.0 and
#: NaN (docs/semantics.md), older than regrouping
nonzero_trees = tree_of(st.sampled_from(["x", "y", "z"]) | st.sampled_from([-4, -3, -2, -1, 1,
                                                                            2, 3, 4]))


def evaluate(tree: Tree, env: dict[str, Any], number: Callable[[int], Any]) -> Any:
    if isinstance(tree, str):
        return env[tree]
    if isinstance(tree, int):
        return number(tree)
    op, a, b = tree
    x, y = evaluate(a, env, number), evaluate(b, env, number)
    return x + y if op == "add" else x - y if op == "sub" else x * y


def folds_to_zero(tree: Tree) -> bool:
    """A constant subtree equal to 0 (``-4 - -4``): its x + 0 -> x and x * 0 -> 0 are the
    older exact-rule exceptions, not regrouping."""
    if isinstance(tree, str):
        return False
    if isinstance(tree, int):
        return tree == 0
    _, a, b = tree
    if folds_to_zero(a) or folds_to_zero(b):
        return True
    constant = not any(isinstance(leaf, str) for leaf in leaves_of(tree))
    return constant and evaluate(tree, {}, int) == 0


def leaves_of(tree: Tree) -> list[Any]:
    return [tree] if not isinstance(tree, tuple) else leaves_of(tree[1]) + leaves_of(tree[2])


def magnitude(tree: Tree, env: dict[str, float]) -> float:
    """Σ |terms| bound of the expression (the scale of its rounding errors)."""
    if isinstance(tree, str):
        return abs(env[tree])
    if isinstance(tree, int):
        return float(abs(tree))
    op, a, b = tree
    ma, mb = magnitude(a, env), magnitude(b, env)
    return ma * mb if op == "mul" else ma + mb


def traced(tree: Tree, inputs: dict[str, Any]) -> Any:
    out = evaluate(tree, inputs, lambda c: c)
    return out if isinstance(out, cp.Value) else inputs["x"] * 0 + out


@settings(max_examples=examples(40), deadline=None)
@given(trees, st.lists(st.integers(-2**31, 2**31 - 1), min_size=3, max_size=3))
def test_int32_regrouping_is_exact(tree: Tree, values: list[int]) -> None:
    env = dict(zip("xyz", (np.array(v, np.int32) for v in values), strict=True))
    with np.errstate(over="ignore"):
        want = evaluate(tree, env, lambda c: np.array(c, np.int32))
    inputs = {k: cp.value(int(v)) for k, v in env.items()}
    assert run(traced(tree, inputs)) == int(want)


float_values = st.lists(st.floats(-100, 100, width=32), min_size=3, max_size=3)


@settings(max_examples=examples(40), deadline=None)
@given(nonzero_trees, float_values)
def test_float_graphs_unchanged_without_the_option(tree: Tree, values: list[float]) -> None:
    """Default options: the float graph is the one built with regrouping switched off
    entirely (the same node), and NumPy float32 in the written order gives the same bits."""
    assume(not folds_to_zero(tree))
    env = {k: np.float32(v) for k, v in zip("xyz", values, strict=True)}
    with np.errstate(all="ignore"):
        want = np.float32(evaluate(tree, env, lambda c: np.float32(c)))
    inputs = {k: cp.value(float(v)) for k, v in env.items()}
    out = traced(tree, inputs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "_regroup", lambda spec, a, b: None)
        build._regroup_types(True)  # every float call through the Python make, which is off
        try:
            again = traced(tree, inputs)
        finally:
            build._regroup_types(False)
    assert again.node is out.node
    got = np.float32(run(out))
    assert got.tobytes() == want.tobytes() or (np.isnan(got) and np.isnan(want)), (got, want)


@settings(max_examples=examples(40), deadline=None)
@given(trees, float_values)
def test_float_regrouping_within_tolerance(tree: Tree, values: list[float]) -> None:
    """Under reassociate_floats: within the documented bound, a few float32 roundings of the
    terms' magnitude (docs/semantics.md)."""
    env = {k: np.float64(np.float32(v)) for k, v in zip("xyz", values, strict=True)}
    want = float(evaluate(tree, env, float))
    bound = magnitude(tree, env)
    with cp.simplify_options(reassociate_floats=True):
        out = traced(tree, {k: cp.value(float(v)) for k, v in env.items()})
    got = float(run(out))
    assert abs(got - want) <= 8 * 2.0**-24 * bound + 1e-30, (got, want, bound)


def test_the_option_off_again_in_another_block() -> None:
    """Leaving the block restores the written float graph (make's C part included)."""
    x, y = cp.value(1.0), cp.value(2.0)
    with cp.simplify_options(reassociate_floats=True):
        assert operations((x + 1) + (y + 2)) == 2
    assert operations((x + 1) + (y + 2)) == 3
