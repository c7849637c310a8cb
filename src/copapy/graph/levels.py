"""Strided views of N-D packed arrays as level gathers (issue 31): a slice of any steps in any
axes picks the flat indices ``start + Σ i_l·step_l`` (``i_l < count_l``), row-major over the
levels. After merging levels that are one run of another, one level is the 1-D strided copy
(``sgather``, or a contiguous view), two or three are one ``ngather`` stencil over the block the
view spans, more are gathered in two passes (the outer levels with the inner block, then the
inner levels). Node counts and code are independent of the array's size."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from .build import apply, make, reshape, slice_, stack, strided
from .lanes import reduce_in_lane_order
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
    adjoint of an ngather. Levels that visit every element of the block once (a permutation:
    transposes, reversals) are undone by the inverse gather, one pass with no zeros; levels
    of step 0 (a broadcast repeats elements) sum their copies first."""
    if any(s == 0 and c > 1 for c, s in zip(counts, steps, strict=True)):
        return _sum_repeats(node, counts, steps, size)
    inverse = inverse_levels(counts, steps, size)
    if inverse is not None:
        start, back = inverse
        return gather(reshape(node, (node.size,)), start, back)
    return make(REGISTRY["nscatter"], (node,), (counts, steps, size))


def _sum_repeats(node: Node, counts: tuple[int, ...], steps: tuple[int, ...], size: int
                 ) -> Node:
    """The adjoint of a gather that repeats elements (levels of step 0: a broadcast): each
    element's copies summed in the lane order (as an axis sum: whole rows added when there are
    fewer copies than elements, else one row sum per element), then scattered by the other
    levels."""
    repeat = [k for k, (c, s) in enumerate(zip(counts, steps, strict=True)) if s == 0 and c > 1]
    kept = [k for k in range(len(counts)) if k not in repeat]
    copies, elements = (math.prod(counts[k] for k in ks) for ks in (repeat, kept))
    if copies <= elements:
        rows = permute(node, counts, [*repeat, *kept])
        summed = reduce_in_lane_order([slice_(rows, r * elements, elements)
                                       for r in range(copies)], lambda x, y: apply("add", x, y))
    else:
        rows = permute(node, counts, [*kept, *repeat])
        summed = stack([apply("rsum", slice_(rows, e * copies, copies))
                        for e in range(elements)], (elements,))
    return scatter(summed, tuple(counts[k] for k in kept), tuple(steps[k] for k in kept), size)


def inverse_levels(counts: Sequence[int], steps: Sequence[int], size: int
                   ) -> tuple[int, list[Level]] | None:
    """(start, levels) of the gather that undoes the levels' gather when they permute a block
    of ``size`` elements (their |steps|, sorted, are the mixed radix of their counts), else
    None. Level l of the result steps by the levels' own output stride, signed as its step,
    and the levels are ordered by |step| from the largest."""
    if math.prod(counts) != size:
        return None
    order = sorted((k for k in range(len(counts)) if counts[k] > 1), key=lambda k: abs(steps[k]))
    radix = 1
    for k in order:
        if abs(steps[k]) != radix:
            return None
        radix *= counts[k]
    strides = [math.prod(counts[k + 1:]) for k in range(len(counts))]
    back = [(counts[k], strides[k] if steps[k] > 0 else -strides[k]) for k in reversed(order)]
    start = sum((counts[k] - 1) * strides[k] for k in order if steps[k] < 0)
    return start, back


def permute(node: Node, shape: tuple[int, ...], perm: Sequence[int]) -> Node:
    """The packed array ``node`` of ``shape`` with its axes in the order ``perm`` (NumPy's
    transpose), flat: one gather with the axes' strides permuted (a view when no axis of more
    than one element moves), or two when the permutation leaves more than three levels (4-D)."""
    flat = reshape(node, (node.size,))
    steps = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    levels = [(shape[k], steps[k]) for k in perm]
    if len(merged(levels)) <= MAX_LEVELS:
        return gather(flat, 0, levels)
    middle = _two_passes(shape, tuple(perm))
    first = gather(flat, 0, [(shape[k], steps[k]) for k in middle])
    moved = tuple(shape[k] for k in middle)
    return permute(first, moved, [middle.index(k) for k in perm])


def _two_passes(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    """An order of the axes between the identity and ``perm`` such that both moves are at most
    three levels each (the fewest in total; there is one for every permutation of four axes)."""
    steps = [math.prod(shape[k + 1:]) for k in range(len(shape))]

    def cost(middle: tuple[int, ...]) -> tuple[int, int]:
        moved = tuple(shape[k] for k in middle)
        inner = [math.prod(moved[i + 1:]) for i in range(len(moved))]
        first = len(merged([(shape[k], steps[k]) for k in middle]))
        second = len(merged([(moved[middle.index(k)], inner[middle.index(k)]) for k in perm]))
        return max(first, second), first + second

    return min(itertools.permutations(range(len(shape))), key=cost)


def regather(node: Node, counts: tuple[int, ...], steps: tuple[int, ...]) -> Node:
    """The levels' elements of ``node`` (a block): the adjoint of an nscatter."""
    return make(REGISTRY["ngather"], (node,), (counts, steps, math.prod(counts)))
