"""What LocalTarget and SerialTarget share: task and I/O specs for the compiler, input value
checks, port lookup, task statistics and decoding trace rows."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from . import dtypes as dt
from ._contract import IoDirection
from .arrays import Array
from .compiler import IoSpec, TaskSpec
from .compiler.layout import ROLE_INPUT, Port
from .image import parse as parse_image
from .io import Channel, check_binding, checked_channel
from .quaternions import Quaternion
from .runtime.errors import TargetError
from .task import Task
from .value import Value, flatten

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from .graph.node import Node
else:
    from ._lazy import numpy as np


# ---- programs


def to_ns(seconds: float) -> int:
    """Seconds as whole nanoseconds, or ValueError."""
    ns = round(seconds * 1e9)
    if not math.isclose(ns, seconds * 1e9, rel_tol=1e-9, abs_tol=1e-3):
        raise ValueError(f"{seconds} s is not a whole number of nanoseconds")
    return int(ns)


class Named(Protocol):
    """A task as statistics name it: a cp.Task, or a saved program's TaskInfo."""

    @property
    def name(self) -> str: ...


def task_name(task: Named, index: int) -> str:
    return task.name or f"task{index}"


def task_specs(tasks: Sequence[Task]) -> list[TaskSpec]:
    """The compiler's view of ``deploy(*tasks)`` (TypeError for anything but a cp.Task)."""
    specs = []
    for k, t in enumerate(tasks):
        if not isinstance(t, Task):
            raise TypeError(f"deploy() takes cp.Task objects, got {type(t).__name__}")
        specs.append(TaskSpec(task_name(t, k), tuple(flatten(t.outputs, "Task")),
                              to_ns(t.period), to_ns(t.offset), t.priority,
                              to_ns(t.wcet) if t.wcet else 0,
                              round(t.budget * 1e9) if t.budget else 0,
                              round(t.link_timeout * 1e9) if t.link_timeout else 0))
    return specs


def io_specs(bindings: Mapping[Node, Channel]) -> list[IoSpec]:
    """The compiler's view of ``bind()``: an input reads its channel, an output drives it
    (BindingError for a wrong direction or a channel with two drivers; a runner rejects at
    load a channel its hardware does not have, e.g. a plant side that drives an encoder)."""
    checked: dict[Node, Channel] = {}
    for node, ch in bindings.items():
        check_binding(checked, node, node.op == "input", ch)
        checked[node] = ch
    return [IoSpec(node, ch.kind, ch.channel, 1 if node.op == "input" else 2, ch.safe)
            for node, ch in bindings.items()]


def check_bound_outputs(specs: Sequence[TaskSpec], bindings: Mapping[Node, Channel],
                        error: type[Exception]) -> None:
    """``error`` if a value bound to an output channel is output by none of the tasks: a
    target keeps its bindings for every deploy, so another program cannot be deployed."""
    outputs = {n for spec in specs for n in spec.outputs}
    for node, channel in bindings.items():
        if node.op != "input" and node not in outputs:
            raise error(f"{Value(node)!r} is bound to {channel!r} (tg.bind), but no task of "
                        f"this deploy outputs it: a target keeps its bindings for every deploy, "
                        f"so deploy tasks that output it, or remove the binding first with "
                        f"tg.unbind({Value(node)!r}) (tg.unbind() removes all)")


def remove_binding(bindings: dict[Node, Channel], value: Value[Any] | None, error: type[Exception]
           ) -> None:
    """What ``tg.unbind`` does on every target: bindings belong to the next deploy, so the
    running program keeps its own until then."""
    if value is None:
        bindings.clear()
        return
    if not isinstance(value, Value):
        raise TypeError(f"unbind() takes a copapy value bound with tg.bind (or nothing, for "
                        f"all), got {type(value).__name__}")
    if bindings.pop(value.node, None) is None:
        bound = ", ".join(f"{Value(n)!r} -> {ch!r}" for n, ch in bindings.items()) or "none"
        raise error(f"{value!r} is not bound to a channel (bindings: {bound})")


def bound_inputs(image: bytes, ports: Mapping[Any, Port]) -> dict[Any, Channel]:
    """The keys of the input ports an I/O binding of ``image`` fills at every release (a
    write to one would be overwritten), with their channels."""
    by_offset = {p.offset: key for key, p in ports.items() if p.role == ROLE_INPUT}
    return {by_offset[b.offset]: Channel(b.kind, b.channel)
            for b in parse_image(image).io_bindings
            if b.direction == IoDirection.INPUT and b.offset in by_offset}


def checked_io_write(channel: Any, value: Any) -> tuple[Channel, float]:
    """``set_io(channel, value)``'s arguments, the same on every target: a channel the program
    reads (one it drives would be overwritten by its next period) and a number."""
    checked_channel(channel, "set_io")
    if channel.is_output:
        raise TargetError(f"{channel!r} is driven by the program (read it with tg.io_value); "
                          f"set_io sets channels the program reads")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"set_io({channel!r}, value): the value is a number, got "
                        f"{type(value).__name__} {value!r}")
    return channel, float(value)


def check_unbound(bound: Mapping[Any, Channel], key: Any, v: Any, error: type[Exception]) -> None:
    """``error`` if the input ``key`` (a node or a port name) is filled by an I/O binding."""
    if key in bound:
        raise error(f"{v!r} is bound to {bound[key]!r}, which sets it at every release: set "
                    f"the channel (tg.set_io on a simulation) instead of writing the input")


# ---- values


class NamedPorts(dict[Any, Port]):
    """A saved program's ports by name (cp.load) and its array ports: name -> (shape, the
    names of its ports in element order: one packed port, or one port per element)."""

    def __init__(self, ports: Mapping[str, Port],
                 arrays: Mapping[str, tuple[tuple[int, ...], tuple[str, ...]]]) -> None:
        super().__init__(ports)
        self.arrays = dict(arrays)


def find_port(ports: Mapping[Any, Port], v: Value[Any] | str) -> Port | None:
    """The port of a value in a compiled program, or of a name in a saved one (cp.load);
    None if it has none."""
    if isinstance(v, str):
        return ports.get(v)
    if not isinstance(v, Value):
        raise TypeError(not_readable(v))
    return ports.get(v.node)


def not_readable(v: Any) -> str:
    """Why ``v`` names nothing a target holds, and what does."""
    hint = (": pass the values themselves, not a list (tg.trace(a, b), tg.read(a))"
            if isinstance(v, list | tuple) else "")
    return (f"expected a copapy value, array, quaternion or port name (str), got "
            f"{type(v).__name__}{hint}")


@dataclass(frozen=True)
class Slots:
    """Where a value, an array, a quaternion or a named port lives in the data region: its
    ports in element order (one for a scalar or a packed array, one per element of an
    unpacked array or a quaternion) and its shape (() for a scalar)."""

    key: tuple[Any, ...]  # what identifies it in a trace: its nodes, or its name
    ports: tuple[Port, ...]
    shape: tuple[int, ...]
    dtype: dt.DType

    @property
    def nbytes(self) -> int:
        return sum(p.count * p.dtype.size for p in self.ports)

    def ranges(self) -> list[tuple[int, int]]:
        """(offset, size) of each contiguous run of its ports, in element order."""
        runs: list[tuple[int, int]] = []
        for p in self.ports:
            size = p.count * p.dtype.size
            if runs and runs[-1][0] + runs[-1][1] == p.offset:
                runs[-1] = (runs[-1][0], runs[-1][1] + size)
            else:
                runs.append((p.offset, size))
        return runs

    def decode(self, raw: bytes) -> Any:
        """The value of the slots' bytes (concatenated in element order): a Python number
        for a scalar, else a NumPy array of its shape (bool for bool elements)."""
        if not self.shape:
            return self.ports[0].dtype.unpack(raw)
        parts, at = [], 0
        for p in self.ports:
            n = p.count * p.dtype.size
            parts.append(dt.from_storage(raw[at:at + n], p.dtype))
            at += n
        return np.concatenate(parts).astype(dt.numpy_type(self.dtype)).reshape(self.shape)

    def encode(self, x: Any) -> list[tuple[int, bytes]]:
        """``x`` as (offset, bytes) of each of ``ranges()``, checked as tg.write checks a
        number: an array of the value's shape (of its element count for a port name)."""
        if not self.shape:
            return [(self.ports[0].offset, self.dtype.pack(checked_scalar(x, self.dtype)))]
        name = self.key[0] if isinstance(self.key[0], str) else None
        values = shaped(numbers_of(x, self.dtype, self.shape), self.shape, name)
        rows = dt.storage_array(values.reshape(1, -1), self.dtype)
        return [(o, b) for (o, _), b in zip(self.ranges(), self.split(rows), strict=True)]

    def split(self, elements: Any) -> list[bytes]:
        """Rows of elements (n rows of all elements, storage dtype) as the bytes of each of
        ``ranges()``: n rows of its elements."""
        pieces, at = [], 0
        for _, size in self.ranges():
            n = size // self.dtype.size
            pieces.append(np.ascontiguousarray(elements[:, at:at + n]).tobytes())
            at += n
        return pieces


def elements(a: Array, ports: Mapping[Any, Port]) -> list[Value[Any]] | None:
    """The element values a target reads and writes one by one: an unpacked array's, or
    those of a packed array stacked from values (``cp.vector([a, b], packed=True)``) that has
    no port of its own; None for a packed array that has one (or nothing to stack)."""
    if not a.packed:
        return a.items()
    node = a.node()
    if node in ports or node.op != "stack":
        return None
    return [Value(x) for x in node.args]


def slots_of(v: Any, ports: Mapping[Any, Port], port: Callable[[Value[Any] | str], Port]
             ) -> Slots:
    """The slots of a value, array, quaternion or port name among a program's ``ports``
    (``port`` looks one up, raising the target's error for one the program does not have)."""
    if isinstance(v, str):
        shape, names = (ports.arrays.get(v, ((), (v,))) if isinstance(ports, NamedPorts)
                        else ((), (v,)))
        parts = tuple(port(n) for n in names)
        count = parts[0].count
        return Slots((v,), parts, shape or ((count,) if count > 1 else ()), parts[0].dtype)
    if isinstance(v, Value):
        return Slots((v.node,), (port(v),), (), v.dtype)
    if isinstance(v, Array) and elements(v, ports) is None:
        return Slots((v.node(),), (port(Value(v.node())),), v.shape, v.dtype)
    if isinstance(v, Array | Quaternion):
        items = elements(v, ports) if isinstance(v, Array) else v.components()
        assert items is not None
        shape = v.shape if isinstance(v, Array) else (4,)
        key = trace_key(v)
        assert key is not None
        return Slots(key, tuple(port(i) for i in items), shape, items[0].dtype)
    raise TypeError(not_readable(v))


def trace_key(v: Any) -> tuple[Any, ...] | None:
    """What identifies a traced value, array, quaternion or port name (``Slots.key``); None
    for anything else."""
    if isinstance(v, str):
        return (v,)
    if isinstance(v, Value):
        return (v.node,)
    if isinstance(v, Array):
        return (v.node(),) if v.packed else tuple(i.node for i in v.items())
    if isinstance(v, Quaternion):
        return tuple(c.node for c in v.components())
    return None


def same_key(a: tuple[Any, ...], b: tuple[Any, ...] | None) -> bool:
    """Whether two trace keys name the same nodes (identity) or the same port name."""
    return b is not None and len(a) == len(b) and all(
        x is y or (isinstance(x, str) and x == y) for x, y in zip(a, b, strict=True))


def numbers_of(x: Any, dtype: dt.DType, shape: tuple[int, ...]) -> Any:
    """``x`` as a NumPy array of numbers for an array input, or a TypeError naming what it is
    (a str became a 0-d array and was reported as "shape ()")."""
    if isinstance(x, Value | Array):
        raise TypeError("write() takes numbers (a NumPy array or a list), not a traced value")
    values = np.asarray(x)
    if values.dtype.kind not in "biuf":
        bad = sorted({type(e).__name__ for e in np.asarray(x, dtype=object).reshape(-1)
                      if not isinstance(e, bool | int | float | np.number)}) or ["nothing"]
        raise TypeError(f"cannot write {type(x).__name__} {x!r} into a {dtype.name} input of "
                        f"shape {shape}: {' and '.join(bad)} is not a number; pass an array or "
                        f"list of numbers of shape {shape}")
    return values


def shaped(values: Any, shape: tuple[int, ...], name: str | None) -> Any:
    """``values`` (a NumPy array) in ``shape``, or ValueError naming both shapes: an input
    takes its shape; a port ``name`` also all its elements in a flat list (row-major)."""
    if values.shape == shape:
        return values
    if name is None:
        raise ValueError(f"writing shape {values.shape} into an input of shape {shape}")
    size = math.prod(shape)
    if values.ndim != 1 or values.size != size:
        dims = f" (shape {shape})" if len(shape) > 1 else ""
        raise ValueError(f"port {name!r} holds {size} values{dims}, got {values.size} "
                         f"(shape {values.shape})")
    return values.reshape(shape)


def checked_scalar(x: Any, dtype: dt.DType) -> float | int | bool:
    """``x`` as a Python number fit for a ``dtype`` input, or an error naming the problem."""
    if isinstance(x, Value):
        raise TypeError("write() takes a Python number, not a traced value")
    item = getattr(x, "item", None)
    if callable(item) and getattr(x, "ndim", 0) == 0:
        x = item()
    if not isinstance(x, bool | int | float):
        raise TypeError(f"cannot write {type(x).__name__} {x!r} into a {dtype.name} input")
    if dtype.is_int:
        if isinstance(x, float):
            if not x.is_integer():
                raise TypeError(f"{x!r} would be truncated writing an int32 input; pass an int")
            x = int(x)
        if not dt.INT32_MIN <= x <= dt.INT32_MAX:
            raise OverflowError(f"{x} does not fit in the int32 input")
    if dtype.is_bool and not isinstance(x, bool) and x not in (0, 1):
        raise TypeError(f"write {x!r} into a bool input: pass True or False")
    checked: float | int | bool = x
    return checked


# ---- statistics


@dataclass(frozen=True)
class TaskStats:
    """Per-task statistics of the simulated schedule (execution times are wall-clock)."""

    name: str
    runs: int
    skipped: int
    overruns: int
    max_exec_ns: int
    mean_exec_ns: float

    @classmethod
    def from_counters(cls, name: str, counters: tuple[int, int, int, int, int]) -> TaskStats:
        """From a scheduler's (runs, skipped, overruns, exec_ns_max, exec_ns_sum)."""
        runs, skipped, overruns, mx, total = counters
        return cls(name, runs, skipped, overruns, mx, total / runs if runs else 0.0)


def task_stats(tasks: Sequence[Named],
               counters: Iterable[tuple[int, int, int, int, int]]) -> list[TaskStats]:
    """TaskStats of each task, named like the compiled tasks."""
    return [TaskStats.from_counters(task_name(t, k), c)
            for k, (t, c) in enumerate(zip(tasks, counters, strict=False))]


# ---- traces


def trace_ranges(traced: Sequence[Slots], limit: int, where: str) -> list[tuple[int, int]]:
    """The (offset, size) ranges a trace row holds, or an error naming the limit."""
    ranges = [r for s in traced for r in s.ranges()]
    if len(ranges) > limit:
        raise ValueError(f"tracing these values takes {len(ranges)} separate data ranges; "
                         f"{where} traces at most {limit}: trace fewer values at once, or "
                         f"packed arrays (cp.value(np_array), packed=True) instead of "
                         f"unpacked ones")
    return ranges


def decode_rows(raw: bytes, traced: Sequence[Slots]) -> tuple[NDArray[np.uint64],
                                                                list[NDArray[Any]]]:
    """Split concatenated trace rows into the time stamps and one column per traced value.

    A row is ``uint64`` (t_ns of a native trace row, the tick of a STREAM event; docs/realtime.md
    and docs/protocol.md) followed by the values, packed, little-endian. Columns are new arrays
    of the values' NumPy types (bool for bool values): one number per row for a scalar, an
    array of the value's shape per row for an array.
    """
    fields: list[Any] = [("t", "<u8")]
    for i, s in enumerate(traced):
        for j, p in enumerate(s.ports):
            fmt = "<i4" if p.dtype.is_bool else p.dtype.fmt
            fields.append((f"v{i}_{j}", fmt, (p.count,)) if s.shape else (f"v{i}_{j}", fmt))
    table = np.frombuffer(raw, dtype=np.dtype(fields))
    columns = []
    for i, s in enumerate(traced):
        parts = [table[f"v{i}_{j}"] for j in range(len(s.ports))]
        col = np.concatenate(parts, axis=1) if s.shape else parts[0]
        columns.append(col.astype(dt.numpy_type(s.dtype)).reshape((len(table), *s.shape)))
    return table["t"], columns
