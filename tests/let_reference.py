"""A reference of LET task programs written from docs/realtime.md and docs/semantics.md alone.

The fuzz test (tests/test_let_fuzz.py) builds random programs twice: as copapy values (through
the compiler and a scheduler) and as the small expression tree below, which this module
evaluates with NumPy float32 and its own tick loop (period ends, feeds, releases by priority,
the processor model with declared costs, trace rows). Nothing here calls copapy's compiler or
scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

F32 = np.float32


@dataclass(eq=False)
class Node:
    """One operation of a generated program: ``kind`` names it, ``owner`` is its task (None
    for an input), ``cp`` the copapy value built for it."""

    kind: str
    args: tuple[Node, ...] = ()
    consts: tuple[Any, ...] = ()
    owner: int | None = None
    shape: tuple[int, ...] = ()
    integer: bool = False
    boolean: bool = False
    cp: Any = None
    #: a state's init as stored (float32 or int32 array of ``shape``)
    init: Any = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"{self.kind}{self.consts or ''}@t{self.owner}({', '.join(map(repr, self.args))})"

    @property
    def stateful(self) -> bool:
        return self.kind in ("delay", "integrate", "rate", "feedback", "counter")


def clamp(y: Any, lo: Any, hi: Any) -> Any:
    """NumPy's clip as docs/semantics.md states cp.clamp: min(max(y, lo), hi), NaN stays."""
    y = np.asarray(y, F32)
    out = np.where(y < lo, F32(lo), y)
    out = np.where(out > hi, F32(hi), out)
    return np.where(np.isnan(y), y, out).astype(F32)


def minimum(a: Any, b: Any) -> Any:
    """cp.min: NaN if either is NaN; of equal operands the second."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    return np.where(np.isnan(a) | np.isnan(b), F32(np.nan), np.where(a < b, a, b)).astype(F32)


def maximum(a: Any, b: Any) -> Any:
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    return np.where(np.isnan(a) | np.isnan(b), F32(np.nan), np.where(a > b, a, b)).astype(F32)


@dataclass
class RefTask:
    """A task as the reference sees it."""

    outputs: list[Node]
    period: int  # ticks
    offset: int  # ticks
    priority: int
    wcet_ns: int
    period_ns: int


@dataclass
class Reference:
    """The simulated machine: data (inputs, shared outputs, private outputs, states), the
    simulated I/O channels, the task states and the trace."""

    tasks: list[RefTask]
    inputs: list[Node]
    #: input node -> channel key it is bound to
    bound_in: dict[int, tuple[int, int]]
    #: output node id -> channel key it drives
    bound_out: dict[int, tuple[int, int]]
    tick_ns: int
    traced: list[Node] = field(default_factory=list)
    io: dict[tuple[int, int], float] = field(default_factory=dict)
    #: feeds: (input node, samples (float32), first tick)
    feeds: list[tuple[Node, Any, int]] = field(default_factory=list)
    callbacks: dict[int, tuple[Node, Callable[[float], float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.owner_of: dict[int, int] = {}
        for k, t in enumerate(self.tasks):
            for o in t.outputs:
                self.owner_of[id(o)] = k
        self.reads: list[list[Node]] = [self._inputs_read(k) for k in range(len(self.tasks))]
        self.reset()

    # ---- structure

    def _inputs_read(self, k: int) -> list[Node]:
        """The inputs task k's chain reads (its closure stops at other tasks' outputs)."""
        seen: set[int] = set()
        found: list[Node] = []
        stack = list(self.tasks[k].outputs)
        while stack:
            n = stack.pop()
            if id(n) in seen or self.owner_of.get(id(n), k) != k:
                continue
            seen.add(id(n))
            if n.kind == "input":
                found.append(n)
            stack.extend(n.args)
        return found

    # ---- state

    def reset(self) -> None:
        """Time 0: every slot back to its initial value, no pending job, no statistics, an
        empty trace (the channels and feeds stay)."""
        self.t = 0
        self.slot: dict[int, Any] = {
            id(n): np.asarray(n.init, np.int32 if n.integer else F32).copy()
            for n in self.inputs}
        self.state: dict[int, Any] = {}
        self.shared: dict[int, Any] = {}
        self.private: dict[int, Any] = {}
        for t in self.tasks:
            for o in t.outputs:
                self.shared[id(o)] = self._initial_output(o)
        self.pending = [False] * len(self.tasks)
        self.published = [False] * len(self.tasks)
        self.remaining = [0] * len(self.tasks)
        self.runs = [0] * len(self.tasks)
        self.skipped = [0] * len(self.tasks)
        self.overruns = [0] * len(self.tasks)
        self.rows: list[tuple[int, list[Any]]] = []
        self._next: dict[int, Any] = {}

    def redeploy(self, keep_state: bool) -> None:
        """LocalTarget.deploy of the same tasks: time 0 and the initial data, except the signal
        states (all of them match by name) and the channels with keep_state; feeds start
        again at tick 0; the trace ends."""
        states, io = self.state, self.io
        self.reset()
        if keep_state:
            self.state, self.io = states, io
        else:
            self.io = {}
        self.feeds = [(node, samples, 0) for node, samples, _ in self.feeds]
        self.traced = []

    @staticmethod
    def _initial_output(o: Node) -> Any:
        """A state output holds its init before its first publication; a plain one zeros."""
        dtype = np.bool_ if o.boolean else np.int32 if o.integer else F32
        if o.kind in ("delay", "integrate", "feedback", "counter"):
            return np.asarray(o.init, dtype).copy()
        return np.zeros(o.shape, dtype)

    def _state_of(self, n: Node) -> Any:
        s = self.state.get(id(n))
        if s is None:
            if n.kind == "delay":
                s = [np.asarray(n.init, F32).copy() for _ in range(n.consts[0])]
            elif n.kind == "rate":
                s = (True, np.zeros(n.shape, F32))
            elif n.kind == "integrate":
                s = (True, np.asarray(n.init, F32).copy(), np.zeros(n.shape, F32))
            else:
                s = np.asarray(n.init, np.int32 if n.integer else F32).copy()
            self.state[id(n)] = s
        return s

    # ---- one run of a task's chain

    def run_chain(self, k: int) -> None:
        memo: dict[int, Any] = {}
        updates: dict[int, Callable[[], None]] = {}
        self._next = {}

        def ev(n: Node) -> Any:
            got = memo.get(id(n))
            if got is not None:
                return got
            owner = self.owner_of.get(id(n))
            if n.kind == "input":
                v = self.slot[id(n)]
            elif owner is not None and owner != k:
                v = self.shared[id(n)]
            else:
                v = self._compute(n, ev, updates)
            memo[id(n)] = v
            return v

        with np.errstate(all="ignore"):  # inf and NaN are values like any other here
            outs = [ev(o) for o in self.tasks[k].outputs]
        # a reachable state's update may reach further states: evaluate to a fixed point
        done: set[int] = set()
        while len(done) < len(updates):
            for key, fn in list(updates.items()):
                if key not in done:
                    done.add(key)
                    with np.errstate(all="ignore"):
                        fn()
        for o, v in zip(self.tasks[k].outputs, outs, strict=True):
            self.private[id(o)] = np.array(v, copy=True)
        self.state.update(self._next)
        self._next = {}

    def _compute(self, n: Node, ev: Callable[[Node], Any],
                 updates: dict[int, Callable[[], None]]) -> Any:
        a = [ev(x) for x in n.args] if n.kind not in ("delay", "rate", "integrate",
                                                      "feedback") else None
        c = n.consts
        period_ns = None
        if n.owner is not None:
            period_ns = self.tasks[n.owner].period_ns
        dt = F32(period_ns * 1e-9) if period_ns else F32(0)
        if n.kind == "lin":
            return (a[0] * F32(c[0]) + a[1]).astype(F32)
        if n.kind == "sub":
            return (a[0] - a[1] * F32(c[0])).astype(F32)
        if n.kind == "mulc":
            return ((a[0] * a[1]) * F32(c[0])).astype(F32)
        if n.kind == "div":
            return (a[0] / (np.abs(a[1]) + F32(c[0]))).astype(F32)
        if n.kind == "min":
            return minimum(a[0] * F32(c[0]), a[1])
        if n.kind == "max":
            return maximum(a[0] * F32(c[0]), a[1])
        if n.kind == "cmp":
            return np.asarray(a[0] > a[1] * F32(c[0]))
        if n.kind == "where":
            return np.where(a[0] > a[1] * F32(c[0]), a[0], a[1]).astype(F32)
        if n.kind == "clamp":
            return clamp(a[0] * F32(c[0]), F32(c[1]), F32(c[2]))
        if n.kind == "index":
            return (np.asarray(a[0][c[0]], F32) * F32(c[1])).astype(F32)
        if n.kind == "sel":
            count = a[0]
            return np.where(count % np.int32(c[0]) == 0, a[1], a[2] * F32(c[1])).astype(F32)
        s = self._state_of(n)
        if n.kind == "counter":
            self._later(n, updates, lambda: (s + np.int32(1)).astype(np.int32))
            return (s + np.int32(1)).astype(np.int32)
        if n.kind == "delay":
            out = s[-1]
            self._later(n, updates, lambda: [np.asarray(ev(n.args[0]), F32), *s[:-1]])
            return out
        if n.kind == "rate":
            x = np.asarray(ev(n.args[0]), F32)
            first, prev = s
            out = np.zeros(n.shape, F32) if first else ((x - prev) / dt).astype(F32)
            self._later(n, updates, lambda: (False, x))
            return np.broadcast_to(out, n.shape).astype(F32)
        if n.kind == "integrate":
            x = np.asarray(ev(n.args[0]), F32)
            first, acc, prev = s
            method, rng = c[0], c[1]
            if method == "euler":
                y = (acc + x * dt).astype(F32)
            else:
                p = x if first else prev
                y = (acc + (x + p) * F32(dt * F32(0.5))).astype(F32)
            if rng is not None:
                y = clamp(y, F32(rng[0]), F32(rng[1]))
            y = np.broadcast_to(y, n.shape).astype(F32)
            self._later(n, updates, lambda: (False, y, x))
            return y
        if n.kind == "feedback":
            x = np.asarray(ev(n.args[0]), F32)
            y = (s * F32(c[0]) + x).astype(F32)
            if c[1] is not None:
                y = clamp(y, F32(c[1][0]), F32(c[1][1]))
            y = np.broadcast_to(y, n.shape).astype(F32)
            self._later(n, updates, lambda: y)
            return y
        raise AssertionError(n.kind)

    def _later(self, n: Node, updates: dict[int, Callable[[], None]],
               fn: Callable[[], Any]) -> None:
        """The state's next value, computed after the outputs (it may read further nodes)."""
        nxt = self._next

        def apply() -> None:
            nxt[id(n)] = fn()

        updates[id(n)] = apply

    # ---- the tick of docs/realtime.md

    def order(self) -> list[int]:
        return sorted(range(len(self.tasks)), key=lambda k: (self.tasks[k].priority, k))

    def due(self, k: int, t: int) -> bool:
        task = self.tasks[k]
        return t >= task.offset and (t - task.offset) % task.period == 0

    def publish(self, k: int) -> None:
        for o in self.tasks[k].outputs:
            self.shared[id(o)] = self.private[id(o)]
            ch = self.bound_out.get(id(o))
            if ch is not None:  # a bool drives 0/1
                self.io[ch] = float(self.shared[id(o)])
        self.pending[k] = False
        self.published[k] = True

    def tick(self) -> None:
        t = self.t
        for _, (node, fn) in self.callbacks.items():
            self.slot[id(node)] = np.asarray(F32(fn(t * self.tick_ns * 1e-9)))
        # 1. period ends, task index order
        for k in range(len(self.tasks)):
            if t > self.tasks[k].offset and self.due(k, t) and self.pending[k]:
                if self.remaining[k] == 0:
                    self.publish(k)
                else:
                    self.overruns[k] += 1
        # 2. feeds
        for node, samples, first in self.feeds:
            i = t - first
            if 0 <= i < len(samples):
                self.slot[id(node)] = np.asarray(samples[i], F32)
        # 3. releases by priority
        for k in self.order():
            if not self.due(k, t):
                continue
            if self.pending[k]:
                self.skipped[k] += 1
                continue
            for n in self.reads[k]:
                ch = self.bound_in.get(id(n))
                if ch is not None:
                    v = self.io.get(ch, 0.0)
                    self.slot[id(n)] = np.asarray(to_i32(v) if n.integer else to_f32(v))
            self.run_chain(k)
            self.runs[k] += 1
            self.pending[k] = True
            self.remaining[k] = self.tasks[k].wcet_ns
        # 4. processor model
        left = self.tick_ns
        for k in self.order():
            if self.pending[k] and self.remaining[k]:
                take = min(self.remaining[k], left)
                self.remaining[k] -= take
                left -= take
        # 5. trace
        if self.traced:
            self.rows.append((t * self.tick_ns, [np.array(self.value(n), copy=True)
                                                 for n in self.traced]))
        self.t = t + 1

    def settle(self) -> None:
        """The end of a step: the periods ending at the new time publish (their tick's first
        phase)."""
        t = self.t
        for k in range(len(self.tasks)):
            if t > self.tasks[k].offset and self.due(k, t) and self.pending[k] \
                    and self.remaining[k] == 0:
                self.publish(k)

    def step(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()
        self.settle()

    def value(self, n: Node) -> Any:
        """What the host sees in n's slot: an input's slot, an output's shared slot."""
        if n.kind == "input":
            return self.slot[id(n)]
        return self.shared[id(n)]

    def computed(self, n: Node) -> bool:
        """docs/semantics.md: a plain output has a value once its task's first period ended
        and its first job published (a first job that overran its period publishes later)."""
        if n.kind in ("input", "delay", "integrate", "feedback", "counter"):
            return True
        k = self.owner_of[id(n)]
        task = self.tasks[k]
        return self.t >= task.offset + task.period and self.published[k]


def to_i32(v: float) -> Any:
    """A channel's double into an int32 slot: toward zero, saturated, NaN 0 (docs/realtime.md
    and cp.cast)."""
    if v != v:
        return np.int32(0)
    return np.int32(max(-2**31, min(2**31 - 1, math.trunc(v)))) if math.isfinite(v) \
        else np.int32(2**31 - 1 if v > 0 else -2**31)


def to_f32(v: float) -> Any:
    """A channel's double into a float32 slot: round to nearest, overflow to infinity."""
    if math.isfinite(v) and abs(v) >= float(np.finfo(F32).max) * (1 + 2.0 ** -25):
        return F32(math.copysign(math.inf, v))
    return F32(v)
