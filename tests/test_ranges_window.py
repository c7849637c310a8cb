"""The walks of the range analysis in C (graph/_walk.c: side_window, the window of a cp.where
side; expose_top, the exposure walk) against their Python references (graph/ranges.py
_side_window, _expose_top), and the whole analysis with either (issue 35): same operations,
same order, same work counted, same ranges and reports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph import _walk
from copapy.graph import ranges as R
from copapy.graph.intervals import Interval
from copapy.graph.node import Node
from copapy.graph.traverse import live_nodes

#: (name, arity, build): the operations the random graphs draw from
OPS: list[tuple[str, int, Callable[..., Any]]] = [
    ("add", 2, lambda a, b: a + b),
    ("sub", 2, lambda a, b: a - b),
    ("mul", 2, lambda a, b: a * b),
    ("div", 2, lambda a, b: a / b),
    ("sqrt", 1, cp.sqrt),
    ("log", 1, cp.log),
    ("where", 3, lambda c, a, b: cp.where(c > 0.25, a, b)),
    ("where_and", 3, lambda c, a, b: cp.where((c > -0.5) & (a < 0.5), b, a * 0.5)),
    ("square", 1, lambda a: a * a + 1.0),
]

steps = st.lists(st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 10**6),
                           st.integers(0, 10**6), st.integers(0, 10**6)),
                 min_size=1, max_size=60)


def build(n_inputs: int, plan: list[tuple[int, int, int, int]]) -> tuple[list[Any], list[Any]]:
    """Declared inputs and the values a plan of operations over earlier values builds."""
    values: list[Any] = [cp.value(0.5, range=(-1.0, 1.0)) for _ in range(n_inputs)]
    inputs = list(values)
    for op, *picks in plan:
        _, arity, make = OPS[op]
        values.append(make(*(values[p % len(values)] for p in picks[:arity])))
    return inputs, values


@contextmanager
def python_walks() -> Iterator[None]:
    saved = R.side_window, R.expose_top
    R.side_window, R.expose_top = R._side_window, R._expose_top
    try:
        yield
    finally:
        R.side_window, R.expose_top = saved


@settings(max_examples=150, deadline=None)
@given(n_inputs=st.integers(1, 4), plan=steps, data=st.data())
def test_side_window_is_its_python_reference(n_inputs: int,
                                             plan: list[tuple[int, int, int, int]],
                                             data: st.DataObject) -> None:
    _, values = build(n_inputs, plan)
    nodes = live_nodes([v.node for v in values])
    inner = [n for n in nodes if n.args]
    side = data.draw(st.sampled_from(inner or nodes))
    # (more than 8 narrowed nodes: the C walk looks them up in the dict, not in an array)
    narrowed = {n: Interval(0.0, 1.0) for n in data.draw(
        st.lists(st.sampled_from(nodes), max_size=12))}
    env = {n: Interval(-1.0, 1.0) for n in data.draw(st.lists(st.sampled_from(nodes),
                                                              max_size=3))}
    first = data.draw(st.sampled_from([0, *(n.serial for n in nodes)]))
    limit = data.draw(st.integers(0, 24))
    assert _walk.side_window(side, narrowed, env, first, limit) == \
        R._side_window(side, narrowed, env, first, limit)


@contextmanager
def full_side_walks() -> Iterator[None]:
    """exposed() walks every side analysis node by node (no frontier shortcut)."""
    saved = R._Pass._side

    def side(self: R._Pass, node: Node, split: R._Split) -> R._Pass | None:
        sub = saved(self, node, split)
        if sub is not None:
            sub.frontier = None
        return sub

    R._Pass._side = side  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        R._Pass._side = saved  # type: ignore[method-assign]


#: how many of the drawn programs had reports, and how many none (both must occur)
reported = [0, 0]


@settings(max_examples=80, deadline=None)
@given(n_inputs=st.integers(1, 4), plan=steps)
def test_the_analysis_is_the_same_with_the_python_walks(
        n_inputs: int, plan: list[tuple[int, int, int, int]]) -> None:
    _, values = build(n_inputs, plan)
    outs = [v.node for v in values[-3:]]
    fast = R.analyse(outs)
    with python_walks():
        ref = R.analyse(outs)
    assert fast.ranges == ref.ranges
    assert [(r.node, r.finding.kind, r.operands) for r in fast.reports] == \
        [(r.node, r.finding.kind, r.operands) for r in ref.reports]
    reported[bool(fast.reports)] += 1
    with full_side_walks():
        full = R.analyse(outs)
    # (the same findings; which of a node's equal findings is shown may differ)
    assert {(r.node, r.finding.kind) for r in fast.reports} == \
        {(r.node, r.finding.kind) for r in full.reports}
    assert (fast.split_explored, fast.split_evaluated, fast.split_budget_exhausted) == \
        (ref.split_explored, ref.split_evaluated, ref.split_budget_exhausted)


def test_the_drawn_programs_have_reports_and_none() -> None:
    """The differential test above met both: the exposure walk had findings to walk to."""
    if not all(reported):
        test_the_analysis_is_the_same_with_the_python_walks()
    assert all(reported), reported


def test_a_guard_chain_is_the_same_with_the_python_walks() -> None:
    """The benchmark's guard-dense graph (bench_ranges.py guarded): every log guarded."""
    xs = [cp.value(0.5, range=(-1.0, 1.0)) for _ in range(16)]
    acc: Any = xs[0]
    for i in range(400):
        x = xs[i % 16]
        acc = cp.where(x > 0.1, acc + cp.log(x), acc * 0.5) + cp.sqrt(x * x + 1.0)
    fast = R.analyse([acc.node])
    with python_walks():
        ref = R.analyse([acc.node])
    assert fast.reports == ref.reports == []
    # and with one log unguarded the walk finds it (in C and in Python)
    bare = R.analyse([(acc + cp.log(xs[3])).node])
    with python_walks():
        bare_ref = R.analyse([(acc + cp.log(xs[3])).node])
    assert [r.node for r in bare.reports] == [r.node for r in bare_ref.reports] == \
        [cp.log(xs[3]).node]
    assert fast.ranges == ref.ranges
    assert (fast.split_explored, fast.split_evaluated) == (ref.split_explored,
                                                           ref.split_evaluated) != (0, 0)


class Fake:
    """Not a Node: read by attribute (the C walk's slow path)."""

    def __init__(self, serial: int, op: str, *args: object) -> None:
        self.serial, self.op, self.args = serial, op, args


#: the C walk as the tests call it with what is not a Node (its stub names Node)
side_window: Any = _walk.side_window


def test_objects_other_than_nodes_are_read_by_attribute() -> None:
    a, b = Fake(0, "input"), Fake(1, "input")
    s = Fake(2, "state")
    m = Fake(3, "mul", a, s)
    top = Fake(4, "add", m, b)
    for narrowed in ({a: Interval(0.0, 1.0)}, {b: Interval(0.0, 1.0)}, {}):
        got = side_window(top, narrowed, {}, 0, 16)
        assert got == R._side_window(top, narrowed, {}, 0, 16)  # type: ignore[arg-type]
    assert side_window(top, {a: Interval(0.0, 1.0)}, {}, 0, 16) == ([m, top], 5)


class Named(Fake):
    """Equal by name: being a key of narrowed is equality, not identity."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Named) and other.op == self.op

    def __hash__(self) -> int:
        return hash(self.op)


def test_narrowed_keys_equal_but_not_identical_count() -> None:
    a = Named(0, "a")
    top = Fake(2, "add", Fake(1, "neg", a), Fake(0, "b"))
    narrowed = {Named(5, "a"): Interval(0.0, 1.0)}
    got = side_window(top, narrowed, {}, 0, 16)
    assert got == R._side_window(top, narrowed, {}, 0, 16)  # type: ignore[arg-type]
    assert [n.op for n in got[0]] == ["neg", "add"]


@pytest.mark.parametrize("call, error", [
    (lambda x: side_window(x.node, [], {}, 0, 16), "narrowed must be a dict"),
    (lambda x: side_window(x.node, {}, {}, 0), "takes 5 arguments"),
    (lambda x: side_window(x.node, {}, {}, "0", 16), "integer"),
    (lambda x: side_window(Fake(1, "add", object()), {}, {}, 0, 16),
     "has no attribute 'args'"),
    (lambda x: side_window(Fake(1, "add", Fake(-1, "neg", x.node)), {}, {}, 0, 16),
     "never negative"),
])
def test_bad_calls_name_the_problem(call: Callable[[Any], Any], error: str) -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    with pytest.raises((TypeError, AttributeError, ValueError), match=error):
        call(x)


def test_expose_top_refuses_what_is_not_its_containers() -> None:
    x = cp.value(0.5, range=(-1.0, 1.0))
    good: list[Any] = [[x.node], set(), {}, {}, {}, {x.node: Interval(-1.0, 1.0)}, [], [],
                       R.TRUE, R.FALSE]
    _walk.expose_top(*good)
    assert good[0] == [] and good[1] == {x.node}
    for k, bad in [(0, ()), (1, []), (2, []), (3, []), (4, [x.node]), (5, []), (6, ()),
                   (7, ())]:
        args = list(good)
        args[k] = bad
        with pytest.raises(TypeError, match=r"expose_top\(stack: list"):
            _walk.expose_top(*args)
    with pytest.raises(TypeError, match="expose_top"):
        _walk.expose_top(*good[:9])
    split = cp.where(x > 0.0, x + 1.0, x).node
    with pytest.raises(TypeError, match=r"\(analysis, side\) pairs"):
        _walk.expose_top([split], set(), {}, {split: [split]}, {}, {}, [], [], R.TRUE, R.FALSE)


def test_a_node_without_its_args_slot_is_an_error() -> None:
    bare = Node.__new__(Node)
    with pytest.raises(AttributeError, match="args"):
        _walk.side_window(bare, {}, {}, 0, 16)
