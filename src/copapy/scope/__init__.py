"""A live scope in the browser: watch a running program's signals and tune its inputs.

``tg.scope(...)`` (LocalTarget, SerialTarget) and ``copapy scope TARGET`` open it: a Bokeh
server on 127.0.0.1 whose URL carries a random token. The page plots the chosen signals
(decimated), writes inputs (a slider, checkbox or number field each), starts and stops the
program, shows its state (running, stopped, FAULTED, link lost) and records every tick to
CSV or Parquet. Bokeh (the ``scope`` extra) is imported when a scope opens.

This package uses the targets' public API and imports no target module (it sits beside
them: their ``scope`` methods open it); nothing below the targets imports it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import copapy

from .core import Control, Core
from .sources import Signal, SteppedSource, StreamedSource

if TYPE_CHECKING:
    from .server import ScopeServer

__all__ = ["SCOPE_EXTRA", "Scope", "open_scope"]

SCOPE_EXTRA = "pip install 'copapy[scope]' (bokeh)"
#: the range of an int32 input declared without one
INT32_SPAN = (-2.0**31, 2.0**31 - 1)


class Scope:
    """A running scope: ``url`` opens it (with its token); ``close()`` ends it (the program
    keeps running). In Jupyter the cell shows the page."""

    def __init__(self, core: Core, server: ScopeServer) -> None:
        self.core = core
        self.server = server

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def recorded(self) -> int:
        """Ticks written to the current recording (the last one, once it ended)."""
        return self.core.recorded

    @property
    def lost(self) -> int:
        """Ticks missing from what the target delivered (0 unless the host stalled longer
        than the stream's bound; the recording marks gaps between its rows in
        ``lost_before``, and after ``core.drain`` this counts those missing at the ends)."""
        return self.core.lost()

    def record(self, path: str | Path | None) -> Path | None:
        """Record every tick to ``path`` (.csv, or .parquet with pyarrow); None stops and
        returns the file."""
        if path is None:
            return self.core.stop_recording()
        return self.core.start_recording(path)

    def close(self) -> None:
        self.server.close()
        self.core.close()

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<copapy scope {self.url}>"

    def _repr_html_(self) -> str:
        return (f'<a href="{self.url}" target="_blank">copapy scope</a>'
                f'<iframe src="{self.url}" width="100%" height="720" '
                f'style="border:none"></iframe>')


def signals_of(target: Any, signals: Sequence[Any], named: Mapping[str, Any]) -> list[Signal]:
    """The signals to plot: port names and values (labelled by their port's name where the
    target tells it), and ``label=value`` pairs."""
    found = [Signal(s, s if isinstance(s, str) else port_name(target, s)) for s in signals]
    return found + [Signal(v, k) for k, v in named.items()]


def port_name(target: Any, v: Any) -> str:
    info = getattr(target, "program_info", None)
    port = info.ports.get(getattr(v, "node", None)) if info is not None else None
    return port.name if port is not None else repr(v)


def controls_of(target: Any, controls: Sequence[Any] | Mapping[str, Any],
                ranges: Mapping[str, tuple[float, float]] | None) -> list[Control]:
    """A Control per input (a port name or a value; a mapping gives labels), with its range
    from ``ranges`` (by label) when given."""
    items = (list(controls.items()) if isinstance(controls, Mapping)
             else [(c if isinstance(c, str) else port_name(target, c), c) for c in controls])
    ranges = dict(ranges or {})
    unknown = set(ranges) - {label for label, _ in items}
    if unknown:
        raise ValueError(f"ranges name {sorted(unknown)}, which are not among the controls "
                         f"{[label for label, _ in items]}")
    found = []
    for label, key in items:
        initial = target.read(key)
        if hasattr(initial, "shape"):
            raise TypeError(f"control {label!r} is an array input: the scope controls scalar "
                            f"inputs")
        lo, hi = ranges.get(label) or declared_range(key) or (None, None)
        found.append(Control(key, label, initial, lo, hi))
    return found


def declared_range(key: Any) -> tuple[float, float] | None:
    """The range an input value was declared with (``cp.value(x, range=(lo, hi))``, where
    this copapy has range declarations: ``cp.ranges``); None for a port name, an input
    declared without one (its range is its type's: unbounded, or all of int32) or none."""
    ranges_of = getattr(copapy, "ranges", None)
    if ranges_of is None or isinstance(key, str):
        return None
    try:
        span = ranges_of(key)
    except Exception:  # not an input this analysis knows: a number field then
        return None
    lo, hi = float(span.lo), float(span.hi)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi) or (lo, hi) == INT32_SPAN:
        return None
    return lo, hi


def open_scope(target: Any, *signals: Any, controls: Sequence[Any] | Mapping[str, Any] = (),
               ranges: Mapping[str, tuple[float, float]] | None = None,
               record: str | Path | None = None, realtime: bool = True, port: int = 0,
               recordings: str | Path = ".", named: Mapping[str, Any] | None = None) -> Scope:
    """Open a scope on a target's deployed program (see ``LocalTarget.scope``)."""
    try:
        from . import page
        from .server import ScopeServer
    except ImportError as exc:
        raise ImportError(f"the scope needs bokeh: {SCOPE_EXTRA} ({exc})") from None
    chosen = signals_of(target, signals, named or {})
    if not chosen:
        raise ValueError("scope() needs the signals to plot: tg.scope(speed, 'error', "
                         "gain=gain_value)")
    wanted = controls_of(target, controls, ranges)
    source = (SteppedSource(target, chosen, realtime) if hasattr(target, "step")
              else StreamedSource(target, chosen))
    core = Core(source, wanted, record)
    folder = Path(recordings)
    try:
        server = ScopeServer(lambda doc: page.build(doc, core, folder), port)
    except Exception:
        core.close()
        raise
    return Scope(core, server)
