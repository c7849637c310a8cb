"""Lane sweeps: one program that runs a batch of scenarios side by side, one lane of packed
arrays per scenario (docs/decisions/2026-12-04-lane-sweeps.md).

The sweep's tasks are lifted (graph/lift.py): each swept parameter and each input read from
an I/O channel becomes a packed input of ``count`` lanes, and every value that depends on one
becomes packed. The tasks keep their periods, priorities and offsets, so the scheduler runs
one job per task and tick for the whole batch, and each packed stencil computes lane k as the
scalar stencil computes scenario k. The simulated I/O keeps its scalar semantics per lane:
lane k of a bound value gets a binding of its own, to channel ``index * count + k`` of the
same kind (index: the channel's rank among the program's channels of that kind), added to
the compiled image beside the compiler's (the same tasks, directions and element types).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import image as im
from .._contract import IoDirection
from ..arrays import Array
from ..compiler import compile_tasks
from ..graph.lift import LiftError, lift, reaches
from ..graph.node import Node, fresh_array_input, input_initial, input_name
from ..graph.state import state_initial, update_is_signal, update_of
from ..graph.traverse import closure
from ..io import Channel
from ..runtime.load import host_architecture, is_native
from ..saved import ArrayInfo, Program
from ..target_common import task_specs
from ..task import Task
from ..value import Value
from .fields import Field, field_of

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

__all__ = ["CHANNELS", "LanePlan", "build_lanes", "from_lanes", "lane_count", "to_lanes"]

#: the simulated I/O channels of one kind the batched runner has (runner/python/batch.c)
CHANNELS = 256
#: the most lanes a batch runs: its packed values (~2 KiB at float64) stay in the L1 and L2
#: caches beside the code
MAX_LANES = 256
#: the table a lane program is compiled for on a machine of each architecture whose CPU runs
#: it, when the sweep names no arch: the packed loops run on wider vectors (same bits). Not
#: x86_64-v4: on this project's AVX-512 machine its 64-byte loops ran the motor sweep 1.14x
#: slower than x86_64-v3's (benchmarks/RESULTS.md, "Lane sweeps")
LANE_TABLES = {"x86_64": "x86_64-v3"}
#: internal port names of the bound values (the image's bindings are added by offset)
_IO_NAME = "__lanes.io{}"


@dataclass(frozen=True)
class LanePlan:
    """The lane program of a plan: ``count`` scenarios per run. Its fields hold ``count``
    elements (one a lane), or one when the value is the same in every lane."""

    image: bytes
    count: int
    #: the stencil table it was compiled for (a worker whose CPU does not run it steps the
    #: scenarios one at a time)
    variant: str
    #: the digest of the per-scenario image these lanes compute (a plan whose image was
    #: replaced does not use them)
    base: str
    params: tuple[Field, ...]
    records: tuple[Field, ...]
    finals: tuple[Field, ...]
    digest: str


def lane_count(bindings: Sequence[tuple[Any, Channel]], scenarios: int | None) -> int:
    """The lanes of a batch: at most MAX_LANES, the scenarios rounded up to a power of two,
    and few enough that every bound channel's lanes fit in its kind's CHANNELS."""
    per_kind: dict[int, set[int]] = {}
    for _, ch in bindings:
        per_kind.setdefault(ch.kind, set()).add(ch.channel)
    widest = max((len(c) for c in per_kind.values()), default=1)
    count = min(MAX_LANES, CHANNELS // widest)
    if scenarios is not None:
        count = min(count, 1 << max(0, scenarios - 1).bit_length())
    return max(1, count)


def lane_architecture(arch: str | None) -> str:
    """The table of a sweep's lane program: ``arch`` if the sweep names one, else this
    machine's LANE_TABLES entry where its CPU runs it, else its base table."""
    if arch is not None:
        return arch
    base = host_architecture()
    wide = LANE_TABLES.get(base)
    return wide if wide is not None and is_native(wide) else base


def build_lanes(tasks: Sequence[Task], bindings: Sequence[tuple[Any, Channel]],
                names: Mapping[str, Any], keys: Sequence[str], records: Sequence[str],
                finals: Sequence[str], arch: str | None, base: bytes, count: int) -> LanePlan:
    """The lane program of the tasks (already holding the recorded values as outputs), with
    ``keys`` swept; ``base``: the per-scenario image. LiftError for a program with a value
    that has no lane form; the compiler's errors for one it cannot compile."""
    roots = [n for t in tasks for o in t.outputs for n in _nodes(o)]
    by_name = {v.node: n for n, v in names.items() if isinstance(v, Value)}
    for node in closure(roots)[0]:
        if node.op == "input" and node not in by_name and input_name(node):
            by_name[node] = input_name(node)  # type: ignore[assignment]
    nodes = {n: node for node, n in by_name.items()}
    lanes: dict[Node, Node] = {}
    for key in keys:
        if key not in nodes:
            raise LiftError(f"the parameter {key!r} is no input the tasks read")
        lanes[nodes[key]] = _lane_input(nodes[key], count, key)
    ports = {nodes[n] for n in (*keys, *records, *finals) if n in nodes}
    alias = _aliases(tasks, bindings, base, roots, ports)
    for value, ch in bindings:
        if not ch.is_output and value.node not in alias:
            lanes[value.node] = _lane_input(value.node, count, None)
    lifted = lift(roots, lanes, count, alias)

    def lane(node: Node) -> Any:
        node = lifted.get(node, node)
        return Array(node.shape, node=node) if node.shape else Value(node)

    lane_tasks = [Task(*(lane(n) for o in t.outputs for n in _nodes(o)), period=t.period,
                       priority=t.priority, offset=t.offset, wcet=t.wcet, name=t.name,
                       budget=t.budget, link_timeout=t.link_timeout) for t in tasks]
    # node -> port name: the sweep's names, then each bound value's and aliased output's
    named = {v.node: n for n, v in names.items() if isinstance(v, Value)}
    ports_of = {lifted.get(node, node): n for node, n in named.items() if node not in alias}

    def port(node: Node, default: str) -> str:
        """The port name of ``node`` in the lane program (one name per node)."""
        name = named.setdefault(node, default)
        ports_of[lifted.get(node, node)] = name
        return name

    read = {(ch.kind, ch.channel) for value, ch in bindings
            if not ch.is_output and value.node in lifted and value.node not in alias}
    bound = []
    for j, (value, ch) in enumerate(bindings):
        # an input read through its alias, or by no task, needs no binding; an output only
        # where such an input reads its channel
        if (ch.is_output and (ch.kind, ch.channel) in read) or (
                not ch.is_output and value.node in lifted and value.node not in alias):
            bound.append((port(value.node, _IO_NAME.format(j)), ch))
    published = [port(out, _IO_NAME.format(f"out{j}")) for j, out in enumerate(alias.values())]
    # compiled as saved.build does, without the range analysis that cp.check reads
    prog = Program(compile_tasks(task_specs(lane_tasks), lane_architecture(arch), (),
                                 ports_of).image)
    _check_unpublished(prog, published)
    image = _with_lane_bindings(prog, bound, count)
    return LanePlan(image, count, prog.variant, hashlib.sha256(base).hexdigest(),
                    tuple(field_of(prog, k, f"parameter {k!r}") for k in keys),
                    tuple(field_of(prog, n, f"record {n!r}") for n in records),
                    tuple(field_of(prog, n, f"metric port {n!r}") for n in finals),
                    hashlib.sha256(image).hexdigest())


def _aliases(tasks: Sequence[Task], bindings: Sequence[tuple[Any, Channel]], base: bytes,
             roots: Sequence[Node], ports: set[Node]) -> dict[Node, Node]:
    """The bound inputs read as the task output that drives their channel (a LET read: the
    value published at the output's period end, read at the reader's release, as the
    channel carries it), where that is the same bits: the same float type, an output that
    is zero before its first publication (as a channel is), produced by a task that does not
    read the input, and no cycle within one run; not an input the sweep reads or writes
    (``ports``). Fastest readers first: each alias saves one binding per lane and
    release."""
    drivers = {(ch.kind, ch.channel): value.node for value, ch in bindings if ch.is_output}
    producer = {n: k for k, t in enumerate(tasks) for o in t.outputs for n in _nodes(o)}
    readers: dict[tuple[int, int], set[int]] = {}
    for b in im.parse(base).io_bindings:
        if b.direction == IoDirection.INPUT:
            readers.setdefault((b.kind, b.channel), set()).add(b.task)
    preset = _presets(roots)
    candidates = []
    for value, ch in bindings:
        key = (ch.kind, ch.channel)
        out = drivers.get(key)
        if ch.is_output or out is None or key not in readers or value.node in ports:
            continue
        node = value.node
        if (node.dtype is out.dtype and node.dtype.is_float and out.op != "const"
                and not any(preset.get(out, b"\0")) and producer.get(out) not in readers[key]):
            fastest = min(tasks[k].period for k in readers[key])
            candidates.append((fastest, node, out))
    alias: dict[Node, Node] = {}
    for _, node, out in sorted(candidates, key=lambda c: c[0]):
        if not reaches(out, node, alias):
            alias[node] = out
    return alias


def _presets(roots: Sequence[Node]) -> dict[Node, bytes]:
    """The nodes whose output slot starts at a state's init (as the compiler presets it:
    a state, and a state's update that is the signal)."""
    states = [n for n in closure(roots)[0] if n.op == "state"]
    found = {update_of(s): state_initial(s) for s in states if update_is_signal(s)}
    found.update({s: state_initial(s) for s in states})
    return found


def _check_unpublished(prog: Program, outputs: Sequence[str]) -> None:
    """LiftError unless every aliased output's slot is zero before its first publication
    (what a channel holds before its driver's first write)."""
    img = im.parse(prog.image)
    init = img.data_init.ljust(img.data_size, b"\0")
    for name in outputs:
        f = field_of(prog, name, f"output {name!r}")
        if any(init[f.offset:f.offset + f.size]):
            raise LiftError(f"the output {name!r} has a value before its first run, which an "
                            f"I/O channel it drives does not")


def _lane_input(node: Node, count: int, name: str | None) -> Node:
    """A packed input of ``count`` lanes, each starting at ``node``'s initial value."""
    return fresh_array_input(node.dtype, input_initial(node) * count, (count,), name)


def _nodes(x: Any) -> list[Node]:
    return [x.node] if isinstance(x, Value) else list(x.nodes())


def _with_lane_bindings(prog: Program, bound: Sequence[tuple[str, Channel]],
                        count: int) -> bytes:
    """The program's image with one binding per lane of every bound port: an input read by
    each task that copies it at its release (as the compiler binds an input), an output
    driven by the task that produces it."""
    img = im.parse(prog.image)
    rank = {kind: {c: i for i, c in enumerate(sorted({ch.channel for _, ch in bound
                                                       if ch.kind == kind}))}
            for kind in {ch.kind for _, ch in bound}}
    added = []
    for name, ch in bound:
        port = prog.named(name)
        info = port.ports[0] if isinstance(port, ArrayInfo) else port
        step = info.dtype.size if info.count > 1 else 0  # one value for every lane: step 0
        base = rank[ch.kind][ch.channel] * count
        if ch.is_output:
            assert info.task is not None
            tasks = [info.task]
        else:
            tasks = sorted({c.task for c in img.let_copies if c.phase == 0
                            and c.src == info.offset})
        for k in tasks:
            added += [im.ImageIoBinding(k, 2 if ch.is_output else 1, ch.kind, base + lane,
                                        info.dtype.code, info.offset + lane * step,
                                        float(ch.safe) if ch.is_output else 0.0)
                      for lane in range(count)]
    img.io_bindings = [*img.io_bindings, *added]
    return img.to_bytes()


def to_lanes(fields: Sequence[Field], params: bytes, m: int, count: int) -> bytes:
    """The parameter rows of ``m`` scenarios (one row of ``fields`` each) as the lane
    program's parameter bytes: each field's ``count`` lanes side by side, the lanes past
    ``m`` repeating the last scenario (a scenario that exists: it faults only where that
    one does)."""
    rows = np.frombuffer(params, dtype=np.uint8).reshape(m, -1)
    rows = np.concatenate([rows, np.repeat(rows[-1:], count - m, axis=0)])
    out, at = [], 0
    for f in fields:
        out.append(np.ascontiguousarray(rows[:, at:at + f.size]).tobytes())
        at += f.size
    return b"".join(out)


def from_lanes(fields: Sequence[Field], raw: bytes | bytearray, lead: tuple[int, ...], m: int,
               count: int) -> bytes:
    """The lane program's rows of ``fields`` (shape ``lead``: (steps,) or ()) as the
    per-scenario engines return them: scenario after scenario, each its rows of one element
    per field (a field of one element is every lane's)."""
    if not fields:
        return b""
    sizes = {f.dtype.size for f in fields}
    # whole elements move at once where every field has one size (the usual case)
    unit = np.dtype(f"<u{sizes.pop()}") if len(sizes) == 1 else np.dtype(np.uint8)
    data = np.frombuffer(raw, dtype=unit).reshape(*lead, -1)
    out = np.empty((m, *lead, sum(f.dtype.size for f in fields) // unit.itemsize), dtype=unit)
    at = col = 0
    for f in fields:
        width = f.dtype.size // unit.itemsize  # columns of one element
        block = data[..., at:at + f.count * width].reshape(*lead, f.count, width)
        block = np.broadcast_to(block, (*lead, count, width))[..., :m, :]
        out[..., col:col + width] = np.moveaxis(block, -2, 0)
        at += f.count * width
        col += width
    return out.tobytes()
