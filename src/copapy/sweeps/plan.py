"""A sweep's plan: the program image and where its parameters, recorded signals and metrics
live in the data region, plus the timing. Plain data that pickles small (the image bytes
once): every engine (the Python loop, the batched C runner, Dask workers) runs a plan.

``build_plan`` takes a saved program (ports by name) or periodic tasks (``cp.Task``; values
by object): a recorded value or metric that is no task output becomes an output of the task
that computes it, so the image is the deployed program plus its extra outputs.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import dtypes as dt
from ..compiler import CompileError
from ..graph.lift import LiftError
from ..graph.traverse import live_nodes
from ..runtime.errors import TargetError
from ..saved import ArrayInfo, Program, build
from ..target_common import to_ns
from ..task import Task
from ..value import Value
from .fields import Field, field_of
from .lanes import LanePlan, build_lanes, lane_count

if TYPE_CHECKING:
    import numpy as np

    from .params import Scenarios
else:
    from .._lazy import numpy as np

__all__ = ["Field", "Plan", "build_plan", "decode", "encode"]

#: recorded results larger than this are refused before anything runs (sample less often)
MAX_RESULT_BYTES = 8 << 30


@dataclass(frozen=True)
class Plan:
    """What every engine runs: ``steps`` recorded rows of ``sample_ticks`` ticks each."""

    image: bytes
    variant: str
    tick_ns: int
    steps: int
    sample_ticks: int
    params: tuple[Field, ...]
    records: tuple[Field, ...]
    finals: tuple[Field, ...]
    #: the input channels of the program's I/O bindings: each scenario starts them at 0.0
    inputs_io: tuple[tuple[int, int], ...]
    #: the metrics' names (finals[k] is the port of metric metric_names[k])
    metric_names: tuple[str, ...] = ()
    #: the image was compiled by cp.sweep from copapy's stencils (not read from a file):
    #: its jobs skip the guard's per-tick signal-state check (load(own_code=True); see
    #: docs/decisions/2026-12-04-sweeps.md)
    own_code: bool = False
    digest: str = ""
    #: the lane program that runs many scenarios side by side (sweeps/lanes.py), or None
    lanes: LanePlan | None = None
    #: why there is no lane program (the batched runner then steps one scenario at a time)
    lanes_off: str = ""
    #: per recorded field, its first rows that come before its task first publishes it
    #: (they are "not computed": NaN in the results, as LocalTarget.read raises then)
    unpublished: tuple[int, ...] = ()

    @property
    def sample(self) -> float:
        return self.sample_ticks * self.tick_ns * 1e-9

    @property
    def time(self) -> Any:
        """The simulated time of each recorded row (s): one sample, two, ..., the duration."""
        return (np.arange(1, self.steps + 1, dtype=np.int64) * self.sample_ticks
                * self.tick_ns) * 1e-9

    @property
    def param_row(self) -> int:
        return sum(f.size for f in self.params)

    @property
    def record_row(self) -> int:
        return sum(f.size for f in self.records)

    @property
    def final_row(self) -> int:
        return sum(f.size for f in self.finals)


def build_plan(program: Any, keys: Sequence[str], seconds: float,
               record: Sequence[Any], metrics: Mapping[str, Any], tick: float | None,
               sample: float | None, bindings: Iterable[Any] = (),
               names: Mapping[str, Any] | None = None, arch: str | None = None,
               scenarios: int | None = None, lanes: bool = True) -> Plan:
    """The plan: parameters are input ports by name, recorded signals and metrics values
    or port names. ``scenarios``: how many the sweep runs (sizes the lane batches);
    ``lanes=False``: no lane program (scenarios run one at a time)."""
    tasks, bindings, names = _unpack(program, bindings, names)
    if tasks is None and arch is not None:
        raise TypeError("arch= is for tasks; a saved program holds the code of its own "
                        "architecture")
    for k in keys:
        _port_name(k, "parameter")
    if tasks is None:
        prog = program
        record_names = [_port_name(r, "record") for r in record]
        metric_names = {m: _port_name(v, f"metrics[{m!r}]") for m, v in metrics.items()}
        lane_tasks: list[Task] = []
    else:
        prog, record_names, metric_names, lane_tasks = _compile(tasks, record, metrics,
                                                                bindings, names, arch)
    if not prog.periodic:
        raise TargetError(f"{prog.source} runs on request, it has no periodic tasks: a sweep "
                          f"steps simulated time (cp.Task(..., period=...))")
    tick_ns = _tick_ns(prog, tick)
    sample_ns = tick_ns if sample is None else _ns(sample, "sample")
    if sample_ns % tick_ns:
        raise ValueError(f"sample={sample} s is not a whole number of ticks of "
                         f"{tick_ns * 1e-9:g} s")
    total_ns = _ns(seconds, "seconds")
    if total_ns == 0 or total_ns % sample_ns:
        raise ValueError(f"seconds={seconds} is not a positive whole number of samples of "
                         f"{sample_ns * 1e-9:g} s (sample=...)")
    bound = {b.port for b in prog.bindings if b.direction == "input"}
    params = []
    for key in keys:
        f = field_of(prog, key, f"parameter {key!r}")
        port = prog.named(f.name)
        if port.role != "input":
            raise TargetError(f"parameter {f.name!r} is a{'n' if port.role[0] in 'ao' else ''} "
                              f"{port.role} of the program; a sweep sets inputs (cp.value)")
        if f.name in bound:
            raise TargetError(f"parameter {f.name!r} is read from an I/O channel at every "
                              f"release, so a value set for it would not last: sweep an "
                              f"unbound input instead")
        params.append(f)
    records = [field_of(prog, n, f"record {n!r}") for n in record_names]
    finals = [field_of(prog, n, f"metric {m!r}") for m, n in metric_names.items()]
    inputs_io = tuple(sorted({(b.channel.kind, b.channel.channel) for b in prog.bindings
                              if b.direction == "input"}))
    steps = total_ns // sample_ns
    unpublished = tuple(_unpublished(prog, f, sample_ns, steps) for f in (*records, *finals))
    plan = Plan(prog.image, prog.variant, tick_ns, steps, sample_ns // tick_ns,
                tuple(params), tuple(records), tuple(finals), inputs_io, tuple(metric_names),
                tasks is not None, hashlib.sha256(prog.image).hexdigest(),
                unpublished=unpublished)
    if not lanes:
        return replace(plan, lanes_off="lanes=False")
    if not lane_tasks:
        return replace(plan, lanes_off="a saved program holds no graph to run in lanes")
    count = lane_count(bindings, scenarios)
    cached = (plan.digest, tuple(keys), tuple(record_names), tuple(metric_names.values()),
              arch, count)
    lane_plan = _LANE_PLANS.get(cached)
    if lane_plan is None:
        try:
            lane_plan = build_lanes(lane_tasks, bindings, names, keys, record_names,
                                    list(metric_names.values()), arch, prog.image, count)
        except (LiftError, CompileError, TargetError) as exc:
            lane_plan = str(exc)
        while len(_LANE_PLANS) >= LANE_PLANS_KEPT:
            del _LANE_PLANS[next(iter(_LANE_PLANS))]  # the oldest
        _LANE_PLANS[cached] = lane_plan
    if isinstance(lane_plan, str):
        return replace(plan, lanes_off=lane_plan)
    return replace(plan, lanes=lane_plan)


#: lane programs (or why there is none) by what they are compiled from: the per-scenario
#: image (it holds the program, its ports and I/O bindings), the ports swept, recorded and
#: read as metrics, the table and the lane count. A sweep of a program that compiles to the
#: same image again (the same model rebuilt, sweeps in a loop) skips compiling its lanes.
_LANE_PLANS: dict[tuple[Any, ...], LanePlan | str] = {}
LANE_PLANS_KEPT = 8


def _unpublished(prog: Program, f: Field, sample_ns: int, steps: int) -> int:
    """How many of the ``steps`` rows (row k at (k + 1) * sample_ns) come before the port of
    ``f`` first holds a computed value; ``steps`` for a metric means it is never computed."""
    port = prog.named(f.name)
    first = port.ports[0].name if isinstance(port, ArrayInfo) else port.name
    published = prog.published_ns(first)
    return min(steps, (published - 1) // sample_ns) if published > 0 else 0


def check_size(plan: Plan, n: int) -> None:
    """ValueError before anything runs if the recorded rows of n scenarios are too large."""
    size = n * plan.steps * plan.record_row
    if size > MAX_RESULT_BYTES:
        raise ValueError(f"recording {len(plan.records)} values every {plan.sample:g} s for "
                         f"{n} scenarios takes {size / 2**30:.1f} GiB: record every few ms "
                         f"(sample=1e-3), fewer values, or use metrics for summaries")


def encode(plan: Plan, sc: Scenarios, keys: Sequence[str]) -> bytes:
    """The parameter bytes of the scenarios: one row of the plan's params per scenario."""
    parts = []
    for f, key in zip(plan.params, keys, strict=True):
        try:
            col = dt.storage_array(sc.columns[key], f.dtype)
        except (TypeError, OverflowError) as exc:
            raise type(exc)(f"parameter {f.name!r} ({f.dtype.name}): {exc}") from None
        parts.append(np.ascontiguousarray(col).view(np.uint8).reshape(sc.n, f.size))
    return np.concatenate(parts, axis=1).tobytes() if parts else b""


def decode(fields: Sequence[Field], raw: bytes | bytearray, lead: tuple[int, ...],
           labels: Sequence[str] | None = None) -> dict[str, Any]:
    """Rows of ``fields`` (shape ``lead``, e.g. (scenarios, steps)) as one array per field,
    by the field's name or its label."""
    row = sum(f.size for f in fields)
    data = np.frombuffer(raw, dtype=np.uint8).reshape(*lead, row)
    out: dict[str, Any] = {}
    at = 0
    for k, f in enumerate(fields):
        kind = f.dtype
        element = np.dtype("<i4" if kind.is_bool else kind.numpy)
        if row % element.itemsize == 0 and at % element.itemsize == 0:
            # whole elements at once (a copy of 4-byte pieces of bytes is ~6x slower)
            values = np.ascontiguousarray(data.view(element)[
                ..., at // element.itemsize:(at + f.size) // element.itemsize])
        else:
            values = np.ascontiguousarray(data[..., at:at + f.size]).view(element)
        at += f.size
        values = values.astype(bool) if kind.is_bool else values
        shaped = values.reshape(*lead, *f.shape) if f.shape else values.reshape(lead)
        out[f.name if labels is None else labels[k]] = shaped
    return out


# ---- internals ------------------------------------------------------------------------------

def _unpack(program: Any, bindings: Iterable[Any], names: Mapping[str, Any] | None
            ) -> tuple[list[Task] | None, list[Any], dict[str, Any]]:
    """(tasks or None for a saved program, bindings, names); a (tasks, bindings, names)
    tuple, as examples/motor_pid.py's program() returns, is taken apart."""
    bindings, names = list(bindings), dict(names or {})
    if isinstance(program, Program):
        if bindings or names:
            raise TypeError("bindings= and names= are for tasks; a saved program has its own")
        return None, bindings, names
    if (isinstance(program, tuple) and len(program) == 3 and isinstance(program[2], Mapping)
            and not isinstance(program[0], Task)):
        tasks, more, named = program
        return _tasks(tasks), [*more, *bindings], {**named, **names}
    return _tasks(program), bindings, names


def _tasks(items: Any) -> list[Task]:
    tasks = [items] if isinstance(items, Task) else list(items) if isinstance(
        items, Sequence | tuple | list) else None
    if not tasks or not all(isinstance(t, Task) for t in tasks):
        raise TypeError(f"cp.sweep(program, ...) takes cp.Task objects (or a (tasks, "
                        f"bindings, names) tuple) or a saved program (cp.load), got "
                        f"{type(items).__name__}")
    return tasks


def _port_name(x: Any, what: str) -> str:
    if isinstance(x, str):
        return x
    raise TypeError(f"{what} {x!r}: ports are named by str: an input's cp.value(..., name=...) "
                    f"or a names= entry (a saved program's Program.names())")


def _compile(tasks: list[Task], record: Sequence[Any], metrics: Mapping[str, Any],
             bindings: list[Any], names: dict[str, Any], arch: str | None
             ) -> tuple[Program, list[str], dict[str, str], list[Task]]:
    """The image of the tasks with every value the sweep reads or writes named (and made a
    task output if it is none), and those tasks."""
    by_node = {v.node: n for n, v in names.items() if isinstance(v, Value)}
    taken = set(names)

    def name_of(x: Any, default: str, what: str) -> str:
        if isinstance(x, str):
            return x
        if not isinstance(x, Value):
            raise TypeError(f"{what} is a copapy value or a port name, got "
                            f"{type(x).__name__} {x!r}")
        if x.node in by_node:
            return by_node[x.node]
        attr: Any = x.node.attr  # an input's (serial, name, initial bytes)
        own = attr[1] if x.node.op == "input" and attr[1] else default
        name = own if own not in taken else _fresh(own, taken)
        taken.add(name)
        by_node[x.node] = name
        names[name] = x
        return name

    # an unnamed recorded value is "record<k>", k its place in record= (they were record0,
    # record00, record01, ...: each took "record0" and then a fresh suffix)
    record_names = [name_of(r, f"record{k}", "record") for k, r in enumerate(record)]
    metric_names: dict[str, str] = {}
    for m, v in metrics.items():
        if not isinstance(m, str):
            raise TypeError(f"metrics maps names to values, got the key {m!r}")
        if not isinstance(v, Value):
            raise TypeError(f"metrics[{m!r}] is a traced value (e.g. cp.sweep.iae(error)), "
                            f"got {type(v).__name__}")
        metric_names[m] = name_of(v, m, f"metrics[{m!r}]")
    wanted = [names[n] for n in (*record_names, *metric_names.values())
              if isinstance(names.get(n), Value)]
    tasks = _with_outputs(tasks, wanted)
    return (build(*tasks, arch=arch, names=names, bindings=bindings), record_names,
            metric_names, tasks)


def _fresh(base: str, taken: set[str]) -> str:
    k = 0
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


def _with_outputs(tasks: list[Task], values: Sequence[Value[Any]]) -> list[Task]:
    """The tasks, each value that is no task output added to the task that computes it (the
    one whose work shares the most computed nodes with it; else the fastest task)."""
    outputs = {n for t in tasks for o in t.outputs for n in _nodes(o)}
    extra: dict[int, list[Value[Any]]] = {}
    live = [set(live_nodes([n for o in t.outputs for n in _nodes(o)])) for t in tasks]
    for v in values:
        if v.node in outputs or v.node.op == "input":
            continue
        mine = {n for n in live_nodes([v.node]) if n.args or n.op == "state"}
        shared = [len(mine & nodes) for nodes in live]
        home = (shared.index(max(shared)) if max(shared) > 0
                else min(range(len(tasks)), key=lambda k: tasks[k].period))
        extra.setdefault(home, []).append(v)
        outputs.add(v.node)
    return [t if k not in extra else
            Task(*t.outputs, *extra[k], period=t.period, priority=t.priority, offset=t.offset,
                 wcet=t.wcet, name=t.name, budget=t.budget, link_timeout=t.link_timeout)
            for k, t in enumerate(tasks)]


def _nodes(x: Any) -> list[Any]:
    return [x.node] if isinstance(x, Value) else list(x.nodes())


def _ns(seconds: Any, what: str) -> int:
    if (isinstance(seconds, bool) or not isinstance(seconds, numbers.Real)
            or not float(seconds) >= 0):
        raise ValueError(f"{what} is a number of seconds >= 0, got {seconds!r}")
    return to_ns(float(seconds))


def _tick_ns(prog: Program, tick: float | None) -> int:
    if tick is None:
        return prog.tick_ns
    tick_ns = _ns(tick, "tick")
    if tick_ns == 0 or prog.tick_ns % tick_ns:
        raise TargetError(f"{prog.source}: its task periods and offsets are not multiples of "
                          f"the tick {tick} s (the program's own tick is "
                          f"{prog.tick_ns * 1e-9:g} s)")
    return tick_ns

