"""Strided views of N-D packed arrays as level gathers (issue 31): a slice of any steps in any
axes picks the flat indices ``start + Σ i_l·step_l`` (``i_l < count_l``), row-major over the
levels. After merging levels that are one run of another, one level is the 1-D strided copy
(``sgather``, or a contiguous view), two or three are one ``ngather`` stencil over the block the
view spans, more are gathered in two passes (the outer levels with the inner block, then the
inner levels). Node counts and code are independent of the array's size."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .build import make, slice_, strided
from .node import Node
from .ops import REGISTRY

Level = tuple[int, int]  # (count, step in elements)
#: the levels one ngather stencil walks (stencils/include/cp_index.h)
MAX_LEVELS = 3


def merged(levels: Sequence[Level]) -> list[Level]:
    """``levels`` without those of count 1, and each level that continues the next one's run
    (``step == count·step`` of the inner) merged into it."""
    out: list[Level] = []
    for count, step in levels:
        if count == 1:
            continue
        if out and out[-1][1] == count * step:
            out[-1] = (out[-1][0] * count, step)
        else:
            out.append((count, step))
    return out


def extent(levels: Sequence[Level]) -> tuple[int, int]:
    """(lowest, highest) offset from the first element of the levels' indices."""
    lo = sum((c - 1) * s for c, s in levels if s < 0)
    hi = sum((c - 1) * s for c, s in levels if s > 0)
    return lo, hi


def gather(node: Node, start: int, levels: Sequence[Level]) -> Node:
    """The elements ``start + Σ i_l·step_l`` of ``node`` (flat, row-major) as a packed vector
    of Π count_l elements."""
    flat = merged(levels)
    count = math.prod(c for c, _ in flat)
    lo, hi = extent(flat)
    if start + lo < 0 or start + hi >= node.size:
        raise IndexError(f"strided view start {start}, levels {list(levels)} out of range for "
                         f"shape {node.shape}")
    if not flat:
        return slice_(node, start, 1)
    if len(flat) == 1:
        return strided(node, start, flat[0][1], count)
    block = slice_(node, start + lo, hi - lo + 1)
    return _gather_block(block, flat)


def _gather_block(block: Node, levels: list[Level]) -> Node:
    """``levels`` (at least two, their extent exactly the block) of ``block``."""
    if len(levels) > MAX_LEVELS:
        # the first two levels with the whole span of the others, then those in each run
        inner = levels[2:]
        lo, hi = extent(inner)
        span = hi - lo + 1
        rows = _gather_block(block, [*levels[:2], (span, 1)])
        return _gather_block(rows, [(levels[0][0] * levels[1][0], span), *inner])
    counts = tuple(c for c, _ in levels)
    steps = tuple(s for _, s in levels)
    return make(REGISTRY["ngather"], (block,), (counts, steps, math.prod(counts)))


def level_attr(node: Node) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(counts, steps, size of the result) of an ngather or nscatter."""
    attr: tuple[tuple[int, ...], tuple[int, ...], int] = node.attr  # type: ignore[assignment]
    return attr


def scatter(node: Node, counts: tuple[int, ...], steps: tuple[int, ...], size: int) -> Node:
    """Zeros of ``size`` (the block) with ``node``'s elements at the levels' indices: the
    adjoint of an ngather."""
    return make(REGISTRY["nscatter"], (node,), (counts, steps, size))


def regather(node: Node, counts: tuple[int, ...], steps: tuple[int, ...]) -> Node:
    """The levels' elements of ``node`` (a block): the adjoint of an nscatter."""
    return make(REGISTRY["ngather"], (node,), (counts, steps, math.prod(counts)))
