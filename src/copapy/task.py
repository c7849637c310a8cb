"""Periodic tasks: what runs, how often, and how important it is."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from .value import Traced


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
            if not isinstance(v, Traced):
                raise TypeError(f"Task outputs must be copapy values or arrays, got "
                                f"{type(v).__name__}")
        for what, x in (("period", period), ("offset", offset), ("wcet", wcet),
                        ("budget", budget), ("link_timeout", link_timeout)):
            if x is not None and (isinstance(x, bool) or not isinstance(x, numbers.Real)):
                raise TypeError(f"{what} is a number of seconds (e.g. {what}=1e-3), got "
                                f"{type(x).__name__} {x!r}")
        if not isinstance(priority, numbers.Integral) or isinstance(priority, bool):
            raise TypeError(f"priority is an int in 0..65535, got {type(priority).__name__}")
        if not period > 0:
            raise ValueError(f"period must be > 0 seconds, got {period!r}")
        if not 0 <= offset < period:
            raise ValueError(f"offset must be in [0, period), got {offset!r}")
        if not 0 <= priority < 65536:
            raise ValueError(f"priority must be in 0..65535, got {priority!r}")
        if budget is not None and not 0 < budget < 4.294967295:
            raise ValueError(f"budget must be > 0 and < 4.29 seconds, got {budget!r}")
        if link_timeout is not None and not link_timeout > 0:
            raise ValueError(f"link_timeout must be > 0 seconds, got {link_timeout!r}")
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "period", float(period))
        object.__setattr__(self, "priority", int(priority))
        object.__setattr__(self, "offset", float(offset))
        object.__setattr__(self, "wcet", wcet)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "link_timeout", link_timeout)
