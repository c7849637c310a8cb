"""The plots of a sweep (matplotlib, the ``plot`` extra): the percentile envelope of a
signal over time, and a heat map of a metric over a 2-D parameter grid."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..plot import PLOT_EXTRA

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

__all__ = ["envelope_and_heatmap"]

#: (signal name, time, values of shape (scenarios, time))
Band = tuple[str, Any, Any]
#: (x label, x values, y label, y values, metric name, values of shape (len(x), len(y)))
Grid = tuple[str, Any, str, Any, str, Any]


def envelope_and_heatmap(band: Band | None, grid: Grid | None, percentiles: Sequence[float],
                         path: str | None, title: str) -> Any:
    """One figure: the envelope panel, the heat-map panel, or both side by side."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"plotting needs matplotlib: {PLOT_EXTRA}") from None
    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in (band, grid) if p is not None]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    k = 0
    if band is not None:
        _envelope(axes[0][k], band, percentiles)
        k += 1
    if grid is not None:
        _heatmap(fig, axes[0][k], grid)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig


def _envelope(ax: Any, band: Band, percentiles: Sequence[float]) -> None:
    name, time, values = band
    if values.ndim != 2:
        raise ValueError(f"the envelope of {name!r} needs one number per time: it is an "
                         f"array of shape {values.shape[2:]} per sample")
    qs = sorted(float(q) for q in percentiles)
    if not qs or not all(0 <= q <= 100 for q in qs):
        raise ValueError(f"percentiles are numbers in 0..100, got {list(percentiles)!r}")
    levels = np.percentile(values.astype(float), qs, axis=0)
    pairs = [(i, len(qs) - 1 - i) for i in range(len(qs) // 2)]
    for depth, (lo, hi) in enumerate(pairs):
        ax.fill_between(time, levels[lo], levels[hi], step="post", color="tab:blue",
                        alpha=0.15 + 0.15 * depth, linewidth=0,
                        label=f"{qs[lo]:g}-{qs[hi]:g} %")
    if len(qs) % 2:
        ax.step(time, levels[len(qs) // 2], where="post", color="tab:blue",
                label=f"{qs[len(qs) // 2]:g} % (median)" if qs[len(qs) // 2] == 50
                else f"{qs[len(qs) // 2]:g} %")
    ax.set_xlabel("simulated time [s]")
    ax.set_ylabel(name)
    ax.set_title(f"{name}: {values.shape[0]} scenarios")
    ax.grid(True, alpha=0.3)
    ax.legend()


def _heatmap(fig: Any, ax: Any, grid: Grid) -> None:
    xname, xs, yname, ys, metric, values = grid
    mesh = ax.pcolormesh(np.arange(len(ys) + 1), np.arange(len(xs) + 1), values,
                         shading="flat", cmap="viridis")
    ax.set_xticks(np.arange(len(ys)) + 0.5, [f"{y:.3g}" for y in ys], rotation=45)
    ax.set_yticks(np.arange(len(xs)) + 0.5, [f"{x:.3g}" for x in xs])
    ax.set_xlabel(yname)
    ax.set_ylabel(xname)
    ax.set_title(f"{metric} over the {len(xs)}x{len(ys)} grid")
    fig.colorbar(mesh, ax=ax, label=metric)
