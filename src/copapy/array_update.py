"""Item assignment on packed arrays as graph nodes, and NumPy's view bookkeeping by index maps
(docs/decisions/2026-12-05-numpy-item-assignment.md).

An assignment ``a[key] = v`` is a functional update: the array's content becomes a new node
(SSA), built of existing operations only: slices and strided copies laid end to end
(``concat``), or for a strided box one scatter and a ``where`` with a constant mask.

Which arrays see an assignment is NumPy's decision, made by NumPy itself: every array that
owns its elements has an index map ``arange(size).reshape(shape)``; an operation that may
give a view (basic indexing, reshape, transpose, ...) is applied to the parent's map, and the
result is a view exactly when NumPy's result shares the map's memory. A view's map holds the
flat positions of its elements in the owner. The maps are made only when an assignment makes
the answer matter (arrays.py, ``Pending``): tracing without assignments allocates none.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import dtypes as dt
from .graph import build, levels
from .graph.node import Node, const, const_array
from .graph.ops import REGISTRY

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

#: an assignment whose targets are this many runs or fewer is one concat of slices
RUNS_CONCAT = 16


class View:
    """That an array is a NumPy view of ``owner``: its elements are the owner's at the flat
    positions ``positions`` (of the view's shape); ``seen`` is the owner's version the view's
    content was last taken from."""

    __slots__ = ("owner", "positions", "seen")

    def __init__(self, owner: Any, positions: Any, seen: int) -> None:
        self.owner = owner
        self.positions = positions
        self.seen = seen


class Flat:
    """``a.flat`` of a copapy array: its elements in row-major order, read (a copy, as
    NumPy's ``a.flat[k]``) or assigned (NumPy's flatiter: the value flattened and repeated
    to the number of elements picked)."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    def __len__(self) -> int:
        return int(self.array.size)

    def __iter__(self) -> Any:
        return iter(self.array.flatten())

    def __getitem__(self, key: Any) -> Any:
        return self.array.flatten()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.array.assign_flat(key, value)


#: bumped by every assignment, anywhere: an array that may be a view is decided once this
#: moved on since it was made (before, its elements are the ones it was made with)
EPOCH = [0]


def arange(size: int) -> Any:
    """An owner's index map, flat (int32 where that holds every position: half the bytes)."""
    return np.arange(size, dtype=np.int32 if size < 2**31 else np.int64)


def storage(m: Any) -> Any:
    """The NumPy array that owns ``m``'s memory."""
    return m if m.base is None else m.base


def derive(maps: list[Any], owners: list[Any], op: Callable[[list[Any]], Any],
           shape: tuple[int, ...], what: str) -> tuple[View | None, str | None]:
    """(the view, or None for a copy; why assignment is refused, or None) of an array made by
    ``op`` (named ``what``) from arrays whose index maps are ``maps`` in ``owners``: NumPy's
    ``op`` run on the maps decides; where it cannot run, or writes a map, assignment is
    refused (whether it is a view is unknown)."""
    stores = [storage(m) for m in maps]
    try:
        with np.errstate(all="ignore"):
            m = op(maps)
    except Exception:  # NumPy could not run it on int maps
        m = None
    for stored in stores:
        if not np.array_equal(stored, np.arange(stored.size)):
            stored[...] = np.arange(stored.size)  # it wrote into its argument
            m = None
    if not isinstance(m, np.ndarray) or m.shape != shape:
        return None, (f"copapy cannot tell whether NumPy's {what} makes it a view of its "
                      f"argument (which assignment would write through); assign into a copy: "
                      f"y = {what}(...).copy()")
    for owner, stored in zip(owners, stores, strict=True):
        if storage(m) is stored:
            why = None if m.flags.writeable else (f"NumPy's {what} gives a read-only view; "
                                                  f"assign into a copy: y = {what}(...).copy()")
            return View(owner, m, -1), why
    return None, None


def levels_of(m: Any) -> tuple[int, list[tuple[int, int]]] | None:
    """``m`` (flat positions) as ``start + Σ i_k·step_k`` over its axes, or None."""
    start = int(m.flat[0])
    steps = []
    for k, n in enumerate(m.shape):
        steps.append(int(m[(0,) * k + (1,) + (0,) * (m.ndim - k - 1)]) - start if n > 1 else 0)
    expected = np.full((), start, np.int64)
    for n, s in zip(m.shape, steps, strict=True):
        expected = expected[..., None] + s * np.arange(n, dtype=np.int64)
    if not np.array_equal(expected.reshape(m.shape), m):
        return None
    return start, [(int(n), s) for n, s in zip(m.shape, steps, strict=True)]


def runs(flat: Any) -> list[tuple[int, int, int]]:
    """``flat`` as runs (start, step, count) of equally spaced numbers, in order."""
    out: list[tuple[int, int, int]] = []
    values = [int(v) for v in flat]
    i = 0
    while i < len(values):
        step = values[i + 1] - values[i] if i + 1 < len(values) else 1
        j = i + 1
        while j < len(values) and values[j] - values[j - 1] == step:
            j += 1
        out.append((values[i], step if j - i > 1 else 1, j - i))
        i = j
    return out


def _run(flat: Node, start: int, step: int, count: int) -> Node:
    if step == 0:
        return build.broadcast_to(build.index(flat, start), (count,))
    return build.strided(flat, start, step, count)


def gather(node: Node, positions: Any) -> Node:
    """The elements of ``node`` at the flat ``positions`` (a NumPy int array), packed in the
    positions' shape: one level gather when they are a strided box, else strided runs."""
    flat = build.reshape(node, (node.size,))
    shape = tuple(int(d) for d in positions.shape)
    box = levels_of(positions)
    spans = levels.merged(box[1]) if box is not None else []
    if box is not None and not spans:
        out = build.slice_(flat, box[0], 1)
    elif box is not None and len(spans) == 1 and spans[0][1] == 0:
        out = build.broadcast_to(build.index(flat, box[0]), (spans[0][0],))
    elif box is not None:
        out = levels.gather(flat, box[0], box[1])
    else:
        parts = [_run(flat, *r) for r in runs(positions.reshape(-1))]
        out = parts[0] if len(parts) == 1 else build.concat(parts, (positions.size,))
    return build.reshape(out, shape)


def scatter(node: Node, targets: Any, values: Node) -> Node:
    """``node`` with ``values`` (packed, one per target in the targets' order, of node's type)
    at the distinct flat ``targets``: the untouched slices and the values of each run of
    consecutive targets laid end to end; for many runs, one scatter and a select (a strided
    box of targets) or a select by a constant mask (one value everywhere)."""
    size = node.size
    flat = build.reshape(node, (size,))
    vals = build.reshape(values, (values.size,))
    fill = vals.args[0] if vals.op == "fill" else None
    order = np.argsort(targets.reshape(-1), kind="stable")
    pos = targets.reshape(-1)[order]
    breaks = (np.flatnonzero(np.diff(pos) != 1) + 1).tolist()
    if len(breaks) >= RUNS_CONCAT:
        box = levels_of(targets)
        if box is not None and fill is None:
            return build.reshape(_scatter_box(flat, box, vals), node.shape)
        if fill is not None:
            mask = np.zeros(size, bool)
            mask[pos] = True
            chosen = const_array(dt.storage_array(mask, dt.bool_).tobytes(), dt.bool_, (size,))
            whole = build.apply("where", chosen, build.broadcast_to(fill, (size,)), flat)
            return build.reshape(whole, node.shape)
    bounds = [0, *breaks, len(pos)]
    parts: list[Node] = []
    at = 0
    for a, b in itertools.pairwise(bounds):
        first = int(pos[a])
        if first > at:
            parts.append(build.slice_(flat, at, first - at))
        parts.append(build.broadcast_to(fill, (b - a,)) if fill is not None
                     else gather(vals, order[a:b]))
        at = int(pos[b - 1]) + 1
    if at < size:
        parts.append(build.slice_(flat, at, size - at))
    whole = parts[0] if len(parts) == 1 else build.concat(parts, (size,))
    return build.reshape(whole, node.shape)


def _scatter_box(flat: Node, box: tuple[int, list[tuple[int, int]]], vals: Node) -> Node:
    """Values at a strided box of ``flat``: scattered into zeros of the block the box spans,
    selected by the same scatter of True, the block put back between the untouched ends."""
    start, box_levels = box
    merged = levels.merged(box_levels)
    lo, hi = levels.extent(merged)
    first, length = start + lo, hi - lo + 1
    counts = tuple(c for c, _ in merged)
    steps = tuple(s for _, s in merged)
    block = build.slice_(flat, first, length)
    if len(merged) == 1:
        offset = start - first
        spread = build.scatter(vals, offset, steps[0], length)
        mask = build.scatter(build.broadcast_to(const(True, dt.bool_), (vals.size,)), offset,
                             steps[0], length)
    else:
        spread = levels.scatter(vals, counts, steps, length)
        mask = levels.scatter(build.broadcast_to(const(True, dt.bool_), (vals.size,)), counts,
                              steps, length)
    middle = build.apply("where", mask, spread, block)
    parts = [p for p in (build.slice_(flat, 0, first) if first else None, middle,
                         build.slice_(flat, first + length, flat.size - first - length)
                         if first + length < flat.size else None) if p is not None]
    return parts[0] if len(parts) == 1 else build.concat(parts, (flat.size,))


def element(node: Node, k: int) -> Node | None:
    """Element ``k`` (flat) of a packed node as a scalar expression, followed through views,
    concatenations and element-wise operations (equal elements give the same hash-consed
    node), or None where that cannot be told without running the program."""
    if not node.shape:
        return node
    op = node.op
    if op in ("reshape", "fill"):
        return element(node.args[0], 0 if op == "fill" else k)
    if op == "stack":
        return node.args[k]
    if op == "slice":
        return element(node.args[0], node.attr[0] + k)  # type: ignore[index]
    if op == "sgather":
        start, step, _ = build.strided_attr(node)
        return element(node.args[0], start + k * step)
    if op == "ngather":
        counts, steps, _ = levels.level_attr(node)
        base = sum((c - 1) * -s for c, s in zip(counts, steps, strict=True) if s < 0)
        offset = base
        for c, s in reversed(list(zip(counts, steps, strict=True))):
            offset, k = offset + (k % c) * s, k // c
        return element(node.args[0], offset)
    if op == "concat":
        for part in node.args:
            if k < part.size:
                return element(part, k)
            k -= part.size
    if op == "const":
        return build.index(node, k)
    spec = REGISTRY.get(op)
    if spec is None or spec.shape_rule != "elementwise" or any(
            a.shape not in ((), node.shape) for a in node.args):
        return None
    parts = [element(a, k) for a in node.args]
    if any(p is None for p in parts):
        return None
    return build.apply(op, *parts)  # type: ignore[arg-type]


def constant_values(value: Any, kind: dt.DType, shape: tuple[int, ...]) -> Any:
    """Numbers assigned into elements of ``shape`` of an array of ``kind``, converted and
    broadcast as NumPy's assignment does it (int from float truncates; NaN or a number out
    of range raise NumPy's own error)."""
    target = np.bool_ if kind.is_bool else np.dtype(kind.numpy)
    out = np.empty(shape, target)
    with np.errstate(invalid="raise", over="raise"):
        try:
            if out.ndim == 0 and np.ndim(value) == 0:
                out[()] = value
            else:
                out[...] = value
        except (ValueError, OverflowError, FloatingPointError) as error:
            raise type(error)(f"{error} (assigning {value!r} into a copapy {kind.name} array, "
                              f"as NumPy converts it)") from None
    return out
