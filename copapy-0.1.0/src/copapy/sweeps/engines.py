"""The engines that run a plan's scenarios; each returns the same bytes for the same plan.

* ``run_batch``: the batched C runner (``_runner.batch``): one call steps many scenarios of
  one loaded image, no Python per tick or per scenario;
* ``run_python``: the Python loop over the program's Scheduler (reset, write, advance,
  read per row): the reference the others are checked against;
* ``run_dask``: chunks of scenarios as tasks of a ``dask.distributed`` client, the plan
  (image bytes) shipped to every worker once, results in scenario order.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..loading import load_program
from ..runtime.errors import ProgramFault, TargetError
from ..runtime.load import is_native
from .plan import Plan, decode

if TYPE_CHECKING:
    pass

__all__ = ["SweepFault", "run_batch", "run_dask", "run_python"]

#: (series bytes, finals bytes) of some scenarios
Raw = tuple[bytes, bytes]

#: a Dask task should run about this long: well above the scheduler's per-task overhead
#: (about 1 ms), short enough that a lost worker costs little
CHUNK_SECONDS = 0.5


class SweepFault(TargetError):
    """A scenario's program faulted (the message names the scenario and the fault)."""


_local = threading.local()


def _loaded(plan: Plan) -> Any:
    """The plan's program, loaded once per thread (a Dask worker's threads each own one)."""
    cache: dict[str, Any] = getattr(_local, "programs", None) or {}
    _local.programs = cache
    program = cache.get(plan.digest)
    if program is None:
        if not is_native(plan.variant):
            raise TargetError(f"the plan holds {plan.variant} code and this machine does not "
                              f"execute it natively: run the sweep on a {plan.variant} "
                              f"machine or worker")
        cache.clear()  # one plan at a time per thread: a worker does not keep old images
        program = cache[plan.digest] = load_program(plan.image, plan.variant,
                                                    own_code=plan.own_code)
    return program


def run_batch(plan: Plan, params: bytes, first: int = 0) -> Raw:
    """The batched C runner over the scenarios whose parameter rows ``params`` holds (the
    first is scenario number ``first`` of the sweep, for error messages)."""
    from .. import _runner

    series, finals, done, fault = _runner.batch(
        _loaded(plan), plan.tick_ns, plan.steps, plan.sample_ticks,
        [f.range for f in plan.params], params, [f.range for f in plan.records],
        [f.range for f in plan.finals])
    if fault is not None:
        raise SweepFault(f"scenario {first + done} faulted: {fault[0]} in task {fault[1]} at "
                         f"tick {fault[5]} (pc {fault[3]:#x}); the scenarios before it ran")
    return bytes(series), bytes(finals)


def run_python(plan: Plan, params: bytes, first: int = 0) -> Raw:
    """The Python loop: the plan's program on its Scheduler (scheduler.c natively, the
    emulator's for another architecture), per scenario a reset, the simulated inputs at 0,
    the parameter bytes written, then per recorded row an ``advance`` and a ``settle`` (what
    LocalTarget.step does) and a read of every recorded range, all from Python."""
    program: Any = load_program(plan.image, plan.variant, own_code=plan.own_code)
    sched: Any = program.scheduler(plan.tick_ns, deterministic=True, measure=False)
    data = _Data(program)
    row = plan.param_row
    series = bytearray()
    finals = bytearray()
    for k in range(len(params) // row):
        sched.reset()
        for kind, channel in plan.inputs_io:  # the simulated world starts at rest too
            sched.io_write(kind, channel, 0.0)
        at = k * row
        for f in plan.params:
            data.write(f.offset, params[at:at + f.size])
            at += f.size
        for _ in range(plan.steps):
            try:  # the native Scheduler raises the fault, the emulator's reports it
                sched.advance(plan.sample_ticks)
            except ProgramFault as exc:
                raise SweepFault(f"scenario {first + k} faulted: {exc.kind} in task "
                                 f"{exc.task} at tick {exc.tick}") from exc
            fault = getattr(sched, "fault", None)
            if fault is not None:
                raise SweepFault(f"scenario {first + k} faulted: {fault[0]} in task "
                                 f"{fault[1]} at tick {fault[5]}")
            sched.settle()
            for f in plan.records:
                series += data.read(f.offset, f.size)
        for f in plan.finals:
            finals += data.read(f.offset, f.size)
    return bytes(series), bytes(finals)


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
    here when this machine runs the plan), at least 4 tasks per worker when there are
    enough scenarios."""
    per_scenario = None
    if is_native(plan.variant):
        probe = min(n, 8)
        start = time.perf_counter()
        run_batch(plan, params(probe))
        per_scenario = (time.perf_counter() - start) / probe
    by_time = n if not per_scenario else max(1, math.ceil(CHUNK_SECONDS / per_scenario))
    return max(1, min(by_time, math.ceil(n / (4 * max(1, workers)))))


def run_dask(client: Any, plan: Plan, encoded: Callable[[int, int], bytes], n: int,
             chunk: int | None, progress: Callable[[int], None] | None) -> Raw:
    """The scenarios as tasks of ``client`` (dask.distributed): the plan scattered once to
    every worker, chunks of parameter rows as the tasks' arguments, results gathered in
    scenario order. A worker lost mid-sweep loses only results the scheduler recomputes
    (the tasks are pure: same plan and rows, same bytes)."""
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    if chunk is None:
        chunk = chunk_size(plan, n, workers, lambda k: encoded(0, k))
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk is a number of scenarios per task >= 1, got {chunk!r}")
    # The plan is a task's result, not scattered data: a broadcast scatter waits forever for a
    # worker that dies meanwhile, and scattered data cannot be recomputed once its worker is
    # gone; a task result is recomputed (the plan's bytes travel once, in the task).
    plan_future = client.submit(the_plan, plan, key=f"copapy-plan-{plan.digest}", pure=True)
    starts = list(range(0, n, chunk))
    parts = [encoded(s, min(s + chunk, n)) for s in starts]
    futures = client.map(run_batch, [plan_future] * len(parts), parts, starts, pure=True,
                         key=[f"copapy-sweep-{plan.digest[:12]}-{s}-{len(p)}-"
                              f"{_token(p)}" for s, p in zip(starts, parts, strict=True)])
    if progress is not None:
        from distributed import as_completed

        index = {f.key: k for k, f in enumerate(futures)}
        for f in as_completed(futures):  # type: ignore[no-untyped-call]
            progress(min(chunk, n - starts[index[f.key]]))
    results: list[Raw] = client.gather(futures)
    return b"".join(r[0] for r in results), b"".join(r[1] for r in results)


def the_plan(plan: Plan) -> Plan:
    """The plan on a worker (the task whose result the chunks depend on)."""
    return plan


def _token(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def split(raw: Raw, plan: Plan, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engines' bytes as arrays: series (scenario, time[, shape]) and final metrics."""
    series = decode(plan.records, raw[0], (n, plan.steps)) if plan.records else {}
    finals = decode(plan.finals, raw[1], (n,), plan.metric_names) if plan.finals else {}
    return series, finals

