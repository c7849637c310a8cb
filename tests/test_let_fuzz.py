"""Differential fuzz of the simulation layer: random LET programs (1-5 tasks, signal operators
inside and across tasks, scalar and vector states, simulated I/O, declared costs) and random
drives (steps of every length, writes, channel values, feeds, callbacks, resets, traces) on
LocalTarget, compared bit for bit with the reference simulator of tests/let_reference.py,
written from docs/realtime.md and docs/semantics.md and evaluated with NumPy float32."""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.keep_state import StateNotCarried
from copapy.serial_target import SerialTarget

from .let_reference import F32, Node, Reference, RefTask
from .support.runners import host_runner

#: LET_FUZZ_TICK_NS=n: another tick (every period and offset is a multiple of it)
TICK_NS = int(os.environ.get("LET_FUZZ_TICK_NS", "1000000"))
TICK = TICK_NS * 1e-9
VECTOR = (3,)
#: step lengths: single ticks, odd fractions of a hyperperiod, long runs (the C loop's plan)
STEPS = [0, 1, 1, 2, 3, 5, 7, 11, 60, 257, 700, 2521]
#: a state whose update is another state of its task (delay(x, 2), delay/rate/trapezoid of a
#: delay; compiler/inplace.py had read a state slot that an earlier end copy overwrote:
#: test_a_delay_of_two_runs_inside_an_expression); LET_FUZZ_STATE_CHAINS=0 leaves them out
STATE_CHAINS = os.environ.get("LET_FUZZ_STATE_CHAINS", "1") == "1"
DELAY_RUNS = (1, 2) if STATE_CHAINS else (1,)

#: architectures this host runs on an emulator (unicorn), with the Python scheduler
EMULATED = ["aarch64", "armv6", "cortex-m4", "rv32"]
EMULATED_STEPS = [1, 2, 3, 5, 7, 11, 60]

INPUT_KINDS = [cp.io.ADC, cp.io.Encoder]
OUTPUT_KINDS = [cp.io.PWM, cp.io.DAC]


@dataclass
class Program:
    """A generated program: the reference's view and the copapy tasks."""

    inputs: list[Node]
    tasks: list[RefTask]
    cp_tasks: list[cp.Task]
    bound_in: dict[int, Any] = field(default_factory=dict)
    bound_out: dict[int, Any] = field(default_factory=dict)

    def outputs(self) -> list[Node]:
        return [o for t in self.tasks for o in t.outputs]

    def describe(self) -> str:
        """The program in a few lines (for a failure's message)."""
        bound = [(i, self.bound_in[id(n)]) for i, n in enumerate(self.inputs)
                 if id(n) in self.bound_in]
        lines = [f"inputs {[n.init.tolist() for n in self.inputs]}, bound in {bound}"]
        for k, t in enumerate(self.tasks):
            lines.append(f"task {k}: period {t.period} offset {t.offset} priority {t.priority} "
                         f"wcet {t.wcet_ns}: {t.outputs}")
        return "\n".join(lines)

    def observed(self, ref: Reference) -> list[Node]:
        """The inputs the program reads (the others are not part of it) and the outputs."""
        used = {id(n) for reads in ref.reads for n in reads}
        return [n for n in self.inputs if id(n) in used] + self.outputs()


class Gen:
    """Draws a program from hypothesis data; every operation carries a constant of its own
    (so no two operations are one node by structural CSE)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.serial = 0
        #: may draw declared costs (overload) and simulated I/O bindings
        self.overload, self.io = True, True

    def draw(self, strategy: Any) -> Any:
        return self.data.draw(strategy)

    def const(self, lo: float = 0.3, hi: float = 0.95, signed: bool = True) -> float:
        """A float32 constant of its own, never a power of two (no exact rewrite applies)."""
        self.serial += 1
        v = lo + (hi - lo) * ((self.serial * 0.6180339887) % 1.0)
        v = float(F32(v))
        if math.frexp(v)[0] == 0.5:
            v = float(F32(v * 1.0123))
        if signed and self.draw(st.booleans()):
            v = -v
        return v

    def init(self, shape: tuple[int, ...]) -> Any:
        vals = self.draw(st.lists(st.sampled_from([0.0, 0.25, -1.5, 3.0, 0.1, -0.7]),
                                  min_size=max(1, math.prod(shape)),
                                  max_size=max(1, math.prod(shape))))
        return np.asarray(vals, F32).reshape(shape)

    # ---- the program

    def program(self) -> Program:
        n_inputs = self.draw(st.integers(1, 3))
        inputs = []
        for i in range(n_inputs):
            init = F32(self.draw(st.sampled_from([0.0, 1.0, -2.5, 0.3])))
            node = Node("input", (), (i,), init=np.asarray(init, F32))
            node.cp = cp.value(float(init), name=f"in{i}")
            inputs.append(node)
        if self.draw(st.integers(0, 2)) == 0:  # an int32 input (counts)
            first = self.draw(st.sampled_from([0, 3, -7]))
            node = Node("input", (), (len(inputs),), integer=True,
                        init=np.asarray(first, np.int32))
            node.cp = cp.value(first, name=f"in{len(inputs)}")
            inputs.append(node)
        if self.draw(st.integers(0, 2)) == 0:  # a packed vector input
            init = self.init(VECTOR)
            node = Node("input", (), (len(inputs),), shape=VECTOR, init=init)
            node.cp = cp.value(init.copy(), name=f"in{len(inputs)}")
            inputs.append(node)
        n_tasks = self.draw(st.integers(1, 5))
        tasks: list[RefTask] = []
        cp_tasks: list[cp.Task] = []
        overload = self.overload and self.draw(st.integers(0, 3)) == 0
        for k in range(n_tasks):
            outs = self.task_nodes(k, inputs, tasks)
            period = self.draw(st.sampled_from([1, 1, 2, 3, 4, 5, 6, 7, 9, 10]))
            offset = self.draw(st.integers(0, period - 1))
            priority = self.draw(st.integers(0, 3))
            wcet_ns = 0
            if overload:
                ticks = self.draw(st.sampled_from([0, 0.3, 1.0, 1.5, 2.5, period * 1.5]))
                wcet_ns = round(ticks * TICK_NS)
            tasks.append(RefTask(outs, period, offset, priority, wcet_ns, period * TICK_NS))
            cp_tasks.append(cp.Task(*[o.cp for o in outs], period=period * TICK,
                                    offset=offset * TICK, priority=priority,
                                    wcet=wcet_ns * 1e-9 if wcet_ns else None,
                                    name=f"t{k}"))
        prog = Program(inputs, tasks, cp_tasks)
        if not self.io:
            return prog
        channels = iter(range(24))  # one number per binding (at most 4 inputs, 15 outputs)
        read = {id(n) for reads in Reference(tasks, inputs, {}, {}, TICK_NS).reads for n in reads}
        for node in inputs:
            if id(node) in read and not node.shape and self.draw(st.integers(0, 2)) == 0:
                prog.bound_in[id(node)] = self.draw(st.sampled_from(INPUT_KINDS))(next(channels))
        for o in prog.outputs():
            if not o.shape and self.draw(st.integers(0, 3)) == 0:
                if o.boolean:
                    prog.bound_out[id(o)] = cp.io.GPIO(next(channels), "out")
                else:
                    prog.bound_out[id(o)] = self.draw(st.sampled_from(OUTPUT_KINDS))(
                        next(channels), safe=0.0)
        return prog

    def task_nodes(self, k: int, inputs: list[Node], tasks: list[RefTask]) -> list[Node]:
        """1-4 operations of task k over the inputs, the earlier tasks' outputs and its own;
        returns its 1-3 outputs."""
        others = [o for t in tasks for o in t.outputs]
        own: list[Node] = []
        for _ in range(self.draw(st.integers(1, 4))):
            own.append(self.operation(k, inputs + others + own))
        n_out = self.draw(st.integers(1, min(3, len(own))))
        picked = self.draw(st.lists(st.sampled_from(range(len(own))), min_size=n_out,
                                    max_size=n_out, unique=True))
        return [own[i] for i in sorted(picked)]

    def operation(self, k: int, pool: list[Node]) -> Node:
        scalars = [n for n in pool if not n.shape and not n.integer and not n.boolean]
        vectors = [n for n in pool if n.shape]
        counters = [n for n in pool if n.integer]
        kinds = ["lin", "sub", "mulc", "div", "min", "max", "where", "clamp", "delay",
                 "integrate", "rate", "feedback", "counter", "vfeedback", "cmp"]
        if counters:
            kinds.append("sel")
        if vectors:
            kinds += ["index", "vlin"]
        kind = self.draw(st.sampled_from(kinds))
        pick = lambda xs: self.draw(st.sampled_from(xs))  # noqa: E731
        if kind in ("lin", "sub", "mulc"):
            a, b = pick(scalars), pick(scalars)
            c = self.const()
            if kind == "lin":
                value = a.cp * c + b.cp
            elif kind == "sub":
                value = a.cp - b.cp * c
            else:
                value = (a.cp * b.cp) * c
            return Node(kind, (a, b), (c,), k, cp=value)
        if kind == "vlin":  # a vector with a vector or scalar operand
            a, b = pick(vectors), pick(scalars + vectors)
            c = self.const()
            if self.draw(st.booleans()):
                return Node("lin", (a, b), (c,), k, VECTOR, cp=a.cp * c + b.cp)
            return Node("sub", (b, a), (c,), k, VECTOR, cp=b.cp - a.cp * c)
        if kind == "div":
            a, b = pick(scalars), pick(scalars)
            c = self.const(0.5, 2.0, signed=False)
            return Node(kind, (a, b), (c,), k, cp=a.cp / (abs(b.cp) + c))
        if kind in ("min", "max"):
            a, b = pick(scalars), pick(scalars)
            c = self.const()
            fn = cp.min if kind == "min" else cp.max
            return Node(kind, (a, b), (c,), k, cp=fn(a.cp * c, b.cp))
        if kind == "cmp":  # a bool output
            a, b = pick(scalars), pick(scalars)
            c = self.const()
            return Node(kind, (a, b), (c,), k, boolean=True, cp=a.cp > b.cp * c)
        if kind == "where" and len(scalars) > 1:  # where(c, a, a) is a: maybe an input
            a, b = self.draw(st.lists(st.sampled_from(scalars), min_size=2, max_size=2,
                                      unique_by=id))
            c = self.const()
            return Node(kind, (a, b), (c,), k, cp=cp.where(a.cp > b.cp * c, a.cp, b.cp))
        if kind in ("clamp", "where"):
            a = pick(scalars)
            c = self.const()
            lo, hi = sorted((self.const(0.1, 2.0), self.const(0.1, 2.0)))
            return Node("clamp", (a,), (c, lo, hi), k, cp=cp.clamp(a.cp * c, lo, hi))
        if kind == "index":
            v = pick(vectors)
            i = self.draw(st.integers(0, VECTOR[0] - 1))
            c = self.const()
            return Node(kind, (v,), (i, c), k, cp=v.cp[i] * c)
        if kind == "sel":
            n, a, b = pick(counters), pick(scalars), pick(scalars)
            m = self.draw(st.integers(2, 4))
            c = self.const()
            return Node(kind, (n, a, b), (m, c), k,
                        cp=cp.where(n.cp % m == 0, a.cp, b.cp * c))
        if kind == "counter":
            return Node(kind, (), (), k, integer=True, init=np.asarray(0, np.int32),
                        cp=cp.feedback(lambda n: n + 1, init=0))
        shape = VECTOR if (kind == "vfeedback" or (vectors and self.draw(st.booleans()))) \
            else ()
        operands = vectors if shape and vectors and kind != "vfeedback" else scalars
        if kind in ("delay", "rate", "integrate") and not STATE_CHAINS:
            operands = [n for n in operands if not (n.kind == "delay" and n.owner == k)] \
                or [n for n in pool if n.kind == "input"]
            shape = operands[0].shape
        x = pick(operands)
        if kind == "delay":
            n = self.draw(st.sampled_from(DELAY_RUNS))
            init = self.init(shape)
            return Node(kind, (x,), (n,), k, shape, init=init,
                        cp=cp.delay(x.cp, n, init=_init_arg(init)))
        if kind == "rate":
            return Node(kind, (x,), (), k, shape, cp=cp.rate(x.cp))
        if kind == "integrate":
            method = self.draw(st.sampled_from(["euler", "trapezoid"]))
            rng = self.draw(st.sampled_from([None, (-1.5, 2.25)]))
            init = self.init(shape)
            return Node(kind, (x,), (method, rng), k, shape, init=init,
                        cp=cp.integrate(x.cp, init=_init_arg(init), method=method, range=rng))
        # feedback: y = prev * c + x (c in (-0.95, 0.95): bounded), optionally saturated
        c = self.const(0.2, 0.95)
        rng = self.draw(st.sampled_from([None, (-0.75, 3.5)]))
        init = self.init(shape)
        packed = self.draw(st.sampled_from([None, True])) if shape else None
        xcp = x.cp
        value = cp.feedback(lambda p: p * c + xcp, init=_init_arg(init, shape), range=rng,
                            packed=packed)
        return Node("feedback", (x,), (c, rng), k, shape, init=init, cp=value)


def _init_arg(init: Any, shape: tuple[int, ...] | None = None) -> Any:
    """A scalar init as a Python float, an array's as the array."""
    arr = np.asarray(init)
    return float(arr) if arr.ndim == 0 else arr


# ---- comparison ------------------------------------------------------------------------------

def same(got: Any, want: Any) -> bool:
    """Bit for bit (float32 or int32), any NaN equal to any NaN."""
    g, w = np.asarray(got), np.asarray(want)
    if w.dtype == np.bool_:
        return g.shape == w.shape and bool(np.array_equal(g.astype(bool), w))
    if w.dtype == np.int32:
        return g.shape == w.shape and bool(np.array_equal(g.astype(np.int64), w))
    g = g.astype(F32)
    if g.shape != w.shape:
        return False
    nan = np.isnan(g) & np.isnan(w)
    return bool(np.all(nan | (g.view(np.uint32) == w.astype(F32).view(np.uint32))))


def observe(tg: Any, prog: Program, ref: Reference, what: str) -> None:
    """Everything the host can read, against the reference."""
    assert round(tg.time / TICK) == ref.t, what
    for node in prog.observed(ref):
        want = ref.value(node)
        if not ref.computed(node):
            try:
                got = tg.read(node.cp)
            except cp.NotComputedError:
                continue
            raise AssertionError(f"{what}: {node!r} read {got!r} before its first period "
                                 f"ended (t = {ref.t} ticks, runs {ref.runs})")
        got = tg.read(node.cp)
        assert same(got, want), f"{what}: {node.kind} of task {node.owner}: {got!r} != {want!r}"
    for _key, ch in prog.bound_out.items():
        want = ref.io.get((int(ch.kind), ch.channel), 0.0)
        got = tg.io_value(ch)
        assert got == want or (got != got and want != want), f"{what}: {ch}: {got} != {want}"
    stats = [(s.runs, s.skipped, s.overruns) for s in tg.stats()]
    assert stats == list(zip(ref.runs, ref.skipped, ref.overruns, strict=True)), what


def check_trace(trace: Any, ref: Any, capacity: int, what: str) -> None:
    """The trace's rows == the reference's (``ref``: its ``rows`` and ``traced``)."""
    rows = ref.rows[-capacity:]
    times = trace.time
    assert len(times) == len(rows), f"{what}: {len(times)} trace rows, reference {len(rows)}"
    assert [round(t * 1e9) for t in times] == [t for t, _ in rows], what
    for j, node in enumerate(ref.traced):
        col = trace[node.cp]
        want = np.array([r[1][j] for r in rows]).reshape((len(rows), *node.shape)) if rows \
            else np.zeros((0, *node.shape))
        kind = np.bool_ if node.boolean else np.int32 if node.integer else F32
        assert same(col, want.astype(kind)), \
            f"{what}: trace of {node.kind} (task {node.owner})"


# ---- the drive -------------------------------------------------------------------------------

def drive(data: st.DataObject, prog: Program, tg: Any, max_ticks: int,
          steps: list[int] = STEPS) -> None:
    ref = Reference(prog.tasks, prog.inputs,
                    {k: (int(ch.kind), ch.channel) for k, ch in prog.bound_in.items()},
                    {k: (int(ch.kind), ch.channel) for k, ch in prog.bound_out.items()},
                    TICK_NS)
    for ch in prog.bound_in.values():
        ref.io[(int(ch.kind), ch.channel)] = 0.0
    trace = None
    capacity = 0
    frozen: tuple[Any, Any, int] | None = None
    fed: set[int] = set()
    ticks = 0
    history: list[str] = []
    observe(tg, prog, ref, "after deploy\n" + prog.describe())
    for op_index in range(data.draw(st.integers(2, 14))):
        free = [n for n in prog.inputs if id(n) not in prog.bound_in and id(n) not in fed]
        ops = ["step"] * 5 + ["write", "write", "set_io", "set_io", "trace", "reset", "feed",
                              "callback", "redeploy"]
        op = data.draw(st.sampled_from(ops))
        what = f"op {op_index} {op}"
        history.append(what)
        if op == "step":
            n = data.draw(st.sampled_from(steps))
            n = min(n, max(0, max_ticks - ticks)) if ref.callbacks else n
            tg.step(n * TICK)
            ref.step(n)
            ticks += n
            history[-1] += f" {n}"
        elif op == "write" and free:
            node = data.draw(st.sampled_from(free))
            numbers = st.sampled_from([0.0, 0.5, -1.25, 2.0, 1e-3, 7.5])
            if node.integer:
                x = data.draw(st.sampled_from([0, 1, 4, -3, 2**31 - 1]))
            elif node.shape:
                x: Any = np.array(data.draw(st.lists(numbers, min_size=3, max_size=3)), F32)
            else:
                x = data.draw(numbers)
            tg.write(node.cp, x)
            history[-1] += f" in{prog.inputs.index(node)}={x}"
            ref.slot[id(node)] = np.asarray(x, np.int32 if node.integer else F32).copy()
        elif op == "set_io" and prog.bound_in:
            key = data.draw(st.sampled_from(list(prog.bound_in)))
            ch = prog.bound_in[key]
            x = data.draw(st.sampled_from([0.0, 0.5, -1.25, 3.0, 0.1, 7.9, -2.5e9, 1e39]))
            tg.set_io(ch, x)
            ref.io[(int(ch.kind), ch.channel)] = x
        elif op == "trace":
            frozen = freeze(trace, ref, capacity)
            # a vector input of which the program reads some elements cannot be traced
            # (a TargetError naming an element: a question in the decision file)
            traceable = [n for n in prog.observed(ref) if n.kind != "input" or not n.shape]
            nodes = data.draw(st.lists(st.sampled_from(traceable),
                                       min_size=1, max_size=4, unique_by=id))
            capacity = data.draw(st.sampled_from([5, 100_000]))
            trace = tg.trace(*[n.cp for n in nodes], capacity=capacity)
            ref.traced = nodes
            ref.rows = []
        elif op == "reset":
            tg.reset()
            ref.reset()
        elif op == "redeploy":
            keep = data.draw(st.booleans())
            history[-1] += f" keep_state={keep}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StateNotCarried)
                frozen = freeze(trace, ref, capacity)
            tg.deploy(*prog.cp_tasks, keep_state=keep)
            ref.redeploy(keep)
            trace = None
        elif op == "feed" and any(not n.shape for n in free):
            # a vector input's elements the program does not read keep their value under a
            # feed, where a write keeps what it wrote (a question in the decision file)
            node = data.draw(st.sampled_from([n for n in free if not n.shape]))
            count = data.draw(st.integers(1, 40))
            samples = (np.sin(np.arange(count * max(1, node.size)) * 0.7 + len(fed)) * 2.0
                       ).astype(F32).reshape(count, *node.shape)
            if node.integer:
                samples = (samples * 10).astype(np.int32)
            tg.drive(node.cp, samples)
            ref.feeds.append((node, samples, ref.t))
            fed.add(id(node))
        elif op == "callback" and max_ticks and any(not n.shape and not n.integer
                                                    for n in free):
            node = data.draw(st.sampled_from([n for n in free
                                              if not n.shape and not n.integer]))
            scale = 1.0 + len(fed)

            def fn(t: float, scale: float = scale) -> float:
                return math.sin(t * 37.0) * scale

            tg.drive(node.cp, fn)
            ref.callbacks[id(node)] = (node, fn)
            fed.add(id(node))
        else:
            continue
        what = f"{' / '.join(history)}\n{prog.describe()}"
        observe(tg, prog, ref, what)
        if trace is not None:
            check_trace(trace, ref, capacity, what)
        if frozen is not None:  # a trace another one replaced keeps the rows it had
            check_trace(frozen[0], frozen[1], frozen[2], what + " (the replaced trace)")


def freeze(trace: Any, ref: Reference, capacity: int) -> tuple[Any, Any, int] | None:
    """(the trace, the reference rows it holds, its capacity) before it is replaced."""
    if trace is None:
        return None
    return trace, SimpleNamespace(rows=list(ref.rows), traced=list(ref.traced)), capacity


def deployed(prog: Program, arch: str | None = None, measure: bool = False) -> Any:
    """The program on a LocalTarget (measure=True: every job timed, no hyperperiod plan)."""
    tg = cp.LocalTarget(arch=arch, tick=TICK, measure=measure)
    for key, ch in prog.bound_in.items():
        tg.bind(next(n for n in prog.inputs if id(n) == key).cp, ch)
    for key, ch in prog.bound_out.items():
        tg.bind(next(n for n in prog.outputs() if id(n) == key).cp, ch)
    tg.deploy(*prog.cp_tasks)
    return tg


#: LET_FUZZ_EXAMPLES=n: a longer hunt, without shrinking
HUNT = int(os.environ.get("LET_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=HUNT or 150, deadline=None, report_multiple_bugs=False,
                print_blob=True,
                phases=[Phase.generate] if HUNT else list(Phase),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(st.data())
def test_local_target_equals_the_reference(data: st.DataObject) -> None:
    """LocalTarget (native, the C loop) == the reference at every observation point."""
    prog = Gen(data).program()
    drive(data, prog, deployed(prog, measure=data.draw(st.booleans())), max_ticks=400)


# ---- regressions the fuzz found ----------------------------------------------------------------

@pytest.mark.parametrize("packed", [False, True])
def test_an_array_output_is_not_computed_again_after_a_reset(packed: bool) -> None:
    """After tg.reset() an array output has no value until its task's first period ends
    again (docs/semantics.md): the read plan made when it had one read the zeroed slot."""
    x = cp.value(1.0)
    base = cp.vector(np.array([1.0, 2.0, 3.0], F32)) if packed else cp.vector([x, x, x])
    v = base * x * 0.7
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(cp.Task(v, period=2 * TICK))
    with pytest.raises(cp.NotComputedError):
        tg.read(v)
    tg.step(4 * TICK)
    assert tg.read(v).tolist() == (np.array([1.0, 2.0, 3.0] if packed else [1.0] * 3, F32)
                                   * F32(0.7)).tolist()
    tg.reset()
    with pytest.raises(cp.NotComputedError):
        tg.read(v)
    tg.step(2 * TICK)
    assert tg.read(v).tolist() == (np.array([1.0, 2.0, 3.0] if packed else [1.0] * 3, F32)
                                   * F32(0.7)).tolist()


@pytest.mark.parametrize(("packed", "returns"), [(None, True), (None, False), (True, False),
                                               (False, True)])
def test_a_feedback_of_the_other_packing_reads_its_init(packed: bool | None,
                                                        returns: bool) -> None:
    """An f that returns the other packing than the state's (an unpacked state plus a packed
    vector, a packed state with f returning cp.vector): the signal is still the states'
    update, so it reads its init before the first run, on the host and in another task. It
    was returned as f gave it, another node: a plain output that raised NotComputedError and
    read zeros in the other task. Unasked (packed=None) the state takes f's packing (as it
    takes a wider type); asked, the signal has the packing asked for."""
    init = np.array([-1.5, 0.1, 0.25], F32)
    x = cp.value(1.0)
    other = cp.feedback(lambda p: p * 0.5 + x, init=np.zeros(3, F32), packed=True)

    def f(p: Any) -> Any:
        y = p * 0.75 + other
        return y.to_packed() if returns else y.to_unpacked()

    v = cp.feedback(f, init=init, packed=packed)
    assert v.packed == (returns if packed is None else packed)
    seen = v * 2.0  # a consumer: what it reads at its release at t = 0 is v's init
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(cp.Task(other, period=TICK), cp.Task(v, period=2 * TICK),
              cp.Task(seen, period=TICK, priority=1))
    assert tg.read(v).tolist() == init.tolist()
    tg.step(TICK)
    assert tg.read(seen).tolist() == (init * F32(2.0)).tolist()
    tg.step(TICK)
    want = init * F32(0.75) + np.zeros(3, F32)  # other's init: v's first run read it at t = 0
    assert tg.read(v).tolist() == want.astype(F32).tolist()


def test_feedbacks_of_mixed_packing_across_three_tasks() -> None:
    """A packed feedback of an unpacked one of a packed one, each in its task: each reads the
    one before through its LET port, which holds its init until the first publication (the
    third read zeros; returned unpacked, the second's elements made the compiler fail)."""
    x = cp.value(-2.5)
    v1 = cp.feedback(lambda p: p * 0.84 + x, init=np.zeros(3, F32), packed=True,
                     range=(-0.75, 3.5))
    v2 = cp.feedback(lambda p: p * -0.27 + v1, init=np.ones(3, F32))
    v3 = cp.feedback(lambda p: p * -0.73 + v2, init=np.ones(3, F32), packed=True,
                     range=(-0.75, 3.5))
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(cp.Task(v1, period=TICK), cp.Task(v2, period=TICK), cp.Task(v3, period=2 * TICK))
    tg.step(3 * TICK)
    # v3's run at t = 0 read v2's init 1.0: 1.0 * -0.73 + 1.0
    assert tg.read(v3).tolist() == [float(F32(1.0) * F32(-0.73) + F32(1.0))] * 3


def test_a_delay_of_two_runs_inside_an_expression() -> None:
    """delay(x, 2) used by an expression gives x from two runs ago, as delay(x, 2) alone
    does (it gave x from one run ago: the delay of one run)."""
    x = cp.value(0.0)
    d = cp.delay(x * 0.7 + 1.0, 2, init=-1.0)
    y = d * 1.5
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(cp.Task(y, period=TICK))
    tg.drive(x, np.arange(8, dtype=F32))
    trace = tg.trace(y)
    tg.step(6 * TICK)
    xs = np.arange(8, dtype=F32) * F32(0.7) + F32(1.0)
    want = [0.0, -1.5, -1.5, *(xs[:3] * F32(1.5)).tolist()]
    assert trace[y].tolist() == want


@FUZZ
@given(st.data())
def test_emulated_cpu_equals_the_reference(data: st.DataObject) -> None:
    """The Python scheduler (runtime/pysched.py) driving an emulated CPU == the reference."""
    prog = Gen(data).program()
    arch = data.draw(st.sampled_from(EMULATED))
    drive(data, prog, deployed(prog, arch), max_ticks=120, steps=EMULATED_STEPS)


def test_an_online_change_keeps_the_simulated_channels() -> None:
    """deploy(keep_state=True) between two steps is an online change: the simulated input
    channel still reads what set_io gave it and a driven output keeps its value until the new
    program publishes, as a runner's channels do (docs/realtime.md, "Atomic replace"). The
    new scheduler started with every channel at 0: the loop read 0 and the PWM dropped."""
    a = cp.value(0.0)
    y = cp.feedback(lambda p: p * 0.5 + a, init=0.0, name="y")
    tg = cp.LocalTarget(tick=TICK)
    tg.bind(a, cp.io.ADC(0))
    tg.bind(y, cp.io.PWM(1))
    tg.deploy(cp.Task(y, period=TICK))
    tg.set_io(cp.io.ADC(0), 2.0)
    tg.step(3 * TICK)
    assert tg.io_value(cp.io.PWM(1)) == 3.5  # 0 -> 2 -> 3 -> 3.5
    kept = tg.deploy(cp.Task(y, period=TICK), keep_state=True)
    assert kept is not None and kept.carried == ("y@task0",)
    assert tg.io_value(cp.io.ADC(0)) == 2.0
    assert tg.io_value(cp.io.PWM(1)) == 3.5
    tg.step(TICK)
    assert tg.io_value(cp.io.PWM(1)) == 3.75 == tg.read(y)


def test_the_elements_of_a_packed_signal_in_a_packed_operation_of_another_task() -> None:
    """Task 0 publishes the elements of a packed feedback; task 1 adds them to its packed
    state: it reads them through their LET ports (it was an AssertionError at deploy:
    'add#.. is neither in a register nor in memory', the lowering looked for the packed
    value behind the elements, which only task 0 holds)."""
    x = cp.value(-2.5)
    v2 = cp.feedback(lambda p: p * -0.27 + x, init=np.ones(3, F32), packed=True).to_unpacked()
    v3 = cp.feedback(lambda p: p * -0.73 + v2, init=np.ones(3, F32), packed=True)
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(cp.Task(v2, period=TICK), cp.Task(v3, period=2 * TICK))
    tg.step(3 * TICK)
    assert tg.read(v3).tolist() == [float(F32(1.0) * F32(-0.73) + F32(1.0))] * 3


def test_a_reset_sets_back_the_inputs_the_program_does_not_read() -> None:
    """tg.reset() returns every input to its initial value (LocalTarget.reset), also those
    the program does not read, whose writes LocalTarget keeps itself: an unused input and
    the unread elements of a vector input kept what was written before the reset."""
    x, unused = cp.value(1.0), cp.value(2.0)
    v = cp.value(np.array([1.0, 2.0, 3.0], F32))
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(cp.Task(x * 0.7 + v[1], period=TICK))
    tg.write(unused, 5.0)
    tg.write(x, 4.0)
    tg.write(v, np.array([7.0, 8.0, 9.0], F32))
    assert (tg.read(x), tg.read(unused), tg.read(v).tolist()) == (4.0, 5.0, [7.0, 8.0, 9.0])
    tg.reset()
    assert (tg.read(x), tg.read(unused), tg.read(v).tolist()) == (1.0, 2.0, [1.0, 2.0, 3.0])


@settings(max_examples=4, deadline=None, database=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_the_host_runner_equals_the_reference(data: st.DataObject) -> None:
    """The same programs on the host runner (real time, through SerialTarget over a pty):
    after a run of however many ticks it made, every output and the statistics equal the
    reference stepped that many ticks (LET: the timing does not change a value). No declared
    costs (a real-time runner measures them), no simulated I/O."""
    gen = Gen(data)
    gen.overload, gen.io = False, False
    prog = gen.program()
    ref = Reference(prog.tasks, prog.inputs, {}, {}, TICK_NS)
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=2.0) as tg:
        tg.deploy(*prog.cp_tasks)
        # a job preempted beyond its period on a loaded host overruns (the runner measures
        # it): that run says nothing about values, so it is run again, at most 3 times
        for _ in range(3):
            tg.reset()
            for node in prog.observed(ref):
                if node.kind == "input" and not node.shape:  # (a vector's unread elements
                    x = np.asarray(node.init, F32) * F32(-1.5) + F32(0.25)  # have no slot)
                    if node.integer:
                        x = np.asarray(node.init * 3 + 1, np.int32)
                    tg.write(node.cp, x.item())
                    ref.slot[id(node)] = x
            tg.start()
            time.sleep(0.2)
            tg.stop()
            stats = [(s.runs, s.skipped, s.overruns) for s in tg.stats()]
            if not any(skipped or overruns for _, skipped, overruns in stats):
                break
        # the runner's tick is the largest that divides every period and offset
        ticks = tg.runner_stats().ticks * (tg.tick_ns // TICK_NS)
        seen = [n for n in prog.observed(ref) if n.kind != "input" or not n.shape]
        got = {id(n): tg.read(n.cp) for n in seen}
    assert ticks > 5
    ref.step(ticks)
    what = f"{ticks} ticks\n{prog.describe()}"
    assert stats == list(zip(ref.runs, ref.skipped, ref.overruns, strict=True)), what
    for node in seen:
        assert same(got[id(node)], ref.value(node)), f"{what}: {node!r}"


@settings(max_examples=HUNT or 40, deadline=None, report_multiple_bugs=False,
          phases=[Phase.generate] if HUNT else list(Phase),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_sweep_equals_the_reference(data: st.DataObject) -> None:
    """cp.sweep's batched C engine (runner/python/batch.c; the scenarios as lanes of one
    program, and one at a time) records, scenario by scenario and row by row, what the
    reference shows after each tick. No simulated I/O (a sweep's channels are its own)."""
    gen = Gen(data)
    gen.io = False
    prog = gen.program()
    ref = Reference(prog.tasks, prog.inputs, {}, {}, TICK_NS)
    swept = [n for n in prog.observed(ref)
             if n.kind == "input" and not n.shape and not n.integer]
    scenarios = data.draw(st.integers(1, 3))
    values = {f"in{n.consts[0]}": [float(F32(0.5 * k - 1.25 + n.consts[0]))
                                   for k in range(scenarios)] for n in swept}
    ticks = data.draw(st.sampled_from([1, 2, 7, 60, 301]))
    outputs = [o for o in prog.outputs() if not o.shape]  # record takes values
    lanes = data.draw(st.booleans())
    assume(values and outputs)  # a sweep has parameters; record has values
    result = cp.sweep(prog.cp_tasks, values, ticks * TICK, record=[o.cp for o in outputs],
                      tick=TICK, progress=False, on_fault="raise", lanes=lanes)
    times = [round(t / TICK) for t in np.asarray(result.time)]
    for s in range(result.n):
        ref.reset()
        for n in swept:
            ref.slot[id(n)] = np.asarray(F32(values[f"in{n.consts[0]}"][s]))
        rows: list[list[Any]] = []
        computed: list[list[bool]] = []
        for t in times:
            ref.step(t - ref.t)
            rows.append([np.array(ref.value(o), copy=True) for o in outputs])
            computed.append([ref.computed(o) for o in outputs])
        for j, o in enumerate(outputs):
            got = np.asarray(list(result.series.values())[j])[s]
            want = np.array([r[j] for r in rows])
            known = np.array([c[j] for c in computed], dtype=bool)
            what = (f"scenario {s} of {result.n} (lanes={lanes}), {o!r}, rows at "
                    f"{times[:8]}..\n{prog.describe()}")
            assert same(got[known].astype(want.dtype), want[known]), what
            # a row before the first publication: NaN (not computed), or the slot's 0
            assert all(v != v or v == 0 for v in got[~known].tolist()), what


def test_an_output_whose_first_job_overran_is_not_computed_until_it_publishes() -> None:
    """A first job that overruns its period (declared cost 2.5 periods) publishes at a later
    period's end: until then the output raises NotComputedError (it read the slot's 0 as a
    computed value, LocalTarget judged by time alone)."""
    x = cp.value(2.0)
    y = x * 3.0
    tg = cp.LocalTarget(tick=TICK)
    tg.deploy(cp.Task(y, period=TICK, wcet=2.5 * TICK))
    for _ in range(2):
        tg.step(TICK)
        with pytest.raises(cp.NotComputedError, match="overrun its period"):
            tg.read(y)
    tg.step(TICK)
    assert tg.read(y) == 6.0 and tg.stats()[0].overruns == 2
