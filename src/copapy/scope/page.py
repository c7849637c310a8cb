"""The scope's page: a Bokeh document per browser tab (plot, state banner, controls,
start/stop, recording), updated from the core ten times a second."""

from __future__ import annotations

import time
from html import escape
from pathlib import Path
from typing import Any

from bokeh.document import Document
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource
from bokeh.models.widgets.buttons import Button
from bokeh.models.widgets.inputs import Checkbox, NumericInput, Select
from bokeh.models.widgets.markups import Div
from bokeh.models.widgets.sliders import Slider
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from .core import Control, Core
from .record import formats

#: milliseconds between page updates
UPDATE_MS = 100
BANNER_BASE = {"padding": "6px 12px", "font-size": "18px", "font-weight": "bold"}
BANNER_STYLE = {
    "running": "background:#1b5e20;color:white",
    "stopped": "background:#616161;color:white",
    "FAULTED": "background:#b71c1c;color:white",
    "link lost": "background:#e65100;color:white",
}


def build(doc: Document, core: Core, recordings: Path) -> None:
    """Fill ``doc`` with the scope of ``core``; recordings started from the page go to
    ``recordings`` (a directory)."""
    labels = core.display.labels
    source = ColumnDataSource({"time": [], **{k: [] for k in labels}}, name="data")
    plot = figure(height=380, sizing_mode="stretch_width", x_axis_label="time [s]",
                  name="plot")
    for k, label in enumerate(labels):
        plot.line("time", label, source=source, legend_label=label,
                  color=Category10_10[k % 10], line_width=1.5)
    plot.legend.location = "top_left"
    banner = Div(text="", name="banner", styles=dict(BANNER_BASE))
    info = Div(text="", name="info")
    latest = Div(text="", name="latest")
    start, stop = Button(label="start", name="start"), Button(label="stop", name="stop")
    start.on_click(lambda: core.start())
    stop.on_click(lambda: core.stop())
    options: list[str | tuple[Any, str]] = list(formats())
    fmt = Select(title="format", value="csv", options=options, name="format", width=100)
    record = Button(label="record", name="record", button_type="success")
    state = {"next": 0, "updates": 0}

    def toggle_record() -> None:
        if core.recording is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            core.start_recording(recordings / f"scope-{stamp}.{fmt.value}")
        else:
            core.stop_recording()

    record.on_click(toggle_record)
    widgets = [control_widget(c, core) for c in core.controls]

    def update() -> None:
        state["next"], data = core.display.since(state["next"])
        if len(data["time"]):
            source.stream({k: v.tolist() for k, v in data.items()},
                          rollover=core.display.capacity)
        status = core.status()
        banner.text = escape(status.text)  # a Div holds HTML; messages quote reprs
        banner.styles = {**BANNER_BASE, **_style(status.state)}
        state["updates"] += 1
        rec = core.recording
        record.label = "stop recording" if rec else "record"
        record.button_type = "danger" if rec else "success"
        done = f"; last recording {core.last_recording}" if core.last_recording and not rec \
            else ""
        lost = core.lost()
        info.text = (f"ticks received <b>{core.received}</b>"
                     f"{f', <b>{lost} lost on the link</b>' if lost else ''}"
                     f", recorded <b>{core.recorded}</b>"
                     f"{f' to {escape(str(rec))}' if rec else ''}{escape(done)}; page updates "
                     f"<span id='updates'>{state['updates']}</span>")
        latest.text = "<br>".join(f"{escape(k)} = <span class='value' data-label='{escape(k)}'>"
                                  f"{v:.6g}</span>" for k, v in core.display.latest.items())

    update()
    doc.add_periodic_callback(update, UPDATE_MS)
    doc.title = "copapy scope"
    doc.add_root(column(banner, plot, row(start, stop, fmt, record), info,
                        row(column(*widgets, name="controls"), latest),
                        sizing_mode="stretch_width"))


def _style(state: str) -> dict[str, str]:
    return dict(part.split(":") for part in BANNER_STYLE.get(state, "").split(";") if part)


def control_widget(c: Control, core: Core) -> Any:
    """The widget writing ``c``: its changes go to the target."""
    name = f"control-{c.label}"
    if c.kind == "toggle":
        box = Checkbox(label=c.label, active=bool(c.initial), name=name)
        box.on_change("active", lambda _a, _o, new: core.write(c.key, bool(new)))
        return box
    if c.kind == "slider":
        assert c.lo is not None and c.hi is not None
        step = 1 if c.integer else (c.hi - c.lo) / 1000
        slider = Slider(title=c.label, start=c.lo, end=c.hi, step=step, value=c.initial,
                        name=name, width=400)
        slider.on_change("value", lambda _a, _o, new: core.write(
            c.key, int(new) if c.integer else float(new)))
        return slider
    field = NumericInput(title=c.label, value=c.initial, mode="int" if c.integer else "float",
                         name=name, width=200)

    def typed(_attr: str, _old: Any, new: Any) -> None:
        if new is not None:  # an emptied field writes nothing
            core.write(c.key, int(new) if c.integer else float(new))

    field.on_change("value", typed)
    return field
