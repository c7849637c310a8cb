"""Plots of traced values over time (matplotlib, the ``plot`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PLOT_EXTRA = "pip install 'copapy[plot]' (matplotlib)"


def step_plot(time: Any, columns: Sequence[tuple[str, Any]], path: str | None = None,
              title: str = "", xlabel: str = "simulated time [s]") -> Any:
    """One step line per column over ``time``; saved to ``path`` if given (no window then).
    Returns the matplotlib figure."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"plotting needs matplotlib: {PLOT_EXTRA}") from None
    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, values in columns:
        ax.plot(time, values, label=label, drawstyle="steps-post")
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig
