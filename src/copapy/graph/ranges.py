"""Interval analysis over the graph: the range of every node, and the domain errors it admits.

Leaves: an input has its declared range (``cp.value(x, range=(lo, hi))`` or the channel it is
bound to, :func:`declare`) or every value of its type; a constant is itself; ``cp.dt`` is
:data:`DT`. Signal states (delay, integrate, feedback) are a fixed point: start at the initial
value, widen what still moves after :data:`ROUNDS` rounds to infinity, and keep the widened
range only if the update maps it into itself (a saturating form such as ``cp.clamp`` does);
a state that stays infinite is *unbounded* and listed as such (:attr:`Analysis.unbounded`).

Operations take the rule of their registry row (graph/range_rules.py). ``cp.where(c, a, b)``
is split by its condition: when ``c`` compares a node with something, ``a`` is analysed with
that node's range narrowed to where ``c`` holds and ``b`` to where it does not, and a domain
error inside a side is reported only where the narrowed range admits it (both sides are
computed, but a NaN of the side not taken never reaches the result). A side is analysed
again only in the operations near it that depend on a narrowed node; the rest keep their
range (the work stays linear in the graph, see benchmarks/bench_ranges.py). The walks this
needs (a side's window, the exposure walk) run in C (graph/_walk.c); :func:`_side_window` and
:func:`_expose_top` are their Python references (tests/test_ranges_window.py).

Findings of a node are reported only if the node is *exposed*: an output depends on it other
than only through the guarded side of a ``cp.where``.
"""

from __future__ import annotations

import math
import struct
import weakref
from collections import ChainMap, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

from .._gc import without_gc
from ..dtypes import DType, float32, float64
from . import _walk
from .intervals import (
    BOOL,
    F32_MAX,
    FALSE,
    INF,
    INT32,
    TRUE,
    Interval,
    f32_next,
    full,
    hull,
    point,
)
from .location import describe
from .loop import FORI, body_of
from .node import Node, const_value
from .range_rules import RULES, Finding, decide, sum_of
from .reference import leaf_array
from .state import state_initial, update_of
from .traverse import live_nodes

#: the range of ``cp.dt`` before a task's period replaces it (seconds): periods the
#: schedulers accept
DT = Interval(1e-7, 3600.0)
#: fixed-point rounds before a moving state bound is widened to infinity
ROUNDS = 3
#: the most nodes of a cp.where side analysed again with the condition's narrowed ranges
SIDE_NODES = 16
#: how deep splits nest (a side's guards split again, theirs not: the parent's split of
#: them counts)
SPLIT_DEPTH = 2
#: nodes the splitting may evaluate again in one analysis (at least; 8 per node analysed)
SPLIT_NODES = 4096

_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
#: the operations of run's inline path, and its types
_FAST = frozenset({"add", "sub", "mul"})
_F32_TYPE, _FLOATS = float32, frozenset({float32, float64})
_F32S = struct.Struct("<f")

#: input -> its declared range (cp.value(range=...), tg.bind to a channel)
_declared: weakref.WeakKeyDictionary[Node, Interval] = weakref.WeakKeyDictionary()


def declare(node: Node, lo: float, hi: float) -> None:
    """Declare the range of an input (its writes and bound channel stay inside it)."""
    if node.op != "input":
        raise TypeError(f"only an input (cp.value) has a declared range, not {node!r}")
    lo, hi = float(lo), float(hi)
    if not lo <= hi:
        raise ValueError(f"range=({lo}, {hi}): lo must be <= hi (and neither NaN)")
    _declared[node] = Interval(lo, hi)


def declared(node: Node) -> Interval | None:
    return _declared.get(node)


@dataclass(frozen=True)
class Report:
    """A domain error an operation's operand ranges admit."""

    node: Node
    finding: Finding
    operands: tuple[Interval, ...]
    #: the operand ranges depend on an input without a declared range (whose range is then
    #: every value of its type) or on an unbounded signal state: cp.check reports these only
    #: with strict=True
    assumed: bool = False

    @property
    def location(self) -> str:
        return describe(self.node)

    def __str__(self) -> str:
        ops = ", ".join(str(o) for o in self.operands)
        return (f"{self.location}\n    {self.finding.kind} in {self.node.op}: "
                f"{self.finding.detail} (operands {ops})\n    fix: {self.finding.hint}")


@dataclass
class Analysis:
    ranges: dict[Node, Interval]
    reports: list[Report] = field(default_factory=list)
    #: signal states whose range no fixed point bounds (no declared range, no saturating form)
    unbounded: list[Node] = field(default_factory=list)
    #: comparisons the ranges decide -> True / False
    decided: dict[Node, bool] = field(default_factory=dict)
    #: the cp.where splitting ran out of its budget: later guards were not split, so an
    #: operation they guard may be reported
    split_budget_exhausted: bool = False
    #: the cost of splitting: nodes the side windows walked, and operations the side
    #: analyses evaluated again (each at most SIDE_NODES per side; in total SPLIT_NODES or
    #: 8 per operation)
    split_explored: int = 0
    split_evaluated: int = 0
    #: cp.fori_loop bodies analysed with their state at every value of its type (no fixed
    #: point over the iterations): their reports are ``assumed``
    loops: int = 0


def _leaf(node: Node) -> Interval:
    op = node.op
    if op == "const":
        if node.shape:
            values = leaf_array(node, node.attr).astype(float).ravel()
            nan = bool((values != values).any())
            finite = values[values == values]
            if not len(finite):
                return Interval(0.0, 0.0, True)
            return Interval(float(finite.min()), float(finite.max()), nan)
        return point(float(const_value(node)))
    if op == "input":
        found = _declared.get(node)
        return found if found is not None else full(node.dtype)
    if op == "dt":
        return DT
    if op == "state":
        return _initial(node)
    return full(node.dtype)


def _initial(state: Node) -> Interval:
    values = leaf_array(state, state_initial(state)).astype(float).ravel()
    return Interval(float(values.min()), float(values.max()), bool((values != values).any()))


def _refine(cond: Node, truth: bool, ranges: Mapping[Node, Interval]) -> dict[Node, Interval]:
    """The ranges of nodes ``cond`` constrains where it is ``truth`` (those that narrow)."""
    out: dict[Node, Interval] = {}
    _narrow(cond, truth, ranges, out)
    return {n: i for n, i in out.items() if i != ranges.get(n)}


_FLIP = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}
_SWAP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _narrow(cond: Node, truth: bool, ranges: Mapping[Node, Interval],
            out: dict[Node, Interval]) -> None:
    op = cond.op
    if op == "lnot":
        _narrow(cond.args[0], not truth, ranges, out)
        return
    if op == "and" and truth and cond.dtype.is_bool:
        for a in cond.args:
            _narrow(a, True, ranges, out)
        return
    if op == "or" and not truth and cond.dtype.is_bool:
        for a in cond.args:
            _narrow(a, False, ranges, out)
        return
    if op not in _FLIP:
        return
    x, y = cond.args
    rx, ry = out.get(x, ranges.get(x)), out.get(y, ranges.get(y))
    if rx is None or ry is None:
        return
    name = op if truth else _FLIP[op]
    # a comparison that holds is never one with NaN; one that fails may be
    nan_ok = not truth
    # ... and it fails whatever the other operand is when one operand is NaN: only an
    # operand that cannot be NaN narrows the other there
    nx = _bound(rx, name, ry, x.dtype, nan_ok) if truth or not ry.nan else None
    ny = _bound(ry, _SWAP[name], rx, y.dtype, nan_ok) if truth or not rx.nan else None
    if nx is not None:
        out[x] = nx
    if ny is not None:
        out[y] = ny


def _bound(r: Interval, name: str, other: Interval, dtype: DType, nan_ok: bool
           ) -> Interval | None:
    """``r`` narrowed to the values v with ``v name other`` for some value of ``other``."""
    lo, hi = r.lo, r.hi
    if name in ("lt", "le"):
        limit = other.hi
        if name == "lt":
            limit = _below(limit, dtype)
        hi = min(hi, limit)
    else:
        limit = other.lo
        if name == "gt":
            limit = _above(limit, dtype)
        lo = max(lo, limit)
    if lo > hi:
        return None  # this side is never taken (but NaN): keep the range, sound
    return Interval(lo, hi, r.nan and nan_ok)


def _below(x: float, dtype: DType) -> float:
    if not math.isfinite(x):
        return x
    if not dtype.is_float:
        return x - 1
    return f32_next(x, False) if dtype.size == 4 else math.nextafter(x, -INF)


def _above(x: float, dtype: DType) -> float:
    if not math.isfinite(x):
        return x
    if not dtype.is_float:
        return x + 1
    return f32_next(x, True) if dtype.size == 4 else math.nextafter(x, INF)


class _Shared:
    """What the analyses of one call share: the split sides, and how many nodes splitting
    may still evaluate again (a budget: deeply nested guards over one input narrow it in
    quadratically many ways)."""

    def __init__(self, budget: int) -> None:
        self.sides: dict[object, _Pass] = {}
        self.budget = budget
        self.exhausted = False
        #: work counters (tests check that they stay linear in the graph): nodes the side
        #: windows walked, and operations the side analyses evaluated again
        self.explored = 0
        self.evaluated = 0
        #: the side analyses' rule results: (node, ids of the operand ranges) -> (range,
        #: finding, operand ranges)
        self.rules: dict[tuple[object, ...], tuple[Interval, Finding | None,
                                                    tuple[Interval, ...]]] = {}


class _Pass:
    """One analysis of some roots with some nodes' ranges fixed (``env``)."""

    __slots__ = ("decided", "depth", "env", "evaluated", "findings", "frontier", "memo",
                 "parent", "ranges", "sides", "splits", "visited")

    def __init__(self, env: Mapping[Node, Interval], memo: _Shared,
                 parent: _Pass | None = None) -> None:
        self.env = env
        self.memo = memo
        #: the analysis this one narrows (a side of a cp.where): nodes this one does not
        #: evaluate have the parent's range, and the parent's findings
        self.parent = parent
        #: how many splits this analysis is nested in (SPLIT_DEPTH: no deeper)
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.evaluated: set[Node] = set()
        #: nodes exposed() has walked (each once per analysis)
        self.visited: set[Node] = set()
        self.ranges: dict[Node, Interval] = dict(env)
        self.findings: dict[Node, tuple[Finding, tuple[Interval, ...]]] = {}
        #: where nodes -> the analyses of their two sides (when the condition narrows)
        self.sides: dict[Node, list[tuple[_Pass, Node]]] = {}
        #: comparisons the ranges decide
        self.decided: dict[Node, bool] = {}
        #: (condition, truth) -> what the condition narrows in this analysis (its ranges do
        #: not change once computed: a condition shared by many guards is narrowed once)
        self.splits: dict[tuple[Node, bool], _Split | None] = {}
        #: a side analysis without findings, sides or a where: the nodes its exposure walk
        #: would hand to the parent (exposed() hands them on at once)
        self.frontier: list[Node] | None = None

    def run(self, roots: Sequence[Node], order: Sequence[Node] | None = None) -> None:
        """Ranges of everything the roots depend on (``order``: their live nodes, if known).

        The common nodes, + - * of two finite float scalars, take an inline path (the same
        rule, without the calls: the analysis must stay cheap next to compiling, see
        benchmarks/bench_ranges.py); everything else calls its rule."""
        ranges = self.ranges
        findings = self.findings
        rules = RULES
        # a side analysis evaluates again what depends on its narrowed ranges: a node that
        # many sides share (a guard's condition reused) gets the same operands again
        cache = None if self.parent is None else self.memo.rules
        new = tuple.__new__
        pack, unpack = _F32S.pack, _F32S.unpack
        for node in live_nodes(roots, stop=self.env) if order is None else order:
            if node in ranges:
                continue
            args = node.args
            if not args or node.op == "state":
                ranges[node] = _leaf(node)
                continue
            op = node.op
            if op in _FAST and len(args) == 2:
                dtype = node.dtype
                if dtype in _FLOATS and not node.shape:
                    xl, xh, xn = ranges[args[0]]
                    yl, yh, yn = ranges[args[1]]
                    finite = -INF < xl and xh < INF and -INF < yl and yh < INF
                    nan = xn or yn
                    if op == "add":
                        lo, hi = xl + yl, xh + yh
                        if not finite:
                            nan = nan or (xh == INF and yl == -INF) or (xl == -INF and yh == INF)
                    elif op == "sub":
                        lo, hi = xl - yh, xh - yl
                        if not finite:
                            nan = nan or (xh == INF and yh == INF) or (xl == -INF and yl == -INF)
                    elif args[0] is args[1]:  # x * x: a square is never negative
                        m = max(-xl, xh)
                        lo, hi = (0.0 if xl <= 0.0 <= xh else min(xl * xl, xh * xh)), m * m
                    else:
                        p1, p2, p3, p4 = xl * yl, xl * yh, xh * yl, xh * yh
                        lo, hi = min(p1, p2, p3, p4), max(p1, p2, p3, p4)
                        if not finite:
                            nan = (nan or (xl <= 0.0 <= xh and (yl == -INF or yh == INF))
                                   or (yl <= 0.0 <= yh and (xl == -INF or xh == INF)))
                    if lo == lo and hi == hi:  # (a NaN bound: the rule handles it)
                        if dtype is _F32_TYPE:
                            if -F32_MAX <= lo and hi <= F32_MAX:
                                lo, hi = unpack(pack(lo))[0], unpack(pack(hi))[0]
                                ranges[node] = new(Interval, (lo, hi, nan))
                                continue
                            # (an infinite operand: a finite bound may still lie beyond
                            # the float32 range, 3e38 + inf's lower bound 6e38: the rule
                            # rounds it to inf)
                            if not finite and (lo == -INF or -F32_MAX <= lo <= F32_MAX) and (
                                    hi == INF or -F32_MAX <= hi <= F32_MAX):
                                lo = lo if lo == -INF else unpack(pack(lo))[0]
                                hi = hi if hi == INF else unpack(pack(hi))[0]
                                ranges[node] = new(Interval, (lo, hi, nan))
                                continue
                        elif not finite or (-INF < lo and hi < INF):
                            ranges[node] = new(Interval, (lo, hi, nan))
                            continue
            if op == FORI:  # a cp.fori_loop result: not iterated to a fixed point
                ranges[node] = full(node.dtype)
                continue
            ins = tuple([ranges[a] for a in args])
            if op == "where" and ins[0] != TRUE and ins[0] != FALSE and \
                    self.depth < SPLIT_DEPTH:
                result = self._where(node, ins)
                ranges[node] = result
                continue
            if cache is None:
                result, finding = rules[op](ins, node.dtype)
                if node.shape or any(a.shape for a in args):
                    result, finding = _array_rule(node, ins, result, finding)
            else:
                # (the ranges' identities: equal intervals may differ in the sign of a zero;
                # the entry holds them, so no other object takes their id)
                key = (node, *map(id, ins))
                hit = cache.get(key)
                if hit is None:
                    result, finding = rules[op](ins, node.dtype)
                    if node.shape or any(a.shape for a in args):
                        result, finding = _array_rule(node, ins, result, finding)
                    cache[key] = (result, finding, ins)
                else:
                    result, finding = hit[0], hit[1]
            ranges[node] = result
            if finding is not None:
                findings[node] = (finding, ins)
            elif op in _COMPARISONS and (result == TRUE or result == FALSE):
                self.decided[node] = result == TRUE

    def lookup(self, node: Node) -> Interval:
        p: _Pass | None = self
        while p is not None:
            found = p.ranges.get(node)
            if found is not None:
                return found
            p = p.parent
        raise KeyError(node)

    def _chain(self) -> list[dict[Node, Interval]]:
        out: list[dict[Node, Interval]] = []
        p: _Pass | None = self
        while p is not None:
            out.append(p.ranges)
            p = p.parent
        return out

    def _where(self, node: Node, ins: tuple[Interval, ...]) -> Interval:
        cond, a, b = node.args
        splits = self.splits
        sides: list[tuple[_Pass, Node]] = []
        ra, rb = self.ranges[a], self.ranges[b]
        for truth, side in ((True, a), (False, b)):
            try:
                split = splits[cond, truth]
            except KeyError:
                split = splits[cond, truth] = self._split(cond, truth)
            sub = self._side(side, split) if split is not None else None
            if sub is None:
                continue
            sides.append((sub, side))
            if truth:
                ra = sub.ranges[side]
            else:
                rb = sub.ranges[side]
        if sides:
            self.sides[node] = sides
        return hull(ra, rb)

    def _split(self, cond: Node, truth: bool) -> _Split | None:
        """What ``cond`` narrows where it is ``truth`` (None: nothing)."""
        # (a side analysis holds only what it evaluated again: the rest is its parents')
        known: Mapping[Node, Interval] = (self.ranges if self.parent is None
                                          else ChainMap(*self._chain()))
        narrowed = _refine(cond, truth, known)
        if not narrowed:
            return None
        env = {**self.env, **narrowed}
        return _Split(narrowed, env, frozenset(env.items()), min(n.serial for n in narrowed))

    def _side(self, side: Node, split: _Split) -> _Pass | None:
        """``side`` analysed with the ``split``'s narrowed ranges: of the SIDE_NODES nodes of
        its cone nearest the side (created after the first narrowed node), those that depend
        on a narrowed node within them; the others keep this analysis' range and findings
        (sound: what does not depend on a narrowing is what this analysis computed, or
        wider)."""
        # one analysis per side and narrowed environment, whichever analysis asks: a parent
        # whose environment the narrowed one implies gives ranges that hold in it too
        key = (side, split.key)
        memo = self.memo
        sub = memo.sides.get(key)
        if sub is not None:
            return sub
        if memo.budget <= 0:
            memo.exhausted = True
            return None
        narrowed = split.narrowed
        dependent, walked = side_window(side, narrowed, self.env, split.first, SIDE_NODES)
        memo.explored += walked
        if side not in narrowed and (not dependent or dependent[-1] is not side):
            return None
        sub = _Pass(split.env, memo, self)
        ranges = sub.ranges
        moved = set(dependent)
        own = self.ranges
        frontier = []
        simple = True
        for n in dependent:
            if n.op == "where":
                simple = False
            for arg in n.args:
                if arg not in ranges and arg not in moved:
                    found = own.get(arg)
                    ranges[arg] = self.lookup(arg) if found is None else found
                    frontier.append(arg)
        sub.evaluated = moved
        sub.run([side], dependent)
        if simple and not sub.findings and not sub.sides:
            # what exposed() hands to the parent from this side: the operands it did not
            # evaluate (it reaches every node it evaluated: each lies on a path of them
            # from the side, the window's walk)
            sub.frontier = frontier
        memo.sides[key] = sub
        memo.budget -= len(dependent)
        memo.evaluated += len(dependent)
        return sub

    def exposed(self, roots: Iterable[Node]) -> list[tuple[Node, Finding, tuple[Interval, ...]]]:
        """The findings of the nodes the roots depend on other than through a split side
        (one worklist over this analysis and its sides: guard chains nest deeply). This is
        the top analysis (no parent): its nodes take a stack of their own, walked first."""
        if not self.findings and not any(sub.findings for sub in self.memo.sides.values()):
            return []
        found: list[tuple[Node, Finding, tuple[Interval, ...]]] = []
        findings = self.findings
        stack = [r for r in roots if r in self.ranges]
        work: list[tuple[_Pass, Node]] = []
        top: list[Node] = []
        while stack or work:
            expose_top(stack, self.visited, findings, self.sides, self.env, self.ranges, top,
                       work, TRUE, FALSE)
            found.extend((n, *findings[n]) for n in top)
            top.clear()
            self._exposed_side(work, stack, found)
        return found

    def _exposed_side(self, work: list[tuple[_Pass, Node]], stack: list[Node],
                      found: list[tuple[Node, Finding, tuple[Interval, ...]]]) -> None:
        """exposed's walk of the side analyses' nodes on ``work`` (until none is left): the
        nodes they hand to the top analysis go on ``stack``."""
        while work:
            p, node = work.pop()
            visited = p.visited
            if node in visited:  # a node's findings in one analysis are collected once
                continue
            visited.add(node)
            parent = p.parent
            assert parent is not None
            frontier = p.frontier
            if frontier is not None:  # (the side: nothing else of p is on work)
                stack.extend(frontier) if parent is self else work.extend(
                    (parent, a) for a in frontier)
                continue
            if node not in p.evaluated or (node.op == "where" and p.depth >= SPLIT_DEPTH
                                           and p.ranges[node.args[0]] not in (TRUE, FALSE)):
                # evaluated by the parent (a where too deep to split here: split there,
                # with wider ranges)
                if node not in p.env:
                    stack.append(node) if parent is self else work.append((parent, node))
                continue
            hit = p.findings.get(node)
            if hit is not None:
                found.append((node, *hit))
            split = p.sides.get(node)
            if split is None:
                args = node.args
                if node.op == "where":  # decided by the ranges: the other side never counts
                    decided = p.ranges.get(args[0])
                    if decided == TRUE or decided == FALSE:
                        args = (args[0], args[1] if decided == TRUE else args[2])
                evaluated, env = p.evaluated, p.env
                for a in args:
                    if a in evaluated:
                        if a not in visited:
                            work.append((p, a))
                    elif a not in env:  # the parent's: (p, a) would hand it on
                        stack.append(a) if parent is self else work.append((parent, a))
                continue
            work.append((p, node.args[0]))
            split_sides = {side for _, side in split}
            work.extend((p, a) for a in node.args[1:] if a not in split_sides)
            work.extend(split)


class _Split(NamedTuple):
    """What a condition narrows on one side of a cp.where."""

    narrowed: dict[Node, Interval]
    #: the side analysis' environment (the parent's and the narrowed ranges), as a memo key
    env: dict[Node, Interval]
    key: frozenset[tuple[Node, Interval]]
    #: the oldest narrowed node's serial: what is older cannot depend on a narrowed node
    first: int


def _side_window(side: Node, narrowed: Mapping[Node, Interval], env: Mapping[Node, Interval],
                 first: int, limit: int) -> tuple[list[Node], int]:
    """The operations among the ``limit`` operations of ``side``'s cone nearest it (breadth
    first) that depend on a narrowed node, in creation order (none if none of them has a
    narrowed operand), and how many nodes the walk took. Narrowed nodes, leaves, states,
    ``env`` and nodes created before ``first`` end the walk.

    The reference of graph/_walk.c's side_window (:data:`side_window`, what the analysis
    calls: this walk in Python was a third of a guard-dense graph's analysis)."""
    region: list[Node] = []
    seen = {side}
    queue = deque((side,))
    pop, push, add = queue.popleft, queue.append, seen.add
    reached = side in narrowed
    walked = 0
    while queue and len(region) < limit:
        n = pop()
        walked += 1
        if n in narrowed or not n.args or n.op == "state" or n in env or n.serial < first:
            continue
        region.append(n)
        for arg in n.args:
            if arg not in seen:
                add(arg)
                push(arg)
                if arg in narrowed:
                    reached = True
    if not reached:
        return [], walked
    region.sort(key=_serial)
    # the region's nodes that depend on a narrowed node (args come before their users)
    moved: set[Node] = set(narrowed)
    dependent = []
    for n in region:
        for arg in n.args:
            if arg in moved:
                moved.add(n)
                dependent.append(n)
                break
    return dependent, walked


def _expose_top(stack: list[Node], visited: set[Node], findings: Mapping[Node, object],
                sides: Mapping[Node, list[tuple[_Pass, Node]]], env: Mapping[Node, Interval],
                ranges: Mapping[Node, Interval], found: list[Node],
                work: list[tuple[_Pass, Node]], true: Interval, false: Interval) -> None:
    """The exposure walk over the top analysis' nodes from those on ``stack`` (emptied):
    each node once (``visited``), those with findings onto ``found``, the split sides met
    onto ``work`` (their analyses walk them, :meth:`_Pass._exposed_side`).

    The reference of graph/_walk.c's expose_top (:data:`expose_top`, what the analysis
    calls: in Python this walk was a fifth of a guard-dense graph's analysis)."""
    push, pop, visit = stack.append, stack.pop, visited.add
    while stack:
        node = pop()
        if node in visited:
            continue
        visit(node)
        if node in findings:
            found.append(node)
        split = sides.get(node)
        if split is None:
            args = node.args
            if not args or node in env:
                continue
            if node.op == "where":  # decided: the other side never counts
                decided = ranges.get(args[0])
                if decided == true or decided == false:
                    args = (args[0], args[1] if decided == true else args[2])
            for a in args:  # (a leaf has no finding: not pushed)
                if a.args and a not in visited and a in ranges:
                    push(a)
            continue
        push(node.args[0])
        split_sides = {side for _, side in split}
        stack.extend(a for a in node.args[1:] if a not in split_sides)
        work.extend(split)


#: the window walk in C (same result as _side_window, tests/test_ranges_window.py)
side_window: Callable[[Node, dict[Node, Interval], Mapping[Node, Interval], int, int],
                      tuple[list[Node], int]] = _walk.side_window
#: the exposure walk in C (same result as _expose_top)
expose_top: Callable[[list[Node], set[Node], Mapping[Node, object],
                      Mapping[Node, list[tuple[_Pass, Node]]], Mapping[Node, Interval],
                      Mapping[Node, Interval], list[Node], list[tuple[_Pass, Node]],
                      Interval, Interval], None] = _walk.expose_top


def _array_rule(node: Node, ins: tuple[Interval, ...], result: Interval,
                finding: Finding | None) -> tuple[Interval, Finding | None]:
    """Reductions and products of arrays: the sum over the reduced length."""
    rule = node.op
    if rule == "rsum":
        return sum_of(ins[0], node.args[0].size, node.dtype)
    if rule in ("dot", "matvec", "vecmat", "matmul"):
        a = node.args[0]
        n = a.shape[-1] if rule in ("dot", "vecmat") or len(a.shape) == 1 else a.shape[1]
        return sum_of(result, n, node.dtype) if finding is None else (result, finding)
    return result, finding


_serial = attrgetter("serial")


def _states(roots: Sequence[Node]) -> tuple[list[Node], list[Node], list[Node]]:
    """The states the roots depend on (following updates), every root to analyse, and the
    live nodes of those roots."""
    roots = list(roots)
    states: list[Node] = []
    seen: set[Node] = set()
    while True:
        order = live_nodes(roots)
        new = [n for n in order if n.op == "state" and n not in seen]
        if not new:
            return states, roots, order
        for s in new:
            seen.add(s)
            states.append(s)
            roots.append(update_of(s))


def _fixpoint(states: list[Node], env: dict[Node, Interval]) -> tuple[dict[Node, Interval],
                                                                     list[Node]]:
    """State ranges that their updates keep (a post-fixpoint), and the unbounded states."""
    ranges = {s: _initial(s) for s in states}
    updates = [update_of(s) for s in states]

    def step(current: dict[Node, Interval]) -> dict[Node, Interval]:
        p = _Pass({**env, **current}, _Shared(SPLIT_NODES))
        p.run(updates)
        return {s: p.ranges[u] for s, u in zip(states, updates, strict=True)}

    for _ in range(ROUNDS):
        new = step(ranges)
        grown = {s: hull(ranges[s], new[s]) for s in states}
        if grown == ranges:
            return ranges, []
        ranges = grown
    # widen what still moves (to infinity; int32 to its limits), then narrow once from the
    # widened post-fixpoint: hull(init, update(R)) is one too when update(R) lies in R
    new = step(ranges)
    moving = {s for s in states if not _inside(new[s], ranges[s])}
    widened = {s: _widen(s, ranges[s], new[s]) for s in states}
    for _ in range(ROUNDS):
        after = step(widened)
        bad = [s for s in states if not _inside(after[s], widened[s])]
        if not bad:
            final = {s: hull(_initial(s), after[s]) for s in states}
            break
        for s in bad:  # NaN from the infinite bounds, or still moving: every value
            w = widened[s]
            widened[s] = (Interval(w.lo, w.hi, True) if not w.nan and _inside(
                Interval(after[s].lo, after[s].hi), w) else full(s.dtype))
            moving.add(s)
    else:
        final = {s: full(s.dtype) for s in states}
        moving = set(states)
    return final, [s for s in states if s in moving and _unbounded(final[s], s.dtype)]


def _widen(state: Node, old: Interval, new: Interval) -> Interval:
    low, high = (-INF, INF) if state.dtype.is_float else (INT32.lo, INT32.hi)
    lo = low if new.lo < old.lo else old.lo
    hi = high if new.hi > old.hi else old.hi
    return Interval(lo, hi, old.nan or new.nan)


def _unbounded(i: Interval, dtype: DType) -> bool:
    if dtype.is_float:
        return not i.finite
    return not dtype.is_bool and (i.lo <= INT32.lo or i.hi >= INT32.hi)


def _inside(a: Interval, b: Interval) -> bool:
    return b.lo <= a.lo and a.hi <= b.hi and (b.nan or not a.nan)


@without_gc
def undeclared(nodes: Sequence[Node], unbounded: Iterable[Node] = ()) -> bool:
    """Whether the values of ``nodes`` depend on an input without a declared range (or on
    one of the ``unbounded`` states)."""
    states, _, order = _states(nodes)
    if not set(states).isdisjoint(unbounded):
        return True
    for n in order:
        if n.op == "input" and n not in _declared:
            return True
    return False


@without_gc
def analyse(outputs: Sequence[Node], env: Mapping[Node, Interval] | None = None) -> Analysis:
    """Ranges of everything the outputs depend on, and the domain errors they admit."""
    env = dict(env or {})
    states, roots, order = _states(outputs)
    unbounded: list[Node] = []
    if states:
        fixed, unbounded = _fixpoint(states, env)
        env.update(fixed)
    shared = _Shared(max(SPLIT_NODES, 8 * len(order)))
    main = _Pass(env, shared)
    main.run(roots, None if env else order)
    reports = [Report(node, finding, ins, undeclared(node.args, unbounded))
               for node, finding, ins in main.exposed(roots)]
    bodies = _loop_bodies(order, main.ranges, shared)
    reports += [Report(node, finding, ins, True) for node, finding, ins in bodies[1]]
    reports.sort(key=lambda r: r.node.serial)
    unique: dict[tuple[int, str], Report] = {}
    for r in reports:
        unique.setdefault((id(r.node), r.finding.kind), r)
    return Analysis(main.ranges, list(unique.values()), unbounded, main.decided,
                    shared.exhausted, shared.explored, shared.evaluated, bodies[0])


def _loop_bodies(order: Sequence[Node], ranges: Mapping[Node, Interval], shared: _Shared
                 ) -> tuple[int, list[tuple[Node, Finding, tuple[Interval, ...]]]]:
    """The domain errors the bodies of the cp.fori_loop among ``order`` admit, with their
    state at every value of its type, the captures at their ranges and the iteration
    number in 0..n-1 (a body lives beside the graph, graph/loop.py: the main analysis
    gives a loop's results every value of their type and never sees the body)."""
    seen: set[int] = set()
    found: list[tuple[Node, Finding, tuple[Interval, ...]]] = []
    for node in order:
        if node.op != FORI:
            continue
        loop = body_of(node)
        if loop.serial in seen:
            continue
        seen.add(loop.serial)
        env = {c: ranges.get(c, full(c.dtype)) for c in loop.captures}
        env.update((c, full(c.dtype)) for c in loop.carries)
        if loop.index is not None:
            env[loop.index] = Interval(0.0, float(loop.n - 1))
        body = _Pass(env, shared)
        body.run(loop.outputs)
        found += body.exposed(loop.outputs)
    return len(seen), found



__all__ = ["BOOL", "DT", "FALSE", "TRUE", "Analysis", "Interval", "Report", "analyse", "decide",
           "declare", "declared"]
