"""LocalTarget: compile and run programs in this process (native code or an emulated CPU).

Two modes: ``compile()`` + ``run()`` executes a computation on request; ``deploy()`` +
``step()`` runs periodic tasks with LET semantics in simulated time (docs/realtime.md).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast, overload

from . import dtypes as dt
from ._contract import DType as Code
from .arch.features import base_of
from .arch.targets import by_name
from .array_update import EPOCH
from .arrays import Array
from .checks import bind_range, folded
from .checks import check as range_check
from .compiler import CompiledProgram, compile_program, compile_tasks
from .compiler.layout import ROLE_INPUT, Port
from .image import parse as parse_image
from .io import Channel, check_binding, checked_channel
from .io_plan import CopyPlan, copy_plan
from .keep_state import KeptState, needs_running, plan, report
from .loading import load_program
from .plot import step_plot
from .quaternions import Quaternion
from .runtime.errors import NotComputedError, TargetError
from .runtime.load import (
    LoadedProgram,
    Scheduler,
    check_architecture,
    fastest_host_architecture,
    host_architecture,
)
from .saved import Program, array_specs, with_arrays, write_image
from .scope import Scope, open_scope
from .target_common import (
    Named,
    TaskStats,
    bound_inputs,
    check_bound_outputs,
    check_unbound,
    checked_io_write,
    checked_scalar,
    elements,
    find_port,
    io_specs,
    numbers_of,
    remove_binding,
    slots_of,
    task_specs,
    task_stats,
    to_ns,
    trace_key,
    trace_ranges,
)
from .task import Task
from .trace import Trace, ring_rows
from .value import Value, flatten

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from ._lazy import numpy as np

__all__ = ["LocalTarget", "TargetError", "Trace", "host_architecture"]

#: trace ranges the scheduler records per row (CP_MAX_TRACE_RANGES, runner/include/copapy/runner.h)
TRACE_RANGES = 64


class LocalTarget:
    """Compile values into machine code and run them in this process.

    ``arch`` defaults to the widest stencil table this machine's CPU runs (x86_64-v4 on an
    AVX-512 machine: native execution, the same results bit for bit as the base table, and
    ``save`` still writes the base table's build); other architectures run on an emulator
    (``pip install 'copapy[emu]'``). ``tick`` (seconds) is the scheduler's
    time step for ``deploy``/``step``: every task period must be a multiple of it.
    ``measure=False`` skips timing each run (faster simulation; stats report 0 ns).
    """

    def __init__(self, arch: str | None = None, tick: float | None = None,
                 measure: bool = True) -> None:
        self.arch = check_architecture(arch) if arch is not None else fastest_host_architecture()
        #: the table save() writes: the one asked for, else the base table, which every CPU of
        #: the architecture runs (a saved program is meant to move)
        self._save_arch = self.arch if arch is not None else host_architecture()
        #: the last compile or deploy for another table (save() of a defaulted target)
        self._rebuild: Callable[[str], CompiledProgram] | None = None
        #: measure each run's wall time for stats() (one clock read per run, plus one per tick
        #: with releases)
        self.measure = measure
        if tick is not None and (isinstance(tick, bool) or not isinstance(tick, numbers.Real)):
            raise TypeError(f"tick is a number of seconds (e.g. tick=1e-3), got "
                            f"{type(tick).__name__} {tick!r}")
        if tick is not None and not tick > 0:
            raise ValueError(f"tick must be > 0 seconds, got {tick!r}")
        self.tick: float | None = None if tick is None else float(tick)
        self._compiled: CompiledProgram | None = None
        self._program: LoadedProgram | None = None
        self._ports: dict[Any, Port] = {}
        #: inputs the program does not depend on (e.g. simplified away): writes are kept here
        self._detached: dict[Any, float | int | bool] = {}
        self._bound_inputs: dict[Any, Channel] = {}
        self._bindings: dict[Any, Channel] = {}
        self._fast_read: dict[Any, tuple[int, int]] = {}
        #: computed outputs with no value yet (Port.needs_run): not in _fast_read until the
        #: first run (compile) or their task's first publish (deploy); see _computed
        self._pending: dict[Any, Port] = {}
        self._fast_write: dict[Any, tuple[int, int, type]] = {}
        #: copy plans of arrays, quaternions and port names read or written (io_plan), by
        #: id (the name for a port name) -> (the value, its plan or None: copied port by port)
        #: (the array, its plan, the count of assignments then: after an assignment into
        #: arrays, array_update.EPOCH, plans are made again)
        self._read_plans: dict[Any, tuple[Any, CopyPlan | None, int]] = {}
        self._write_plans: dict[Any, tuple[Any, CopyPlan | None, int]] = {}
        self._sched: Scheduler | None = None
        self._tasks: list[Named] = []
        #: drive()'s sources by the driven value's key (trace_key): one each, the last given
        self._callbacks: dict[Any, tuple[Value[Any] | Array, Callable[[float], Any]]] = {}
        #: (value, samples, first tick): a deploy restarts them at tick 0
        self._feeds: dict[Any, tuple[Value[Any] | Array, Any, int]] = {}
        self._trace: Trace | None = None
        #: the channels the deployed image binds, by image (io_value/set_io check them)
        self._bound: tuple[bytes, set[tuple[int, int]]] | None = None
        #: changes whenever recorded trace rows may change other than by new ticks
        self._trace_epoch = 0

    def __reduce__(self) -> tuple[Any, ...]:
        """A target pickles as its settings and its program's image bytes (what ``save``
        writes): unpickled, e.g. on a Dask worker, it runs the same program, its ports read
        and written by name; the state of the data region and traces stay behind."""
        image = None
        if self._compiled is not None:
            image = self._compiled.image
            if self._rebuild is not None:  # the port names and arrays save() writes
                image = with_arrays(image, array_specs(self._compiled, {}))
        return (_restored, (self.arch, self.tick, self.measure, image))

    # ---- on-request programs -------------------------------------------------------------

    def compile(self, *values: Value[Any] | Array | Quaternion, check: bool = False) -> None:
        """Compile values, arrays or quaternions (and all they depend on) into one program.

        ``check=True`` runs the range analysis first (cp.check: RangeError for an operation
        whose operand ranges admit a domain error) and folds the comparisons the ranges
        decide."""
        if not values:
            raise TargetError("compile() needs at least one value to compute")
        flat = flatten(values, "compile()")
        fold = folded(flat, range_check(*values)) if check else None
        compiled = compile_program(flat, self.arch, fold=fold)
        program = load_program(compiled.image, self.arch, own_code=True)
        self._install(compiled, program)
        self._bind_run(self._first_run if self._pending else program.run)
        self._rebuild = lambda arch: compile_program(flat, arch)

    def run(self, task: int = 0) -> None:
        """Execute the compiled program once."""
        _nothing_compiled(task)

    def _first_run(self, task: int = 0) -> None:
        """The first run: afterwards every output holds a value, and ``run`` is the program's."""
        assert self._program is not None
        self._program.run(task)
        self._computed(list(self._pending))
        self._bind_run(self._program.run)

    def _bind_run(self, run: Callable[[int], None]) -> None:
        """``run`` becomes the loaded program's own entry point: no Python frame between the
        caller and the program (a frame cost 55 of a run's 100 ns here, RESULTS.md)."""
        vars(self)["run"] = run

    # ---- periodic tasks ------------------------------------------------------------------

    def bind(self, value: Value[Any], channel: Channel) -> None:
        """Connect a value to an I/O channel: an input (cp.value) reads it at each release of
        the tasks using it; a task output drives it at the end of the task's period. Bindings
        are part of the next deploy (as on a SerialTarget); the deployed program keeps its
        own."""
        if not isinstance(value, Value) or not isinstance(channel, Channel):
            raise TypeError("bind(value, channel) takes a copapy value and a cp.io channel")
        check_binding(self._bindings, value.node, value.node.op == "input", channel)
        bind_range(value.node, channel)
        self._bindings[value.node] = channel

    def unbind(self, value: Value[Any] | None = None) -> None:
        """Remove ``value``'s binding (all bindings without an argument) for the next deploy,
        e.g. to deploy another program that binds the same channel; the deployed program
        keeps driving and reading its channels until then."""
        remove_binding(self._bindings, value, TargetError)

    def deploy(self, *items: Task | Program, check: bool = False,
               keep_state: bool = False) -> KeptState | None:
        """Compile and load periodic tasks; simulated time starts at 0. ``check=True``: the
        range analysis first (cp.check, with the bound channels' ranges).

        ``keep_state=True`` (an online change, between two steps): every signal state of the
        deployed program whose name, task, type and size match one of the new program goes
        on with its value instead of its init (a bumpless gain change); returns what was
        carried and warns (StateNotCarried) about the rest (docs/guide signals page).

        A saved program (``cp.load(path)``) is loaded as it is: periodic tasks run with
        ``step`` (the tick defaults to the program's), one run on request with ``run``; its
        ports are read and written by name (``tg.read("speed")``).
        """
        if keep_state:
            needs_running(self._compiled is not None and self._sched is not None,
                          "a LocalTarget")
        if len(items) == 1 and isinstance(items[0], Program):
            if keep_state:
                raise TargetError("deploy(keep_state=True) takes cp.Task objects; a saved "
                                  "program is deployed as it is")
            self._deploy_program(items[0])
            return None
        if any(isinstance(t, Program) for t in items):
            raise TypeError("deploy() takes cp.Task objects or one saved program, not both")
        tasks = cast(tuple[Task, ...], items)  # task_specs checks the types
        if self.tick is None:
            raise TargetError("deploy() needs the scheduler tick: LocalTarget(tick=1e-3)")
        tick_ns = to_ns(self.tick)
        specs = task_specs(tasks)
        for k, (t, spec) in enumerate(zip(tasks, specs, strict=True)):
            # the schedulers rely on this (runtime/pysched.py does not check it again)
            if spec.period_ns % tick_ns or spec.offset_ns % tick_ns:
                raise TargetError(f"task {t.name or k}: period {t.period} s and offset "
                                  f"{t.offset} s must be multiples of the tick {self.tick} s")
        io = io_specs(self._bindings)
        check_bound_outputs(specs, self._bindings, TargetError)
        if check:
            range_check(*[Value(n) for t in specs for n in t.outputs], bindings=self._bindings)
        compiled = compile_tasks(specs, self.arch, io, fold_releases=True)
        program = load_program(compiled.image, self.arch, own_code=True)
        sched = program.scheduler(tick_ns, deterministic=True, measure=self.measure)
        kept = plan(self.image, compiled.image) if keep_state else None
        carried = [self._bytes(o, n) for o, _, n in kept.copies] if kept else []
        channels = self._channel_values() if keep_state else {}
        self._install(compiled, program,
                      bound_inputs(compiled.image, compiled.ports) if io else None)
        for (_, offset, _), data in zip(kept.copies if kept else (), carried, strict=True):
            self._put_bytes(offset, data)
        self._bind_run(program.run)
        self._rebuild = lambda arch: compile_tasks(specs, arch, io, fold_releases=True)
        self._sched = sched
        for (kind, number), value in channels.items():
            sched.io_write(kind, number, value)
        self._tasks = list(tasks)
        self._trace_epoch += 1
        self._feeds = {k: (v, samples, 0) for k, (v, samples, _) in self._feeds.items()}
        self._refeed()
        return report(kept) if kept else None

    def _channel_values(self) -> dict[tuple[int, int], float]:
        """The simulated channels the deployed program binds, with their values: an online
        change (keep_state) goes on with them, as a runner's physical channels do (an input
        reads what it read; an output keeps its value until the new program publishes)."""
        sched = self._scheduler()
        return {(b.kind, b.channel): float(sched.io_read(b.kind, b.channel))
                for b in parse_image(self.image).io_bindings}

    def step(self, seconds: float) -> None:
        """Advance simulated time by ``seconds`` (a whole number of ticks).

        Afterwards every output of a period that ended at or before the new time is visible.
        """
        sched = self._scheduler()
        assert self.tick is not None
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
            raise TypeError(f"step(seconds) takes a number of seconds, got "
                            f"{type(seconds).__name__} {seconds!r}")
        if not seconds >= 0:
            raise ValueError(f"step({seconds}): simulated time only moves forward; the duration "
                             f"must be >= 0 (tg.reset() goes back to time 0)")
        ticks = round(seconds / self.tick)
        if not math.isclose(ticks * self.tick, seconds, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(f"step({seconds}) is not a whole number of ticks of {self.tick} s")
        if not self._callbacks:
            sched.advance(ticks)
        else:
            for _ in range(ticks):
                t = sched.time_ns * 1e-9
                for value, fn in list(self._callbacks.values()):
                    self._write(value, fn(t))
                sched.tick()
        # the outputs of every period that ended at the new time are visible now
        sched.settle()
        self._published()

    @property
    def time(self) -> float:
        """Simulated time of the next tick, in seconds."""
        return float(self._scheduler().time_ns) * 1e-9

    def stats(self) -> list[TaskStats]:
        """Per task: runs, skipped releases, overruns, max and mean execution time."""
        sched = self._scheduler()
        return task_stats(self._tasks, (sched.stats(k) for k in range(len(self._tasks))))

    def reset(self) -> None:
        """Back to time 0: inputs, state and outputs return to their initial values."""
        self._scheduler().reset()
        self._detached = {}  # the inputs the program does not read, too
        self._trace_epoch += 1
        self._pending_outputs()

    def drive(self, value: Value[Any] | Array, source: Any) -> None:
        """Drive an input per tick: a sequence/array of samples (one per tick from now on; an
        array input takes samples of shape ``(ticks, *input.shape)``), or a callback
        ``f(t_seconds) -> value`` called before each tick. Feeds and callbacks stay with the
        target: a later ``deploy`` starts them again at its time 0."""
        self._driven(value)
        key = trace_key(value)
        had_feed = self._feeds.pop(key, None) is not None
        self._callbacks.pop(key, None)
        if callable(source):
            self._callbacks[key] = (value, source)
        elif source is not None:
            first = self._sched.time_ns // to_ns(self.tick) if self._sched and self.tick else 0
            self._feeds[key] = (value, self._samples(value, source), first)
        elif not had_feed:
            return
        if self._sched is not None:
            self._refeed()

    def trace(self, *values: Value[Any] | Array | Quaternion | str,
              capacity: int = 100_000) -> Trace:
        """Record the values (scalars, arrays, quaternions; port names of a saved program)
        after every tick from now on (newest ``capacity`` ticks kept); ``trace[v]`` is one
        number per tick, or one array of ``v``'s shape per tick."""
        sched = self._scheduler()
        if not values:
            raise TargetError("trace() needs the values to record: tg.trace(x, y)")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"trace capacity is a number of rows >= 1, got {capacity!r}")
        slots = [slots_of(v, self._ports, self._port) for v in values]
        ranges = trace_ranges(slots, TRACE_RANGES, "a LocalTarget")
        self._end_trace()
        sched.set_trace(ranges, capacity)
        self._trace_epoch += 1
        self._trace = Trace(values, slots, capacity,
                            rows=self._trace_rows, dropped=lambda: self._scheduler().trace_dropped,
                            state=lambda: (self._trace_epoch, self._scheduler().trace_rows))
        return self._trace

    def plot(self, *values: Value[Any] | Array | Quaternion | str,
             labels: Sequence[str] | None = None, path: str | None = None,
             title: str = "") -> Any:
        """Plot traced values over simulated time (matplotlib); saves to ``path`` if given.
        An array is one line per element."""
        if self._trace is None:
            raise TargetError("nothing traced: call tg.trace(values) before tg.step()")
        trace = self._trace
        chosen = list(values) or trace.values
        if labels is not None and len(labels) != len(chosen):
            raise ValueError(f"plot() got {len(labels)} labels for {len(chosen)} values: give "
                             f"one label per value")
        columns = []
        for i, v in enumerate(chosen):
            col = trace[v]
            label = labels[i] if labels else self._label(v)
            if col.ndim == 1:
                columns.append((label, col))
            else:
                flat = col.reshape(len(col), -1)
                columns += [(f"{label}[{k}]", flat[:, k]) for k in range(flat.shape[1])]
        return step_plot(trace.time, columns, path=path, title=title)

    def scope(self, *signals: Value[Any] | Array | str,
              controls: Sequence[Value[Any] | str] | Mapping[str, Value[Any] | str] = (),
              ranges: Mapping[str, tuple[float, float]] | None = None,
              record: str | None = None, realtime: bool = True, port: int = 0,
              **named: Value[Any] | Array | str) -> Scope:
        """A live scope of the deployed tasks in the browser (``pip install
        'copapy[scope]'``): plots of ``signals`` (values, port names; ``label=value``), a
        slider per control input whose range ``ranges`` gives by label (else a number
        field), start/stop, the program's state and a recording of every tick (``record``:
        a .csv or .parquet file, or the page's button). From now on the scope steps the
        target in its own thread, in real time (``realtime=False``: as fast as it runs);
        do not step it yourself until ``close()``. Open ``.url`` (it carries the token);
        in Jupyter the returned object shows the page (guide: "Watch and tune a running
        program")."""
        self._scheduler()
        return open_scope(self, *signals, controls=controls, ranges=ranges, record=record,
                          realtime=realtime, port=port, named=named)

    def io_value(self, channel: Channel) -> float:
        """Current value of a simulated I/O channel (e.g. the recorded PWM duty)."""
        sched = self._scheduler()
        self._check_channel(channel, "io_value")
        return float(sched.io_read(channel.kind, channel.channel))

    def set_io(self, channel: Channel, value: float) -> None:
        """Set a simulated input channel (encoder counts, ADC reading, GPIO level)."""
        sched = self._scheduler()
        self._check_channel(channel, "set_io")
        channel, number = checked_io_write(channel, value)
        sched.io_write(channel.kind, channel.channel, number)

    def _check_channel(self, channel: Any, what: str) -> None:
        """TypeError for a non-channel; TargetError for a channel the deployed program has no
        binding for (writing it had no effect, reading it gave 0.0)."""
        checked_channel(channel, what)
        image = self.image
        if self._bound is None or self._bound[0] is not image:
            self._bound = (image, {(b.kind, b.channel) for b in parse_image(image).io_bindings})
        if (channel.kind, channel.channel) not in self._bound[1]:
            have = ", ".join(repr(Channel(k, c)).replace(", 'in'", "")
                             for k, c in sorted(self._bound[1])) or "none"
            raise TargetError(f"{channel!r}: no value of the deployed program is bound to it "
                              f"(bound channels: {have}); bind one with tg.bind(value, "
                              f"{channel!r}) before deploy()")

    # ---- common ----------------------------------------------------------------------------

    @property
    def image(self) -> bytes:
        """The program image (docs/image.md) of the last compile or deploy."""
        return self.program_info.image

    @property
    def program_info(self) -> CompiledProgram:
        if self._compiled is None:
            raise TargetError("nothing compiled yet: call tg.compile(values) or tg.deploy(tasks)")
        return self._compiled

    @overload
    def read(self, v: Value[Any]) -> float | int | bool: ...
    @overload
    def read(self, v: Array | Quaternion) -> NDArray[Any]: ...
    @overload
    def read(self, v: Any, *more: Any) -> tuple[Any, ...]: ...
    def read(self, v: Any, *more: Any) -> Any:
        """Current value of an input or a computed value (see ``_read``); several at once,
        ``tg.read(a, b)``, as a tuple."""
        if more:
            return tuple(self.read(x) for x in (v, *more))
        if type(v) is Value:
            where = self._fast_read.get(v.node)
            if where is not None:
                return self._program.read(*where)  # type: ignore[union-attr]
        else:
            entry = self._read_plans.get(v if type(v) is str else id(v))
            if (entry is not None and entry[0] is v and entry[1] is not None
                    and entry[2] == EPOCH[0]):
                return entry[1].read()
        return self._read(v)

    def write(self, v: Any, x: Any, *more: Any) -> None:
        """Set an input (a ``cp.value``, or an input array); tasks see it at their next
        release. Several at once: ``tg.write(a, xa, b, xb)``."""
        if more:
            if len(more) % 2:
                raise TypeError("write() takes (input, value) pairs: tg.write(a, xa, b, xb); "
                                f"got {len(more) + 2} arguments")
            pairs = (v, x, *more)
            for k in range(0, len(pairs), 2):
                self.write(pairs[k], pairs[k + 1])
            return
        if type(v) is Value:
            where = self._fast_write.get(v.node)
            if where is not None and type(x) is where[2]:
                self._program.write(where[0], where[1], x)  # type: ignore[union-attr]
                return
        else:
            entry = self._write_plans.get(v if type(v) is str else id(v))
            if (entry is not None and entry[0] is v and entry[1] is not None
                    and entry[2] == EPOCH[0]):
                entry[1].write(x)
                return
        self._write(v, x)

    def _read(self, v: Any) -> Any:
        """Current value of an input or a computed value: a Python number for a scalar, a NumPy
        array for a vector or matrix (a copy), a NumPy array of 4 for a quaternion.

        For deployed tasks this is the LET-visible value: what the producing task published at
        the end of its last completed period.
        """
        if isinstance(v, Array | Quaternion | str):
            plan = self._plan(v, self._read_plans, write=False)
            if plan is not None:
                return plan.read()
        if isinstance(v, Array):
            return self._read_array(v)
        if isinstance(v, str):
            return self._read_named(v)
        if isinstance(v, Quaternion):
            return np.array([self.read(c) for c in v.components()], dtype=v.w.dtype.numpy)
        if isinstance(v, Value) and v.node not in self._ports and v.node.op == "input":
            return self._detached.get(v.node, v.node.dtype.unpack(v.node.attr[2]))  # type: ignore[index]
        port = self._port(v)
        self._check_computed(v, v.node)
        assert self._program is not None
        result: float | int | bool = self._program.read(port.offset, port.dtype.code)
        return result

    def _write(self, v: Any, x: Any) -> None:
        if self._compiled is None:
            raise TargetError("nothing compiled yet: call tg.compile(values) or tg.deploy(tasks) "
                              "before writing inputs (the program starts from its initial "
                              "values)")
        if isinstance(v, Array | str):
            plan = self._plan(v, self._write_plans, write=True)
            if plan is not None:
                plan.write(x)
                return
        if isinstance(v, Array):
            self._write_array(v, x)
            return
        if isinstance(v, str):
            self._write_named(v, x)
            return
        if isinstance(v, Value) and v.node not in self._ports and v.node.op == "input":
            # the program does not depend on this input: accept the value, nothing to do
            self._detached[v.node] = checked_scalar(x, v.node.dtype)
            return
        if isinstance(v, Value):
            check_unbound(self._bound_inputs, v.node, v, TargetError)
        self._write_port(v, x)

    def save(self, path: str) -> Program:
        """Write the program of the last compile or deploy to ``path`` (``cp.load`` reads it;
        ``copapy run`` and ``copapy-runner --image`` run it). A target whose arch was not
        given writes the base table's build of it (same results), so that the file runs on
        every CPU of the architecture, not only on CPUs like this one."""
        image, compiled = self.image, self._compiled
        if self._save_arch != self.arch and self._rebuild is not None:
            compiled = self._rebuild(self._save_arch)
            image = compiled.image
        if compiled is not None and self._rebuild is not None:  # not a loaded program's own
            image = with_arrays(image, array_specs(compiled, {}))
        write_image(path, image)
        return Program(image, path)

    # ---- internals -------------------------------------------------------------------------

    def _deploy_program(self, prog: Program) -> None:
        if prog.arch != base_of(by_name(self.arch)).name:
            raise TargetError(f"{prog.source} holds {prog.arch} code; this target runs "
                              f"{self.arch}: LocalTarget(arch={prog.variant!r})")
        program = load_program(prog.image, prog.variant)
        sched = None
        if prog.periodic:
            tick = self.tick if self.tick is not None else prog.tick
            tick_ns = to_ns(tick)
            if prog.tick_ns % tick_ns:
                raise TargetError(f"{prog.source}: its task periods and offsets are not "
                                  f"multiples of the tick {tick} s")
            self.tick = tick
            sched = program.scheduler(tick_ns, deterministic=True, measure=self.measure)
        self._bindings = {}
        compiled = prog.compiled()
        self._install(compiled, program,
                      bound_inputs(prog.image, compiled.ports) if prog.bindings else None)
        self._bind_run(program.run)
        self._rebuild = None  # save() writes the program as it was loaded
        self._sched = sched
        self._tasks = list(prog.tasks)
        self._trace_epoch += 1

    def _read_named(self, name: str) -> Any:
        slots = slots_of(name, self._ports, self._port)  # a port, or an array's (cp.load)
        return slots.decode(b"".join(self._bytes(o, n) for o, n in slots.ranges()))

    def _write_named(self, name: str, x: Any) -> None:
        slots = slots_of(name, self._ports, self._port)
        if any(port.role != ROLE_INPUT for port in slots.ports):
            raise TargetError(f"port {name!r} is computed by the program; only inputs can be "
                              f"written")
        for port in slots.ports:
            check_unbound(self._bound_inputs, port.name, name, TargetError)
        for offset, data in slots.encode(x):
            self._put_bytes(offset, data)

    def _read_array(self, a: Any) -> Any:
        items = elements(a, self._ports)
        if items is not None:  # one dtype rule for both forms: the array's own
            return np.array([self.read(item) for item in items],
                            dtype=dt.numpy_type(a.dtype)).reshape(a.shape)
        node = a.node()
        port = self._ports.get(node)
        if port is None:
            raise TargetError(f"{a!r} is not part of the compiled program: pass it to "
                              f"tg.compile() or make it a task output")
        self._check_computed(a, node)
        return dt.from_storage(self._bytes(port.offset, node.nbytes), node.dtype, node.shape)

    def _write_array(self, a: Any, x: Any) -> None:
        values = numbers_of(x, a.dtype, a.shape)
        if values.shape != a.shape:
            raise ValueError(f"writing shape {values.shape} into an input of shape {a.shape}")
        node = a.node()
        if not a.packed or (node.op == "stack" and all(x.op == "input" for x in node.args)):
            for item, v in zip(a.items() if not a.packed else
                               [Value(x) for x in node.args], values.reshape(-1), strict=True):
                self.write(item, v.item())
            return
        port = self._ports.get(node)
        if port is None or port.role != ROLE_INPUT:
            raise TargetError(f"{a!r} is not an input of the compiled program")
        self._put_bytes(port.offset, dt.storage_array(values, node.dtype).tobytes())

    def _plan(self, v: Array | Quaternion | str,
              plans: dict[Any, tuple[Any, CopyPlan | None, int]], write: bool
              ) -> CopyPlan | None:
        """The copy plan of ``v`` (made and kept in ``plans`` on first use); None where the
        element-wise path decides: an emulated program, an element the program does not hold,
        an output not computed yet, an element that is not a free input (for ``write``)."""
        key = v if isinstance(v, str) else id(v)
        epoch = EPOCH[0]
        entry = plans.get(key)
        if entry is not None and entry[0] is v and entry[2] == epoch:
            return entry[1]
        prog: Any = self._program
        if prog is None or hasattr(prog, "read_bytes"):
            return None
        try:
            slots = slots_of(v, self._ports, self._port)
        except TargetError:
            plans[key] = (v, None, epoch)
            return None
        if not write and any(k in self._pending for k in slots.key):
            return None  # NotComputedError now; a plan once computed
        bound = self._bound_inputs
        if write and (any(p.role != ROLE_INPUT or p.name in bound for p in slots.ports)
                      or any(k in bound for k in slots.key)):
            plan = None  # the element-wise path raises the error naming the element
        else:
            plan = copy_plan(memoryview(prog), slots)
        plans[key] = (v, plan, epoch)
        return plan

    def _bytes(self, offset: int, size: int) -> bytes:
        prog: Any = self._program
        if hasattr(prog, "read_bytes"):
            return bytes(prog.read_bytes(offset, size))
        return bytes(memoryview(prog)[offset:offset + size])

    def _put_bytes(self, offset: int, data: bytes) -> None:
        prog: Any = self._program
        if hasattr(prog, "write_bytes"):
            prog.write_bytes(offset, data)
        else:
            memoryview(prog)[offset:offset + len(data)] = data

    def _write_port(self, v: Value[Any], x: Any) -> None:
        port = self._port(v)
        if port.role != ROLE_INPUT:
            raise TargetError(f"{v!r} is computed by the program, not an input; only values made "
                              f"with cp.value() can be written")
        assert self._program is not None
        self._program.write(port.offset, port.dtype.code, checked_scalar(x, port.dtype))

    def _install(self, compiled: CompiledProgram, program: LoadedProgram,
                 bound: dict[Any, Channel] | None = None) -> None:
        # only now replace the running program: a failed compile or load leaves it intact
        self._end_trace()
        #: inputs an I/O binding fills at every release (node or name -> channel)
        self._bound_inputs = bound or {}
        self._compiled = compiled
        self._program = program
        self._ports = compiled.ports
        self._detached = {}
        self._read_plans = {}
        self._write_plans = {}
        self._sched = None
        # the common cases as one dict lookup: scalar ports, and inputs of a matching type
        self._fast_read = {n: (p.offset, p.dtype.code) for n, p in compiled.ports.items()
                           if p.count == 1}
        self._pending_outputs()
        python_type: dict[int, type] = {Code.F32: float, Code.F64: float, Code.I32: int,
                                        Code.BOOL: bool}
        self._fast_write = {n: (p.offset, p.dtype.code, python_type[p.dtype.code])
                            for n, p in compiled.ports.items()
                            if p.count == 1 and p.role == ROLE_INPUT and n not in self._bindings
                            and n not in self._bound_inputs}

    def _pending_outputs(self) -> None:
        """Every computed output without a value yet: before the first run or publish."""
        self._pending = {n: p for n, p in self._ports.items() if p.needs_run}
        for node in self._pending:
            self._fast_read.pop(node, None)
        # a plan reads its slots without asking: an array output must raise NotComputedError
        # again after a reset, so plans are made again (_plan declines pending outputs)
        self._read_plans = {}

    def _computed(self, nodes: Sequence[Any]) -> None:
        """These outputs hold what the program computed from now on: read them directly."""
        for node in nodes:
            port = self._pending.pop(node)
            if port.count == 1:
                self._fast_read[node] = (port.offset, port.dtype.code)

    def _published(self) -> None:
        """The pending task outputs whose task's first period has ended (LET publish)."""
        if not self._pending or self._sched is None:
            return
        now = self._sched.time_ns
        tasks = self.program_info.tasks
        self._computed([n for n, p in self._pending.items()
                        if now >= tasks[p.task].offset_ns + tasks[p.task].period_ns
                        and self._has_published(p.task)])

    def _has_published(self, task: int) -> bool:
        """Whether ``task`` has published once: a first job that overran its period publishes
        later (the slot held 0 until then, which read as a computed value); a task is released
        only when its last job has published, so a second run means the first published."""
        sched = self._scheduler()
        runs = sched.stats(task)[0]
        return runs > 1 or (runs == 1 and not sched.pending(task))

    def _check_computed(self, v: Any, node: Any) -> None:
        """NotComputedError for an output read before the program ever computed it."""
        port = self._pending.get(node)
        if port is None:
            return
        if self._sched is None:
            raise NotComputedError(f"{v!r} has not been computed yet: the program has not run; "
                                   f"call tg.run() first (outputs of feedback, delay and "
                                   f"integrate read their init before the first run)")
        t = self.program_info.tasks[port.task]
        end_ns = t.offset_ns + t.period_ns
        if self._scheduler().time_ns >= end_ns:
            raise NotComputedError(f"{v!r} has not been computed yet: the first job of task "
                                   f"{t.name!r} has overrun its period and not published; "
                                   f"tg.step() further, and see tg.stats() (overruns) and the "
                                   f"task's wcet")
        raise NotComputedError(f"{v!r} has not been computed yet: task {t.name!r} publishes it "
                               f"at the end of its first period, {end_ns * 1e-9:g} s, and the "
                               f"simulated time is {self.time:g} s; "
                               f"tg.step({(end_ns - self._scheduler().time_ns) * 1e-9:g}) first")

    def _scheduler(self) -> Scheduler:
        if self._sched is None:
            raise TargetError("no tasks deployed: call tg.deploy(cp.Task(..., period=...)) first")
        return self._sched

    def _end_trace(self) -> None:
        """The current trace keeps what it recorded; the ring is reused or replaced next."""
        if self._trace is not None:
            self._trace.freeze()
            self._trace = None

    def _driven(self, value: Any) -> None:
        """TypeError or TargetError unless ``value`` is an input drive() may feed."""
        if not isinstance(value, Value | Array):
            raise TypeError(f"drive() takes a cp.value() input (or an input array), got "
                            f"{type(value).__name__}")
        items: list[Value[Any] | Array] = [value]
        if isinstance(value, Array):
            items = list(elements(value, self._ports) or items)
        for item in items:
            node = item.node if isinstance(item, Value) else item.node()
            if node.op != "input":
                raise TargetError(f"{item!r} is not an input: only cp.value() inputs can be "
                                  f"driven")
            if node in self._bindings:
                raise TargetError(f"{item!r} is bound to {self._bindings[node]!r}; drive the "
                                  f"channel with tg.set_io() instead")

    @staticmethod
    def _samples(value: Value[Any] | Array, source: Any) -> Any:
        """The samples of a feed as rows of elements (ticks x elements, storage dtype)."""
        shape = value.shape if isinstance(value, Array) else ()
        data = np.asarray(source)
        if data.ndim == len(shape) and not shape:
            data = data.reshape(1)  # one number: one sample
        if data.shape[1:] != shape or data.ndim != len(shape) + 1:
            want = "(ticks,)" if not shape else f"(ticks, {', '.join(map(str, shape))})"
            raise ValueError(f"drive() samples of a {'scalar' if not shape else shape} input "
                             f"have shape {want}, one sample per tick; got shape {data.shape}")
        return dt.storage_array(data, value.dtype).reshape(len(data), -1)

    def _refeed(self) -> None:
        """The scheduler's feeds: those of ``_feeds``, from their first ticks."""
        sched = self._scheduler()
        sched.clear_feeds()
        for value, samples, first in self._feeds.values():
            self._add_feed(value, samples, first)

    def _add_feed(self, value: Value[Any] | Array, samples: Any, first: int) -> None:
        """Feed the program's slots of ``value``; an input the program does not read (not
        part of it, e.g. simplified away) is accepted as tg.write accepts it: no effect."""
        items = ((elements(value, self._ports) if isinstance(value, Array) else None)
                 or [value if isinstance(value, Value) else Value(value.node())])
        # (offset, size, first column, columns) of each run of neighbouring slots
        runs: list[tuple[int, int, int, int]] = []
        for k, item in enumerate(items):
            port = self._ports.get(item.node)
            if port is None:
                continue
            size, n = port.count * port.dtype.size, port.count
            last = runs[-1] if runs else None
            if last and last[0] + last[1] == port.offset and last[2] + last[3] == k:
                runs[-1] = (last[0], last[1] + size, last[2], last[3] + n)
            else:
                runs.append((port.offset, size, k, n))
        sched = self._scheduler()
        for offset, size, column, n in runs:
            try:
                sched.add_feed(offset, size,
                               np.ascontiguousarray(samples[:, column:column + n]).tobytes(),
                               first)
            except ValueError as exc:
                raise TargetError(f"cannot drive {value!r}: {exc} (one feed per driven input, "
                                  f"and an unpacked array input takes one per run of "
                                  f"neighbouring elements: drive a packed array, "
                                  f"cp.value(np_array), instead)") from exc

    def _label(self, v: Any) -> str:
        """A plot label: the port's name, or the value's repr."""
        if isinstance(v, str):
            return v
        if isinstance(v, Value):
            return self._port(v).name
        return repr(v)

    def _trace_rows(self) -> bytes:
        """The trace ring's rows, oldest first."""
        sched = self._scheduler()
        return ring_rows(sched.trace_buffer(), sched.trace_capacity, sched.trace_rows,
                         sched.trace_row_size)

    def _port(self, v: Value[Any] | str) -> Port:
        port = find_port(self._ports, v)
        if port is None:
            if isinstance(v, str):
                names = ", ".join(k for k in self._ports if isinstance(k, str))
                raise TargetError(f"no port named {v!r} in the loaded program"
                                  + (f"; it has {names}" if names else
                                     " (ports have names in saved programs: cp.load)"))
            if self._compiled is None:
                raise TargetError("nothing compiled yet: call tg.compile(values) first")
            raise TargetError(f"{v!r} is not part of the compiled program: pass it to "
                              f"tg.compile() or make it a task output (inputs and outputs "
                              f"can be read)")
        return port


def _restored(arch: str, tick: float | None, measure: bool, image: bytes | None
              ) -> LocalTarget:
    """An unpickled LocalTarget: the same settings, its program loaded from the image."""
    tg = LocalTarget(arch, tick=tick, measure=measure)
    if image is not None:
        tg.deploy(Program(image, "<pickled LocalTarget>"))
    return tg


def _nothing_compiled(task: int = 0) -> None:
    raise TargetError("nothing compiled yet: call tg.compile(values) first")
