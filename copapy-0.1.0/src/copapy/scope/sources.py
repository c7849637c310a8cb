"""Where a scope's samples come from: a target stepped here (LocalTarget, a saved image) or
one that streams them (SerialTarget: the host runner, the firmware).

A source yields every tick's values of the chosen signals, in order and without gaps, as
batches; it writes inputs, starts and stops the program and reports its state. It uses the
targets' public API only (``read``, ``write``, ``trace``, ``step``, ``start``, ``stop``,
``stats``, ``runner_stats``, ``info``, ``on_fault``), so this package imports no target.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..runtime.errors import ProgramFault

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from .._lazy import numpy as np  # import copapy (and LocalTarget) stays fast

#: ticks one step of a stepped target runs at most (its trace ring holds twice as many)
CHUNK = 2000

#: seconds a streamed scope's host may stall (not read the link) without losing a tick: the
#: host runner keeps a client's unread events this long (copapy_runner.c STALL_TIMEOUT_MS,
#: its 1 MiB event ring); the stream trace holds this and a margin. Longer stalls lose ticks,
#: counted and marked in the recording.
STALL_BOUND_S = 5.0


@dataclass(frozen=True)
class Batch:
    """Ticks in order: their indices, one float column per signal label and, per row, the
    ticks lost right before it (``lost``; None: none lost)."""

    ticks: NDArray[np.int64]
    columns: dict[str, NDArray[np.float64]]
    lost: NDArray[np.int64] | None = None

    def __len__(self) -> int:
        return len(self.ticks)

    def lost_before(self) -> NDArray[np.int64]:
        """Ticks lost right before each row (zeros when none)."""
        return self.lost if self.lost is not None else np.zeros(len(self.ticks), np.int64)


@dataclass(frozen=True)
class Status:
    """The program's state as the banner shows it."""

    state: str  # "running", "stopped", "FAULTED", "link lost"
    detail: str = ""

    @property
    def text(self) -> str:
        return f"{self.state}: {self.detail}" if self.detail else self.state


class Source(Protocol):
    labels: list[str]
    tick_s: float

    def poll(self) -> Batch | None: ...
    def write(self, key: Any, value: float | int | bool) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def status(self) -> Status: ...
    def ticks_run(self) -> int: ...
    def gaps(self) -> int: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Signal:
    """A plotted signal: what the target calls it (a value or a port name) and its label."""

    key: Any
    label: str


def fault_text(fault: ProgramFault, task_names: Sequence[str]) -> str:
    """"SIGSEGV in task 1 (victim) at tick 5": what the FAULTED banner says."""
    if fault.task is None:
        where = "the program"
    else:
        name = task_names[fault.task] if fault.task < len(task_names) else ""
        where = f"task {fault.task}" + (f" ({name})" if name else "")
    when = f" at tick {fault.tick}" if fault.tick is not None else ""
    return f"{fault.kind} in {where}{when}"


class _Rows:
    """New rows of a trace (``trace.time`` and ``trace[key]``): those of ticks after the
    last one taken, as a Batch; columns of array signals become one column per element."""

    def __init__(self, trace: Any, signals: Sequence[Signal], tick_s: float) -> None:
        self.trace, self.signals, self.tick_s = trace, list(signals), tick_s
        self.last = -1
        self.gaps = 0  # ticks missing between taken rows (events the link dropped)

    def _snapshot(self) -> tuple[NDArray[np.float64], list[Any]]:
        """Times and columns of the same rows: a streamed trace grows (and drops its oldest
        rows) between two reads, so read the times again until they did not change."""
        times = np.asarray(self.trace.time, dtype=np.float64)
        while True:
            cols = [np.asarray(self.trace[s.key]) for s in self.signals]
            again = np.asarray(self.trace.time, dtype=np.float64)
            if len(again) == len(times) and all(len(c) == len(times) for c in cols) and (
                    not len(times) or (again[0] == times[0] and again[-1] == times[-1])):
                return times, cols
            times = again

    def take(self) -> Batch | None:
        times, cols = self._snapshot()
        ticks = np.rint(times / self.tick_s).astype(np.int64)
        new = ticks > self.last
        if not new.any():
            return None
        first = int(np.argmax(new))
        ticks = ticks[first:]
        # ticks missing before each row (before the first one taken: none known)
        lost = np.diff(ticks, prepend=ticks[0] - 1 if self.last < 0 else self.last) - 1
        self.gaps += int(lost.sum())
        self.last = int(ticks[-1])
        columns: dict[str, NDArray[np.float64]] = {}
        for s, whole in zip(self.signals, cols, strict=True):
            col = whole[first:].astype(np.float64)
            if col.ndim == 1:
                columns[s.label] = col
            else:
                flat = col.reshape(len(col), -1)
                columns.update({f"{s.label}[{k}]": flat[:, k] for k in range(flat.shape[1])})
        return Batch(ticks, columns, lost.astype(np.int64) if lost.any() else None)


def labels_of(signals: Sequence[Signal], trace: Any) -> list[str]:
    """The column labels of the traced signals (an array signal has one per element)."""
    labels = []
    for s in signals:
        shape = np.asarray(trace[s.key]).shape[1:]
        size = int(np.prod(shape)) if shape else 0
        labels += [f"{s.label}[{k}]" for k in range(size)] if size else [s.label]
    return labels


class SteppedSource:
    """A LocalTarget with deployed tasks, stepped by the scope's thread: in real time
    (``realtime=True``: as many ticks as wall time has passed) or as fast as it runs. Every
    tick is recorded by the target's trace and taken from it after each step (a step is at
    most CHUNK ticks; the trace holds 2 CHUNK)."""

    def __init__(self, target: Any, signals: Sequence[Signal], realtime: bool = True) -> None:
        self.target = target
        self.tick_s = float(target.tick)
        self.realtime = realtime
        self.rows = _Rows(target.trace(*[s.key for s in signals], capacity=2 * CHUNK),
                          signals, self.tick_s)
        self.labels = labels_of(signals, self.rows.trace)
        self.task_names = [t.name for t in target.stats()]
        self.pending: collections.deque[tuple[Any, Any]] = collections.deque()
        self.running = True
        self.fault: str | None = None
        self.error: str | None = None
        self.origin = (time.monotonic(), self.ticks_run())

    def ticks_run(self) -> int:
        return round(float(self.target.time) / self.tick_s)

    def gaps(self) -> int:
        """Ticks missing between those taken (none: each step is read whole)."""
        return self.rows.gaps

    def poll(self) -> Batch | None:
        while self.pending:  # writes land between two steps (the target is not shared)
            key, value = self.pending.popleft()
            try:
                self.target.write(key, value)
            except Exception as exc:  # a bad value typed into the page: say so, go on
                self.error = f"write {key!r} = {value!r}: {exc}"
        if not self.running or self.fault is not None:
            time.sleep(0.02)
            return None
        ticks = CHUNK
        if self.realtime:
            t0, n0 = self.origin
            due = n0 + int((time.monotonic() - t0) / self.tick_s) - self.ticks_run()
            ticks = min(CHUNK, due)
            if ticks <= 0:
                time.sleep(min(0.01, self.tick_s))
                return None
        try:
            self.target.step(ticks * self.tick_s)
        except ProgramFault as fault:
            self.fault = fault_text(fault, self.task_names)
        return self.rows.take()

    def write(self, key: Any, value: float | int | bool) -> None:
        self.pending.append((key, value))

    def start(self) -> None:
        if not self.running:
            self.origin = (time.monotonic(), self.ticks_run())
            self.running = True

    def stop(self) -> None:
        self.running = False

    def status(self) -> Status:
        if self.fault is not None:
            return Status("FAULTED", self.fault)
        return Status("running" if self.running else "stopped", self.error or "")

    def close(self) -> None:
        self.running = False


class StreamedSource:
    """A SerialTarget's program, streamed by its runner every tick (STREAM, decimation 1):
    the runner sends each tick's values; the scope's thread takes the new ones from the
    stream trace. Its state comes from FAULT events and the runner's HELLO (once a second);
    a failed request means the link is lost."""

    def __init__(self, target: Any, signals: Sequence[Signal], capacity: int | None = None
                 ) -> None:
        self.target = target
        self.tick_s = target.tick_ns * 1e-9
        # the ticks of a stall up to STALL_BOUND_S arrive at once when the host resumes:
        # hold them and a margin (polled every 20 ms, decoded whole: not much more)
        capacity = capacity or max(1000, min(100_000, int((STALL_BOUND_S + 3.0) / self.tick_s)))
        self.task_names = [t.name for t in target.stats()]
        self.rows = _Rows(target.trace(*[s.key for s in signals], decimation=1,
                                       capacity=capacity), signals, self.tick_s)
        self.labels = labels_of(signals, self.rows.trace)
        self.fault: str | None = None
        self.lost: str | None = None
        self.state = target.info().state
        self.checked = time.monotonic()
        self._chain_fault(target)

    def _chain_fault(self, target: Any) -> None:
        before: Callable[[ProgramFault], Any] | None = target.on_fault

        def on_fault(fault: ProgramFault) -> None:
            self.fault = fault_text(fault, self.task_names)
            if before is not None:
                before(fault)

        target.on_fault = on_fault

    def _request(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # any failure of the link: the banner says so
            self.lost = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return None

    def poll(self) -> Batch | None:
        time.sleep(0.02)
        if self.lost is None and time.monotonic() - self.checked > 1.0:
            self.checked = time.monotonic()
            info = self._request(self.target.info)
            if info is not None:
                self.state = info.state
                if info.state == "faulted" and self.fault is None:
                    fault = self._request(lambda: self.target.fault)
                    if fault is not None:
                        self.fault = fault_text(fault, self.task_names)
        return self.rows.take()

    def write(self, key: Any, value: float | int | bool) -> None:
        self._request(lambda: self.target.write(key, value))

    def start(self) -> None:
        self._request(self.target.start)
        if self.lost is None:
            self.state = "running"

    def stop(self) -> None:
        self._request(self.target.stop)
        if self.lost is None:
            self.state = "stopped"

    def status(self) -> Status:
        if self.lost is not None:
            return Status("link lost", self.lost)
        if self.fault is not None or self.state == "faulted":
            return Status("FAULTED", self.fault or "")
        return Status(self.state)

    def gaps(self) -> int:
        """Ticks missing from the stream: events the runner dropped or discarded (the host
        stalled longer than STALL_BOUND_S) or the stream trace overflowed."""
        return self.rows.gaps

    def ticks_run(self) -> int:
        stats = self._request(self.target.runner_stats)
        return int(stats.ticks) if stats is not None else -1

    def close(self) -> None:
        """The target stays connected and keeps streaming (the caller owns it)."""
