"""Value ranges at compile time: ``cp.ranges``, ``cp.check`` and what tg.bind declares.

The analysis is graph/ranges.py's; this is the DSL's side of it: which values to analyse,
the ranges I/O channels deliver, and the error (or warning) a domain error raises. The
guide's page docs/guide/concepts/ranges.md shows it at work.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ._contract import IoKind
from .dtypes import INT32_MAX, INT32_MIN
from .graph.build import rebuild
from .graph.intervals import Interval, hull, rounded_bounds
from .graph.location import describe
from .graph.loop import FORI, body_of, result_index
from .graph.node import Node, const
from .graph.ranges import Analysis, Report, analyse, declare, declared, undeclared
from .graph.traverse import live_nodes
from .graph.unroll import relooped
from .io import Channel
from .value import flatten

__all__ = ["Interval", "RangeError", "RangeWarning", "channel_range", "check", "ranges"]


class RangeError(ValueError):
    """An operation's operand ranges admit a domain error (division by zero, sqrt of a
    negative number, int32 overflow ...); the message lists each with its source line."""

    def __init__(self, reports: list[Report], notes: list[str]) -> None:
        self.reports = reports
        count = len(reports) + sum(1 for n in notes if not n.startswith("note:"))
        lines = [f"{count} problem(s) for values in the declared ranges:"]
        lines += [str(r) for r in reports]
        lines += notes
        lines.append("declare input ranges with cp.value(x, range=(lo, hi)); cp.ranges(v) shows "
                     "a value's range (docs/guide/concepts/ranges.md)")
        super().__init__("\n".join(lines))


class RangeWarning(UserWarning):
    """``cp.check(..., warn=True)``: a RangeError's finding, as a warning."""


def channel_range(channel: Channel) -> tuple[float, float]:
    """The values an I/O channel carries: GPIO 0/1, PWM duty and DAC level 0..1, an ADC 0..1
    of full scale, an encoder any int32 count; or the channel's declared ``span``."""
    if channel.span is not None:
        return channel.span
    if channel.kind == IoKind.ENCODER:
        return float(INT32_MIN), float(INT32_MAX)
    return 0.0, 1.0


def bind_range(node: Node, channel: Channel) -> None:
    """tg.bind: an input takes its channel's range (narrowed by a range it declared)."""
    if node.op != "input":
        return
    # (outward into the input's type: a float32 input holds 0.6 from a channel spanning
    # (0.1, 0.6) as 0.6000000238)
    lo, hi, _ = rounded_bounds(Interval(*channel_range(channel)), node.dtype)
    own = declared(node)
    if own is not None:
        lo, hi = max(lo, own.lo), min(hi, own.hi)
        if lo > hi:
            raise RangeError([], [f"{channel!r} delivers {channel_range(channel)}, outside the "
                                  f"range {own} the input declares"])
    declare(node, lo, hi)


def _outputs_reports(analysis: Analysis, bindings: Mapping[Node, Channel],
                     strict: bool) -> list[str]:
    """Outputs that drive a channel with values outside what it takes."""
    notes = []
    for node, channel in bindings.items():
        if not channel.is_output or node not in analysis.ranges:
            continue
        if not strict and undeclared([node], analysis.unbounded):
            continue
        r = analysis.ranges[node]
        lo, hi = channel_range(channel)
        if r.lo < lo or r.hi > hi or r.nan:
            notes.append(f"{describe(node)}\n    out of channel range: {channel!r} takes "
                         f"[{lo:g}, {hi:g}], the value ranges over {r}\n    fix: clamp it: "
                         f"cp.clamp(x, {lo:g}, {hi:g})")
    return notes


def analysis(*outputs: Any) -> Analysis:
    return analyse(flatten(outputs, "cp.check()"))


def ranges(x: Any) -> Interval:
    """The range of a value (an array: of all its elements): ``Interval(lo, hi, nan)``, every
    value it can take for inputs in their declared ranges (``nan``: NaN is one of them). An
    unbounded signal state (an integrator with neither a declared range nor a clamp) gives
    an infinite range, never a guess."""
    nodes = flatten([x], "cp.ranges()")
    found = analyse(nodes).ranges
    out = found[nodes[0]]
    for n in nodes[1:]:
        out = hull(out, found[n])
    return out


def check(*outputs: Any, warn: bool = False, strict: bool = False,
          bindings: Mapping[Node, Channel] | None = None) -> Analysis:
    """Report every operation the outputs depend on whose operand ranges admit a domain
    error: ``RangeError`` listing each with its source line, operand ranges and fix (or,
    with ``warn=True``, one ``RangeWarning`` each). Returns the analysis.

    Operations whose operands depend on an input without a declared range (its range is
    then every value of its type, NaN included) or on an unbounded signal state (a run
    counter, an integral without a range) are reported only with ``strict=True``; otherwise
    a note counts them (declare the inputs' ranges, bound the states, to have them
    checked)."""
    found = analyse(flatten(outputs, "cp.check()"))
    assumed = [r for r in found.reports if r.assumed]
    if not strict:
        found.reports = [r for r in found.reports if not r.assumed]
    notes = _outputs_reports(found, bindings or {}, strict)
    if found.split_budget_exhausted:
        notes.append("note: the program has more cp.where guards over the same inputs than "
                     "the analysis splits; some guarded operations may be reported")
    in_loops = sum(1 for r in assumed if r.node not in found.ranges)  # (a body's own pass)
    if len(assumed) > in_loops and not strict:
        notes.append(f"note: {len(assumed) - in_loops} operation(s) depend on inputs without a "
                     f"declared range or on unbounded signal states and were not checked "
                     f"(cp.check(..., strict=True) reports them)")
    if in_loops and not strict:
        notes.append(f"note: {in_loops} operation(s) in cp.fori_loop bodies were not checked: "
                     f"a body is analysed with its state at every value of its type (no fixed "
                     f"point over the iterations); cp.check(..., strict=True) reports them")
    notes += [f"note: the signal state of {describe(s)} is unbounded (give it a range: "
              f"cp.integrate(x, range=(lo, hi)), cp.feedback(f, range=...), or clamp it)"
              for s in found.unbounded]
    if found.reports or (notes and any("out of channel" in n for n in notes)):
        if warn:
            for r in found.reports:
                warnings.warn(str(r), RangeWarning, stacklevel=2)
            for n in notes:
                warnings.warn(n, RangeWarning, stacklevel=2)
        else:
            raise RangeError(found.reports, notes)
    return found


def folded(outputs: list[Node], found: Analysis) -> dict[Node, Node]:
    """Comparisons the ranges decide, as constants (and what depends on them rebuilt): the
    compiler's ``fold`` mapping. Outputs themselves are left as they are (their ports)."""
    keep = set(outputs)
    decided = {n: const(v, n.dtype) for n, v in found.decided.items() if n not in keep}
    if not decided:
        return {}
    live = live_nodes(outputs)
    # a cp.fori_loop result whose operands change is a result of a new loop over them (its
    # body rebuilt over the new captures; rebuild knows no loops), loops in order
    mapping: dict[Node, Node] = dict(decided)
    loops: dict[int, list[Node]] = {}
    for node in live:
        if node.op != FORI or node in mapping:
            continue
        serial = body_of(node).serial
        if serial not in loops:
            changed = rebuild(live_nodes(list(node.args)), mapping)
            args = [changed.get(a, a) for a in node.args]
            loops[serial] = ([] if all(a is b for a, b in zip(args, node.args, strict=True))
                             else relooped(node, args))
        if loops[serial]:
            mapping[node] = loops[serial][result_index(node)]
    return {n: m for n, m in rebuild(live, mapping).items()
            if not (n in keep and m.op == "const")}
