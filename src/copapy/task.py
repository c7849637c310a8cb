"""Periodic tasks: what runs, how often, and how important it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .value import Traced


@dataclass(frozen=True, eq=False)
class Task:
    """Compute ``outputs`` every ``period`` seconds (first release at ``offset``).

    ``priority``: 0 is the most important. ``wcet``: declared execution time (seconds) used to
    model overload in simulation; None means "free".
    """

    outputs: tuple[Any, ...]
    period: float
    priority: int = 0
    offset: float = 0.0
    wcet: float | None = None
    name: str = ""

    def __init__(self, *outputs: Any, period: float, priority: int = 0,
                 offset: float = 0.0, wcet: float | None = None, name: str = "") -> None:
        if not outputs:
            raise ValueError("a Task needs at least one output value")
        for v in outputs:
            if not isinstance(v, Traced):
                raise TypeError(f"Task outputs must be copapy values or arrays, got "
                                f"{type(v).__name__}")
        if not period > 0:
            raise ValueError(f"period must be > 0 seconds, got {period!r}")
        if not 0 <= offset < period:
            raise ValueError(f"offset must be in [0, period), got {offset!r}")
        if not 0 <= priority < 65536:
            raise ValueError(f"priority must be in 0..65535, got {priority!r}")
        object.__setattr__(self, "outputs", tuple(outputs))
        object.__setattr__(self, "period", float(period))
        object.__setattr__(self, "priority", int(priority))
        object.__setattr__(self, "offset", float(offset))
        object.__setattr__(self, "wcet", wcet)
        object.__setattr__(self, "name", name)
