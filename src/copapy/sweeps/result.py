"""A sweep's results: the parameters of every scenario, the recorded signals over simulated
time and the final value of every metric, as NumPy arrays, an xarray Dataset or a pandas
DataFrame (``pip install 'copapy[sweep]'``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .engines import ScenarioFault
from .params import Scenarios
from .plotting import envelope_and_heatmap

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

__all__ = ["SweepResult"]

SWEEP_EXTRA = "pip install 'copapy[sweep]' (xarray, pandas, dask[distributed])"


@dataclass(frozen=True)
class SweepResult:
    """``series[name]`` is (scenario, time[, shape]); ``metrics[name]`` is (scenario,);
    ``params[name]`` is (scenario,); ``time`` the simulated time of each recorded row;
    ``faults`` the scenarios whose program faulted, in scenario order. A value the program
    did not compute is NaN: a faulted scenario's rows from the faulting one on and its
    metrics, the rows before the value's task first publishes it; an int32 or bool series
    or metric with such a value is float64."""

    scenarios: Scenarios
    time: Any
    series: Mapping[str, Any]
    metrics: Mapping[str, Any]
    faults: tuple[ScenarioFault, ...] = ()

    @property
    def faulted(self) -> Any:
        """(scenario,) bool: True where the scenario's program faulted."""
        out = np.zeros(self.n, dtype=bool)
        out[[f.scenario for f in self.faults]] = True
        return out

    @property
    def n(self) -> int:
        return self.scenarios.n

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.scenarios.columns)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, name: str) -> Any:
        """A recorded signal or a metric by name."""
        if name in self.series:
            return self.series[name]
        if name in self.metrics:
            return self.metrics[name]
        raise KeyError(f"no recorded signal or metric {name!r}; there are "
                       f"{', '.join([*self.series, *self.metrics]) or 'none'}")

    def identical(self, other: SweepResult) -> bool:
        """The same bits in every recorded value and metric (NaN equal to NaN) and the same
        faults."""
        return bool(self.faults == other.faults
                and self.series.keys() == other.series.keys()
                and self.metrics.keys() == other.metrics.keys()
                and all(_same(v, other.series[k]) for k, v in self.series.items())
                and all(_same(v, other.metrics[k]) for k, v in self.metrics.items()))

    def to_xarray(self) -> Any:
        """An xarray Dataset: each recorded signal over (scenario, time), each metric over
        (scenario,), the parameters as coordinates of the scenario dimension."""
        try:
            import xarray as xr
        except ImportError:
            raise ImportError(f"to_xarray() needs xarray: {SWEEP_EXTRA}") from None
        data: dict[str, Any] = {}
        for name, v in self.series.items():
            extra = tuple(f"{name}_dim{k}" for k in range(v.ndim - 2))
            data[name] = (("scenario", "time", *extra), v)
        for name, v in self.metrics.items():
            extra = tuple(f"{name}_dim{k}" for k in range(v.ndim - 1))
            data[name] = (("scenario", *extra), v)
        coords: dict[str, Any] = {"scenario": np.arange(self.n), "time": self.time}
        coords.update({p: ("scenario", v) for p, v in self.params.items()})
        if self.faults:
            coords["fault_kind"] = ("scenario", self.fault_kinds())
        return xr.Dataset(data, coords=coords)

    def fault_kinds(self) -> Any:
        """(scenario,) str: each scenario's fault kind, "" where it did not fault."""
        out = np.full(self.n, "", dtype=object)
        for f in self.faults:
            out[f.scenario] = f.kind
        return out

    def to_pandas(self, series: bool = False) -> Any:
        """A DataFrame of one row per scenario (parameters, then metrics, then the fault
        kind if any scenario faulted), or with ``series=True`` one row per scenario and
        recorded time (long form)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(f"to_pandas() needs pandas: {SWEEP_EXTRA}") from None
        if not series:
            cols = {**self.params, **{k: v for k, v in self.metrics.items() if v.ndim == 1}}
            if self.faults:
                cols["fault_kind"] = self.fault_kinds()
            return pd.DataFrame(cols, index=pd.RangeIndex(self.n, name="scenario"))
        steps = len(self.time)
        long: dict[str, Any] = {"scenario": np.repeat(np.arange(self.n), steps),
                                "time": np.tile(self.time, self.n)}
        long.update({p: np.repeat(v, steps) for p, v in self.params.items()})
        long.update({k: v.reshape(self.n * steps) for k, v in self.series.items()
                     if v.ndim == 2})
        return pd.DataFrame(long)

    def plot(self, signal: str | None = None, metric: str | None = None,
             percentiles: Sequence[float] = (5, 25, 50, 75, 95), path: str | None = None,
             title: str = "") -> Any:
        """The envelope (percentile bands and the median) of a recorded ``signal`` over time,
        and/or a heat map of a ``metric`` over a two-parameter grid (matplotlib); saved to
        ``path`` if given. Defaults: the first recorded signal, and the first metric when
        the scenarios are a 2-D grid."""
        if signal is None and metric is None:
            signal = next(iter(self.series), None)
            if len(self.scenarios.axes) == 2:
                metric = next(iter(self.metrics), None)
        if signal is not None and signal not in self.series:
            raise KeyError(f"no recorded signal {signal!r}; recorded: "
                           f"{', '.join(self.series) or 'none'}")
        grid = None
        if metric is not None:
            if metric not in self.metrics:
                raise KeyError(f"no metric {metric!r}; there are "
                               f"{', '.join(self.metrics) or 'none'}")
            axes = self.scenarios.axes
            if len(axes) != 2:
                raise ValueError(f"a heat map of {metric!r} needs the scenarios of a 2-D grid "
                                 f"(cp.sweep.grid(a=[...], b=[...])); these have "
                                 f"{len(axes) or 'no'} grid axes")
            (ka, va), (kb, vb) = axes
            values = self.metrics[metric].reshape(len(va), len(vb))
            grid = (ka, va, kb, vb, metric, values)
        band = None if signal is None else (signal, self.time, self.series[signal])
        return envelope_and_heatmap(band, grid, percentiles, path, title)


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return bool(a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes())
