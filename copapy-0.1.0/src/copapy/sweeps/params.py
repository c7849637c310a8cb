"""The scenarios of a sweep: one value per parameter and scenario, as columns.

``grid`` (every combination, the first axis slowest), ``monte_carlo`` (draws from
distributions with one seeded NumPy generator), a list of dicts, or a dict of equal-length
sequences. A parameter is named by its input port's name: ``cp.value(..., name="kp")``, a ``names=``
entry, or a saved program's port name.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

__all__ = ["Distribution", "Scenarios", "around", "grid", "monte_carlo", "normal", "scenarios",
           "seeds", "uniform"]


@dataclass(frozen=True)
class Scenarios:
    """``n`` scenarios: ``columns[key][k]`` is parameter ``key``'s value in scenario ``k``.
    ``axes`` is set for a grid: the parameters and their values, the first axis slowest."""

    columns: dict[str, Any]
    n: int
    axes: tuple[tuple[str, Any], ...] = field(default=())

    def __len__(self) -> int:
        return self.n

    def slice(self, start: int, stop: int) -> Scenarios:
        """Scenarios start..stop-1 (no grid axes: a part of a grid is no grid)."""
        return Scenarios({k: v[start:stop] for k, v in self.columns.items()},
                         max(0, min(stop, self.n) - start))

    def row(self, k: int) -> dict[str, Any]:
        return {key: col[k].item() for key, col in self.columns.items()}


@dataclass(frozen=True)
class Distribution:
    """``draw(rng, n)`` gives n samples; ``text`` describes it in errors and reprs."""

    draw: Callable[[Any, int], Any]
    text: str

    def __repr__(self) -> str:
        return self.text


def uniform(low: float, high: float) -> Distribution:
    """Uniform on [low, high)."""
    if not high >= low:
        raise ValueError(f"uniform(low, high) needs low <= high, got {low!r}, {high!r}")
    return Distribution(lambda rng, n: rng.uniform(low, high, n), f"uniform({low}, {high})")


def normal(mean: float, sd: float) -> Distribution:
    """Normal with mean and standard deviation ``sd``."""
    if not sd >= 0:
        raise ValueError(f"normal(mean, sd) needs sd >= 0, got {sd!r}")
    return Distribution(lambda rng, n: rng.normal(mean, sd, n), f"normal({mean}, {sd})")


def around(nominal: float, rel: float) -> Distribution:
    """Uniform within ``±rel`` (a fraction: 0.2 is ±20 %) of ``nominal``."""
    if not 0 <= rel < 1:
        raise ValueError(f"around(nominal, rel) takes rel as a fraction in [0, 1) (0.2 is "
                         f"±20 %), got {rel!r}")
    span = abs(nominal) * rel
    return Distribution(lambda rng, n: rng.uniform(nominal - span, nominal + span, n),
                        f"around({nominal}, ±{rel:.0%})")


def seeds(low: int = 1, high: int = 2**31 - 2) -> Distribution:
    """Integer noise seeds in [low, high] (as floats: a float64 input holds them exactly)."""
    return Distribution(lambda rng, n: rng.integers(low, high, n, endpoint=True).astype(float),
                        f"seeds({low}, {high})")


def grid(axes: Mapping[str, Sequence[Any]] | None = None, /,
         **named: Sequence[Any]) -> Scenarios:
    """Every combination of the axes' values (the first axis slowest): ``grid(kp=[...],
    kd=[...])`` or ``grid({kp_value: [...], "kd": [...]})``."""
    spec = {**(axes or {}), **named}
    if not spec:
        raise ValueError("grid() needs at least one axis: grid(kp=[0.1, 0.2])")
    values = {k: _column(k, v) for k, v in spec.items()}
    for k, v in values.items():
        if len(v) == 0:
            raise ValueError(f"grid axis {_label(k)!r} has no values")
    combos = list(itertools.product(*(range(len(v)) for v in values.values())))
    index = np.array(combos, dtype=np.int64).reshape(len(combos), len(values))
    columns = {k: v[index[:, j]] for j, (k, v) in enumerate(values.items())}
    return Scenarios(columns, len(combos), tuple(values.items()))


def monte_carlo(dists: Mapping[str, Distribution | Sequence[Any] | float], n: int,
                seed: int) -> Scenarios:
    """``n`` scenarios drawn from ``dists`` (a Distribution, a constant, or ``n`` given
    values per parameter) with ``numpy.random.default_rng(seed)``, parameters in the order
    given: the same seed gives the same scenarios everywhere."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"monte_carlo(dists, n, seed) needs n >= 1 scenarios, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"monte_carlo(dists, n, seed) needs an int seed (the same seed gives "
                        f"the same scenarios), got {type(seed).__name__} {seed!r}")
    rng = np.random.default_rng(int(seed))
    columns: dict[str, Any] = {}
    for key, d in dists.items():
        if isinstance(d, Distribution):
            columns[key] = np.asarray(d.draw(rng, int(n)))
        elif isinstance(d, numbers.Real):
            columns[key] = np.full(int(n), d)
        else:
            columns[key] = _column(key, d)
            if len(columns[key]) != n:
                raise ValueError(f"monte_carlo: {_label(key)!r} gives {len(columns[key])} "
                                 f"values for {n} scenarios")
    return Scenarios(columns, int(n))


def scenarios(params: Any) -> Scenarios:
    """What ``cp.sweep``'s ``params`` may be, as Scenarios: Scenarios, a list of dicts (each
    the same keys), or a dict of equal-length sequences (one scenario per index)."""
    if isinstance(params, Scenarios):
        return params
    if isinstance(params, Mapping):
        columns = {k: _column(k, v) for k, v in params.items()}
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"params: the sequences have different lengths "
                             f"{sorted(lengths)}; use cp.sweep.grid(...) for every combination")
        return _checked(Scenarios(columns, lengths.pop() if lengths else 0))
    if isinstance(params, Sequence) and not isinstance(params, str | bytes):
        rows = list(params)
        if not all(isinstance(r, Mapping) for r in rows):
            raise TypeError("params as a list holds one dict per scenario, e.g. "
                            "[{'kp': 0.1}, {'kp': 0.2}]")
        keys = list(rows[0]) if rows else []
        for k, r in enumerate(rows):
            if set(r) != set(keys):
                raise ValueError(f"params[{k}] sets {sorted(map(_label, r))}, params[0] sets "
                                 f"{sorted(map(_label, keys))}: every scenario sets the same "
                                 f"parameters")
        return _checked(Scenarios({key: _column(key, [r[key] for r in rows]) for key in keys},
                                  len(rows)))
    raise TypeError(f"params is cp.sweep.grid(...), cp.sweep.monte_carlo(...), a list of dicts "
                    f"or a dict of sequences, got {type(params).__name__}")


def _checked(s: Scenarios) -> Scenarios:
    if s.n == 0 or not s.columns:
        raise ValueError("params describe no scenario: give at least one parameter value")
    return s


def _column(key: str, values: Any) -> Any:
    if not isinstance(key, str):
        raise TypeError(f"parameters are named by their input's name (cp.value(..., "
                        f"name='kp')), got {type(key).__name__} {key!r}")
    col = np.asarray(values)
    if col.ndim != 1 or col.dtype.kind not in "biuf":
        raise TypeError(f"parameter {_label(key)!r}: one number per scenario, got "
                        f"{values!r}")
    return col


def _label(key: object) -> str:
    return key if isinstance(key, str) else repr(key)
