"""Parameter sweeps and Monte-Carlo of the exact deployed program (docs/guide/howto/sweeps.md):
``cp.sweep(program, params, seconds, record=[...])`` runs one scenario per parameter set with
the program image that gets flashed, batched in C, or spread over a Dask cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..progress import enabled as progress_enabled
from . import metrics as _metrics
from . import params as _params
from .engines import (
    Raw,
    ScenarioFault,
    SweepFault,
    join,
    run_batch,
    run_dask,
    run_python,
    run_ray,
    split,
)
from .params import Distribution, Scenarios
from .plan import Plan, build_plan, check_size, encode
from .result import SweepResult

__all__ = ["Distribution", "Plan", "ScenarioFault", "Scenarios", "Sweep", "SweepFault",
           "SweepResult", "sweep"]

ENGINES = ("batch", "python", "ray")
ON_FAULT = ("record", "raise")
#: scenarios per batched C call without Dask (a progress bar moves between calls)
LOCAL_CHUNK = 1024


class Sweep:
    """``cp.sweep``: call it to run a sweep; its attributes build the scenarios
    (``grid``, ``monte_carlo``, the distributions) and the metrics (``iae``, ...)."""

    grid = staticmethod(_params.grid)
    monte_carlo = staticmethod(_params.monte_carlo)
    uniform = staticmethod(_params.uniform)
    normal = staticmethod(_params.normal)
    around = staticmethod(_params.around)
    seeds = staticmethod(_params.seeds)
    iae = staticmethod(_metrics.iae)
    peak = staticmethod(_metrics.peak)
    overshoot = staticmethod(_metrics.overshoot)
    settling_time = staticmethod(_metrics.settling_time)
    #: what ``on_fault="raise"`` raises, and a faulted scenario in ``result.faults``
    SweepFault = SweepFault
    ScenarioFault = ScenarioFault

    def __call__(self, program: Any, params: Any, seconds: float,
                 record: Sequence[Any] = (), tick: float | None = None, *,
                 sample: float | None = None, metrics: Mapping[str, Any] | None = None,
                 bindings: Sequence[Any] = (), names: Mapping[str, Any] | None = None,
                 engine: str = "batch", client: Any = None, chunk: int | None = None,
                 progress: bool | None = None, arch: str | None = None,
                 on_fault: str = "record", lanes: bool = True) -> SweepResult:
        """Run ``program`` once per scenario of ``params`` for ``seconds`` of simulated time.

        ``program``: ``cp.Task`` objects (with ``bindings=``/``names=`` as ``cp.save``
        takes them, or a ``(tasks, bindings, names)`` tuple) or a saved program
        (``cp.load``). ``params``: ``cp.sweep.grid(...)``, ``cp.sweep.monte_carlo(...)``, a
        list of dicts or a dict of sequences, keyed by input port name (``cp.value(...,
        name="kp")``). ``record``: values or port names recorded every ``sample`` seconds (default:
        every ``tick``, the program's own unless given). ``metrics``: name -> traced value
        (``cp.sweep.iae(error)``), read at the end of each scenario.

        ``engine="batch"`` runs the batched C runner here; ``"python"`` the reference loop
        over a LocalTarget (slow; the same bits). ``client``: a ``dask.distributed`` Client
        to spread chunks of ``chunk`` scenarios (default: about half a second of work each)
        over its workers. ``engine="ray"``: the same chunks as tasks of Ray's runtime in
        this process (``ray.init(address=...)`` first for a cluster). ``progress``: a tqdm
        bar (default: on a terminal, see ``COPAPY_PROGRESS``). ``arch``: the stencil table
        tasks are compiled for (default: this machine's base table, which every CPU of its
        architecture runs); another architecture's image runs with ``engine="python"`` on
        its emulator here, or batched on the Dask workers of that architecture.

        A scenario whose program faults (``cp.ProgramFault``'s kinds) does not stop the
        sweep: ``result.faults`` lists each such scenario's fault (kind, task, tick) in
        scenario order, its rows from the faulting one on and its metrics are NaN, and
        every other scenario's results are what they are without it. The rows before a
        task first publishes a value (the end of its first period) are NaN too. An int32 or
        bool series or metric holding such a NaN is float64.
        ``on_fault="raise"``: raise ``SweepFault`` naming the first fault instead.

        The batched engine runs batches of scenarios side by side, as the lanes of one
        program whose values are packed arrays (the same bits as one at a time; NaN payloads
        aside); ``lanes=False`` steps them one at a time, as it does for a program with a
        value that has no lane form (its plan's ``lanes_off`` says which)."""
        sc = _params.scenarios(params)
        keys = list(sc.columns)
        plan = build_plan(program, keys, seconds, list(record), dict(metrics or {}), tick,
                          sample, bindings, names, arch, scenarios=sc.n, lanes=lanes)
        check_size(plan, sc.n)
        if engine not in ENGINES:
            raise ValueError(f"engine is one of {', '.join(map(repr, ENGINES))}, got "
                             f"{engine!r}")
        if on_fault not in ON_FAULT:
            raise ValueError(f"on_fault is one of {', '.join(map(repr, ON_FAULT))}, got "
                             f"{on_fault!r}")
        if client is not None and engine != "batch":
            raise ValueError("a Dask client runs the batched engine (engine='batch')")
        bar = _bar(sc.n, progress)
        try:
            def encoded(start: int, stop: int) -> bytes:
                return encode(plan, sc.slice(start, stop), keys)

            if client is not None:
                raw = run_dask(client, plan, encoded, sc.n, chunk, bar)
            elif engine == "ray":
                raw = run_ray(plan, encoded, sc.n, chunk, bar)
            else:
                raw = _local(plan, sc, keys, engine, chunk or LOCAL_CHUNK, encoded, bar)
        finally:
            if bar is not None:
                bar(0, close=True)
        if raw[2] and on_fault == "raise":
            raise SweepFault(raw[2][0], len(raw[2]) - 1)
        series, finals = split(raw, plan, sc.n)
        return SweepResult(sc, plan.time, series, finals, raw[2])


def _local(plan: Plan, sc: Scenarios, keys: list[str], engine: str, chunk: int,
           encoded: Callable[[int, int], bytes], bar: Any) -> Raw:
    parts = []
    for start in range(0, sc.n, chunk):
        stop = min(start + chunk, sc.n)
        if engine == "batch":
            part = run_batch(plan, encoded(start, stop), start)
        else:
            part = run_python(plan, encoded(start, stop), start)
        parts.append(part)
        if bar is not None:
            bar(stop - start)
    return join(parts)


def _bar(total: int, progress: bool | None) -> Any:
    """A callable ``bar(done_now, close=False)`` updating a tqdm bar, or None."""
    if not (progress_enabled() if progress is None else progress):
        return None
    from tqdm import tqdm

    t = tqdm(total=total, desc="sweep", unit="scenario", unit_scale=True, leave=False,
             mininterval=0, miniters=1)  # each chunk is an update the bar shows

    def update(k: int, close: bool = False) -> None:
        if close:
            t.close()
        else:
            t.update(k)

    return update


sweep = Sweep()
