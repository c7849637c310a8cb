"""What LocalTarget and SerialTarget share: task and I/O specs for the compiler, input value
checks, port lookup, task statistics and decoding trace rows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from . import dtypes as dt
from .compiler import IoSpec, TaskSpec
from .io import Channel, check_binding
from .task import Task
from .value import Value, flatten

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from .compiler.layout import Port
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


# ---- values


def find_port(ports: Mapping[Any, Port], v: Value[Any] | str) -> Port | None:
    """The port of a value in a compiled program, or of a name in a saved one (cp.load);
    None if it has none."""
    if isinstance(v, str):
        return ports.get(v)
    if not isinstance(v, Value):
        raise TypeError(f"expected a copapy value, got {type(v).__name__}")
    return ports.get(v.node)


def same_value(a: Value[Any] | str, b: Value[Any] | str) -> bool:
    """Whether two traced values (or two port names of a saved program) are the same."""
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a.node is b.node


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


def decode_rows(raw: bytes, dtypes: Sequence[dt.DType]) -> tuple[NDArray[np.uint64],
                                                                   list[NDArray[Any]]]:
    """Split concatenated trace rows into the time stamps and one column per value.

    A row is ``uint64`` (t_ns of a native trace row, the tick of a STREAM event; docs/realtime.md
    and docs/protocol.md) followed by the values, packed, little-endian. Columns are new arrays
    of the values' NumPy types (bool for bool values).
    """

    record = np.dtype([("t", "<u8")] + [(f"v{i}", d.fmt) for i, d in enumerate(dtypes)])
    table = np.frombuffer(raw, dtype=record)
    columns = [table[f"v{i}"].astype(bool if d.is_bool else d.numpy)
               for i, d in enumerate(dtypes)]
    return table["t"], columns
