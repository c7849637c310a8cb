"""Periodic tasks: what runs, how often, and how important it is."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from .value import is_traced

#: the longest period, offset, wcet or budget: the image holds them as u32 nanoseconds
MAX_U32_SECONDS = 4.294967295
#: the longest link timeout: a u64 of nanoseconds (docs/image.md, "Tasks")
MAX_U64_SECONDS = 1.8e10


@dataclass(frozen=True, eq=False)
class Task:
    """Compute ``outputs`` every ``period`` seconds (first release at ``offset``).

    ``priority``: 0 is the most important. ``wcet``: declared execution time (seconds) used to
    model overload in simulation; None means "free".

    ``budget``: the execution time (seconds) a job may need; a runner's supervisor stops a job
    that runs longer than the budget times its factor (FAULTED: timeout, outputs safe).
    Default: ``wcet`` if given, else the period (docs/realtime.md, "Time budgets").

    ``link_timeout``: a dead-man switch (seconds): if the host link to a runner is silent for
    longer, the runner faults the program and drives every output to its safe value.
    ``SerialTarget`` keeps the link alive while it is connected. None: no switch.

    An image holds period, offset, wcet and budget as 32-bit nanoseconds: each is at most
    4.294967295 s, and a time other than 0 at least 1 ns.
    """

    outputs: tuple[Any, ...]
    period: float
    priority: int = 0
    offset: float = 0.0
    wcet: float | None = None
    name: str = ""
    budget: float | None = None
    link_timeout: float | None = None

    def __init__(self, *outputs: Any, period: float, priority: int = 0,
                 offset: float = 0.0, wcet: float | None = None, name: str = "",
                 budget: float | None = None, link_timeout: float | None = None) -> None:
        if not outputs:
            raise ValueError("a Task needs at least one output value")
        for v in outputs:
            if not is_traced(v):
                raise TypeError(f"Task outputs must be copapy values or arrays, got "
                                f"{type(v).__name__}")
        for what, x in (("period", period), ("offset", offset), ("wcet", wcet),
                        ("budget", budget), ("link_timeout", link_timeout)):
            if x is not None and (isinstance(x, bool) or not isinstance(x, numbers.Real)):
                raise TypeError(f"{what} is a number of seconds (e.g. {what}=1e-3), got "
                                f"{type(x).__name__} {x!r}")
        if not isinstance(priority, numbers.Integral) or isinstance(priority, bool):
            raise TypeError(f"priority is an int in 0..65535, got {type(priority).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"name is a str (it names the task in stats), got "
                            f"{type(name).__name__} {name!r}")
        if not period > 0:
            raise ValueError(f"period must be > 0 seconds, got {period!r}")
        if not 1e-9 <= period <= MAX_U32_SECONDS:
            raise ValueError(f"period must be between 1 ns and {MAX_U32_SECONDS} s (an image "
                             f"holds it as 32-bit nanoseconds), got {period!r}")
        if not 0 <= offset < period:
            raise ValueError(f"offset must be in [0, period), got {offset!r}")
        if not 0 <= priority < 65536:
            raise ValueError(f"priority must be in 0..65535, got {priority!r}")
        if wcet is not None and not (wcet == 0 or 1e-9 <= wcet <= MAX_U32_SECONDS):
            raise ValueError(f"wcet must be 0 (none) or between 1 ns and {MAX_U32_SECONDS} s, "
                             f"got {wcet!r}")
        if budget is not None and not 1e-9 <= budget <= MAX_U32_SECONDS:
            raise ValueError(f"budget must be between 1 ns and {MAX_U32_SECONDS} s, got "
                             f"{budget!r}")
        if link_timeout is not None and not 1e-9 <= link_timeout <= MAX_U64_SECONDS:
            raise ValueError(f"link_timeout must be between 1 ns and {MAX_U64_SECONDS:.3g} s, "
                             f"got {link_timeout!r}")
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "period", float(period))
        object.__setattr__(self, "priority", int(priority))
        object.__setattr__(self, "offset", float(offset))
        object.__setattr__(self, "wcet", wcet)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "link_timeout", link_timeout)
