"""The engines that run a plan's scenarios; each returns the same bytes for the same plan.

* ``run_batch``: the batched C runner (``_runner.batch``): one call steps many scenarios of
  one loaded image, no Python per tick or per scenario;
* ``run_python``: the Python loop over the program's Scheduler (reset, write, advance,
  read per row): the reference the others are checked against;
* ``run_dask``: chunks of scenarios as tasks of a ``dask.distributed`` client, the plan
  (image bytes) shipped to every worker once, results in scenario order;
* ``run_ray``: the same chunks as Ray tasks (``engine="ray"``).

A scenario whose program faults does not end the sweep: its fault (kind, task, tick) is
returned with the results, the rows it recorded before the fault are kept, the rest of its
rows and its metrics are NaN (``split``; their bytes are NaN for floats, 0 for integers and
bools), and the next scenario runs (``fill``). Every engine gives the same bytes and the
same faults.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..loading import load_program
from ..runtime.errors import ProgramFault, TargetError
from ..runtime.load import is_native
from .lanes import LanePlan, from_lanes, to_lanes
from .plan import Field, Plan, decode

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

__all__ = ["ScenarioFault", "SweepFault", "run_batch", "run_dask", "run_python", "run_ray"]


class ScenarioFault(NamedTuple):
    """A scenario whose program faulted: its number in the sweep, the fault's kind (as
    ``cp.ProgramFault.kind``: "SIGSEGV", "timeout", ...), the task and the scheduler tick."""

    scenario: int
    kind: str
    task: int
    tick: int

    def __str__(self) -> str:
        return (f"scenario {self.scenario} faulted: {self.kind} in task {self.task} at tick "
                f"{self.tick}")


#: (series bytes, finals bytes, the faults in scenario order) of some scenarios
Raw = tuple[bytes, bytes, tuple[ScenarioFault, ...]]

#: a Dask task should run about this long: well above the scheduler's per-task overhead
#: (about 1 ms), short enough that a lost worker costs little
CHUNK_SECONDS = 0.5


class SweepFault(TargetError):
    """A scenario's program faulted and the sweep was asked to stop at a fault
    (``cp.sweep(..., on_fault="raise")``): ``fault`` is the first one, the message names
    it."""

    def __init__(self, fault: ScenarioFault, more: int = 0) -> None:
        self.fault = fault
        also = f" ({more} more scenarios faulted)" if more else ""
        super().__init__(f"{fault}{also}; on_fault='record' returns the results with the "
                         f"faults in result.faults")


_local = threading.local()


def _loaded(plan: Plan, lanes: LanePlan | None = None) -> Any:
    """The plan's program (or its lane program), loaded once per thread (a Dask worker's
    threads each own one)."""
    cache: dict[str, Any] = getattr(_local, "programs", None) or {}
    _local.programs = cache
    if cache.get("plan") != plan.digest:
        if not is_native(plan.variant):
            raise TargetError(f"the plan holds {plan.variant} code and this machine does not "
                              f"execute it natively: run the sweep on a {plan.variant} "
                              f"machine or worker")
        cache.clear()  # one plan at a time per thread: a worker does not keep old images
        cache["plan"] = plan.digest
    image, digest, variant = ((plan.image, plan.digest, plan.variant) if lanes is None
                              else (lanes.image, lanes.digest, lanes.variant))
    program = cache.get(digest)
    if program is None:
        program = cache[digest] = load_program(image, variant, own_code=plan.own_code)
    return program


def run_batch(plan: Plan, params: bytes, first: int = 0) -> Raw:
    """The batched C runner over the scenarios whose parameter rows ``params`` holds (the
    first is scenario number ``first`` of the sweep): batches of the plan's lanes side by
    side in its lane program (sweeps/lanes.py) where it has one and a batch is full enough,
    the others and every batch in which a lane faulted one scenario at a time."""
    lanes = plan.lanes
    if lanes is None or lanes.base != plan.digest or not is_native(lanes.variant):
        return run_scenarios(plan, params, first)
    row, n = plan.param_row, len(params) // max(1, plan.param_row)
    parts = []
    for at in range(0, n, lanes.count):
        m = min(lanes.count, n - at)
        chunk = params[at * row:(at + m) * row]
        raw = run_lanes(plan, lanes, chunk, m) if m >= min_fill(lanes.count) else None
        parts.append(raw if raw is not None else run_scenarios(plan, chunk, first + at))
    return join(parts)


def min_fill(count: int) -> int:
    """The fewest scenarios a batch of ``count`` lanes runs: it costs about as much as a
    quarter of its lanes run one at a time (benchmarks/RESULTS.md, "Lane sweeps")."""
    return max(1, count // 4)


def run_lanes(plan: Plan, lanes: LanePlan, params: bytes, m: int) -> Raw | None:
    """``m`` scenarios (at most the lanes) in one run of the lane program, the free lanes
    repeating the last scenario; None if a lane faulted (the caller runs the batch one
    scenario at a time, which finds each fault as the per-scenario engines do)."""
    from .. import _runner

    part, ends, _done, fault = _runner.batch(
        _loaded(plan, lanes), plan.tick_ns, plan.steps, plan.sample_ticks,
        [f.range for f in lanes.params], to_lanes(plan.params, params, m, lanes.count),
        [f.range for f in lanes.records], [f.range for f in lanes.finals])
    if fault is not None:
        return None
    return (from_lanes(lanes.records, part, (plan.steps,), m, lanes.count),
            from_lanes(lanes.finals, ends, (), m, lanes.count), ())


def run_scenarios(plan: Plan, params: bytes, first: int = 0) -> Raw:
    """The batched C runner over the scenarios whose parameter rows ``params`` holds, one
    after another on the plan's image (the first is scenario number ``first`` of the
    sweep). A fault ends a ``_runner.batch`` call
    at the faulting scenario: its rows are filled, its fault noted, and the next call starts
    with the scenario after it."""
    from .. import _runner

    row, n = plan.param_row, len(params) // max(1, plan.param_row)
    per_scenario = plan.steps * plan.record_row
    series, finals = bytearray(), bytearray()
    faults: list[ScenarioFault] = []
    at = 0
    with memoryview(params) as rows:
        while at < n:
            part, ends, done, fault = _runner.batch(
                _loaded(plan), plan.tick_ns, plan.steps, plan.sample_ticks,
                [f.range for f in plan.params], rows[at * row:], [f.range for f in plan.records],
                [f.range for f in plan.finals])
            if fault is None:
                series += part
                finals += ends
                break
            # scenario `done` of the call faulted in the tick fault[5]: its rows before that
            # tick's were recorded (row k holds ticks k * sample_ticks .. (k + 1) * sample_ticks
            # - 1); what the call wrote after them is not
            tick = int(fault[5])
            start = len(series) + done * per_scenario
            series += part[:(done + 1) * per_scenario]
            finals += ends[:done * plan.final_row]
            fill(plan, series, finals, start, tick // plan.sample_ticks)
            faults.append(ScenarioFault(first + at + done, str(fault[0]), int(fault[1]), tick))
            at += done + 1
    return bytes(series), bytes(finals), tuple(faults)


def fill(plan: Plan, series: bytearray, finals: bytearray, start: int, valid: int) -> None:
    """The scenario whose rows begin at ``series[start]`` faulted after ``valid`` recorded
    rows: the rest of ``series`` is cut and its later rows and its metrics are appended as
    NaN, 0 for integers and bools."""
    del series[start + valid * plan.record_row:]
    series += _blank(plan.records) * (plan.steps - valid)
    finals += _blank(plan.finals)


def _blank(fields: tuple[Field, ...]) -> bytes:
    """One row of ``fields`` standing for "not computed": NaN for floats, 0 otherwise."""
    out = bytearray()
    for f in fields:
        kind = f.dtype
        value = np.full(f.count, np.nan if kind.is_float else 0,
                        dtype="<i4" if kind.is_bool else kind.numpy)
        out += value.tobytes()
    return bytes(out)


def run_python(plan: Plan, params: bytes, first: int = 0) -> Raw:
    """The Python loop: the plan's program on its Scheduler (scheduler.c natively, the
    emulator's for another architecture), per scenario a reset, the simulated inputs at 0,
    the parameter bytes written, then per recorded row an ``advance`` and a ``settle`` (what
    LocalTarget.step does) and a read of every recorded range, all from Python."""
    program: Any = load_program(plan.image, plan.variant, own_code=plan.own_code)
    sched: Any = program.scheduler(plan.tick_ns, deterministic=True, measure=False)
    data = _Data(program)
    row = plan.param_row
    series, finals = bytearray(), bytearray()
    faults: list[ScenarioFault] = []
    for k in range(len(params) // row):
        sched.reset()
        for kind, channel in plan.inputs_io:  # the simulated world starts at rest too
            sched.io_write(kind, channel, 0.0)
        at = k * row
        for f in plan.params:
            data.write(f.offset, params[at:at + f.size])
            at += f.size
        start = len(series)
        for step in range(plan.steps):
            fault = _advance(sched, plan.sample_ticks)
            if fault is not None:
                faults.append(ScenarioFault(first + k, *fault))
                fill(plan, series, finals, start, step)
                break
            sched.settle()
            for f in plan.records:
                series += data.read(f.offset, f.size)
        else:
            for f in plan.finals:
                finals += data.read(f.offset, f.size)
    return bytes(series), bytes(finals), tuple(faults)


def _advance(sched: Any, ticks: int) -> tuple[str, int, int] | None:
    """``sched.advance(ticks)``; its fault's (kind, task, tick), or None. The native
    Scheduler raises the fault, the emulator's reports it."""
    try:
        sched.advance(ticks)
    except ProgramFault as exc:
        return exc.kind, int(exc.task or 0), int(exc.tick or 0)
    fault = getattr(sched, "fault", None)
    return None if fault is None else (str(fault[0]), int(fault[1]), int(fault[5]))


class _Data:
    """A loaded program's data region: its buffer natively, read_bytes/write_bytes on an
    emulator."""

    def __init__(self, program: Any) -> None:
        self.program = program
        self.emulated = hasattr(program, "read_bytes")

    def read(self, offset: int, size: int) -> bytes:
        if self.emulated:
            return bytes(self.program.read_bytes(offset, size))
        with memoryview(self.program) as view:
            return bytes(view[offset:offset + size])

    def write(self, offset: int, data: bytes) -> None:
        if self.emulated:
            self.program.write_bytes(offset, data)
            return
        with memoryview(self.program) as view:
            view[offset:offset + len(data)] = data


def chunk_size(plan: Plan, n: int, workers: int, params: Callable[[int], bytes]) -> int:
    """Scenarios per Dask task: about CHUNK_SECONDS of work each (timed on a few scenarios
    here when this machine runs the plan, one at a time: an upper bound), at least 4 tasks
    per worker when there are enough scenarios, rounded up to whole lane batches."""
    per_scenario = None
    if is_native(plan.variant):
        probe = min(n, 8)
        start = time.perf_counter()
        run_batch(plan, params(probe))
        per_scenario = (time.perf_counter() - start) / probe
    by_time = n if not per_scenario else max(1, math.ceil(CHUNK_SECONDS / per_scenario))
    chunk = max(1, min(by_time, math.ceil(n / (4 * max(1, workers)))))
    lanes = plan.lanes.count if plan.lanes is not None else 1
    return min(n, math.ceil(chunk / lanes) * lanes) if chunk >= min_fill(lanes) else chunk


def run_dask(client: Any, plan: Plan, encoded: Callable[[int, int], bytes], n: int,
             chunk: int | None, progress: Callable[[int], None] | None) -> Raw:
    """The scenarios as tasks of ``client`` (dask.distributed): the plan sent once to the
    workers, chunks of parameter rows as the tasks' arguments, results gathered in scenario
    order. A worker lost mid-sweep loses only results the scheduler recomputes (the tasks
    are pure: same plan and rows, same bytes). In a cluster of mixed CPUs the tasks go only
    to the workers that execute the plan's code (``native_workers``)."""
    able = native_workers(client, plan.variant)
    # nthreads() asks the scheduler; scheduler_info() returns the client's cache, which its
    # periodic refresh (n_workers=0) can leave without workers (distributed 2026.8)
    chunk = _chunk(chunk, plan, n, len(able or client.nthreads()) or 1, encoded)
    # The plan is a task's result, not scattered data: a broadcast scatter waits forever for a
    # worker that dies meanwhile, and scattered data cannot be recomputed once its worker is
    # gone; a task result is recomputed (the plan's bytes travel once, in the task).
    where: dict[str, Any] = {} if able is None else {"workers": able,
                                                     "allow_other_workers": False}
    plan_future = client.submit(the_plan, plan, key=f"copapy-plan-{plan.digest}", pure=True,
                                **where)
    starts = list(range(0, n, chunk))
    parts = [encoded(s, min(s + chunk, n)) for s in starts]
    futures = client.map(run_batch, [plan_future] * len(parts), parts, starts, pure=True,
                         key=[f"copapy-sweep-{plan.digest[:12]}-{s}-{len(p)}-"
                              f"{_token(p)}" for s, p in zip(starts, parts, strict=True)],
                         **where)
    if progress is not None:
        from distributed import as_completed

        index = {f.key: k for k, f in enumerate(futures)}
        for f in as_completed(futures):  # type: ignore[no-untyped-call]
            progress(min(chunk, n - starts[index[f.key]]))
    return join(client.gather(futures))


def run_ray(plan: Plan, encoded: Callable[[int, int], bytes], n: int, chunk: int | None,
            progress: Callable[[int], None] | None) -> Raw:
    """The scenarios as Ray tasks, chunked as for Dask: the plan put in Ray's object store
    once, each chunk of parameter rows a task running the batched engine (Ray retries a task
    whose worker died; the same input gives the same bytes), results in scenario order.
    Uses the Ray runtime of this process (``ray.init(...)`` first for a cluster; else Ray
    starts a local one). Every worker must execute the plan's code natively."""
    try:
        import ray
    except ImportError:
        raise ImportError("engine='ray' needs Ray: pip install 'copapy[ray]'") from None
    if not ray.is_initialized():
        ray.init()
    workers = max(1, int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
    chunk = _chunk(chunk, plan, n, workers, encoded)
    plan_ref = ray.put(plan)
    task: Any = ray.remote(run_batch)
    starts = list(range(0, n, chunk))
    refs = [task.remote(plan_ref, encoded(s, min(s + chunk, n)), s) for s in starts]
    if progress is not None:
        index = {ref: k for k, ref in enumerate(refs)}
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            progress(min(chunk, n - starts[index[ready[0]]]))
    return join(ray.get(refs))


def _chunk(chunk: int | None, plan: Plan, n: int, workers: int,
           encoded: Callable[[int, int], bytes]) -> int:
    """The scenarios per task: ``chunk``, checked, or chunk_size's."""
    if chunk is None:
        chunk = chunk_size(plan, n, workers, lambda k: encoded(0, k))
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk is a number of scenarios per task >= 1, got {chunk!r}")
    return chunk


def native_workers(client: Any, variant: str) -> list[str] | None:
    """The addresses of the client's workers whose CPU executes ``variant`` code, or None
    when every worker does (then the tasks are not tied to addresses: a worker restarted by
    its nanny, at a new address, still takes them). A worker that cannot answer (it died
    meanwhile, or has no copapy) gets no tasks. TargetError if none does."""
    answers: dict[str, Any] = client.run(is_native, variant, on_error="return")
    able = sorted(a for a, yes in answers.items() if yes is True)
    if not able:
        raise TargetError(f"none of the {len(answers)} Dask workers executes {variant} code: "
                          f"start a `dask worker` where {variant} code runs natively (docs/guide/"
                          f"howto/sweeps.md), or sweep with arch= of the workers' CPU")
    return None if len(able) == len(answers) else able


def join(parts: list[Raw]) -> Raw:
    """The results of consecutive chunks as one."""
    return (b"".join(r[0] for r in parts), b"".join(r[1] for r in parts),
            tuple(f for r in parts for f in r[2]))


def the_plan(plan: Plan) -> Plan:
    """The plan on a worker (the task whose result the chunks depend on)."""
    return plan


def _token(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def split(raw: Raw, plan: Plan, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engines' bytes as arrays: series (scenario, time[, shape]) and final metrics,
    with every value that was not computed NaN (``not_computed``): the rows before a
    value's task first publishes it, and a faulted scenario's rows from its fault on."""
    series = decode(plan.records, raw[0], (n, plan.steps)) if plan.records else {}
    finals = decode(plan.finals, raw[1], (n,), plan.metric_names) if plan.finals else {}
    # per scenario, the first row that its fault left unrecorded (steps: none)
    valid = np.full(n, plan.steps, dtype=np.int64)
    for f in raw[2]:
        valid[f.scenario] = f.tick // plan.sample_ticks
    rows = np.arange(plan.steps)
    for k, name in enumerate(series):
        missing = (rows[None, :] < plan.unpublished[k]) | (rows[None, :] >= valid[:, None])
        series[name] = not_computed(series[name], missing)
    for k, name in enumerate(finals):
        never = plan.unpublished[len(series) + k] >= plan.steps
        finals[name] = not_computed(finals[name], (valid < plan.steps) | never)
    return series, finals


def not_computed(values: Any, missing: Any) -> Any:
    """``values`` with NaN where ``missing`` (over its leading axes) says the program did not
    compute them: a float array keeps its dtype, an int32 or bool array with a missing
    value becomes float64 (exact for them; as pandas stores a missing integer), because
    every int32 and bool is a value a program can compute."""
    if not missing.any():
        return values
    # a copy: the decoded array may be a read-only view of the engines' bytes
    values = np.array(values, dtype=values.dtype if values.dtype.kind == "f" else np.float64)
    values[missing] = np.nan
    return values

