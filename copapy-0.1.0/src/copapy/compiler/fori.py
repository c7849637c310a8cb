"""A chain with counted loops (``cp.fori_loop``, graph/loop.py): lowered in segments.

Without loops a chain is one ``lower_chain``. With loops it is cut where the loops are: for
each loop (in dependency order) the values it needs, then its body between the counted loop's
begin and end stencils (stencils/fori.c), and after the last loop the rest. Each segment is an
ordinary chain lowering that starts and ends with empty registers, so the segments are simply
concatenated; values cross segments and iterations in data slots:

* a loop's state: one *carry* slot per element (the state an iteration starts from; after the
  loop, the loop's result) and one *next* slot (what the body computes), copied to the carry
  slot at the end of every iteration, after the whole body has read the carries;
* a value computed in one segment and read by a later one: a slot stored once;
* the counter and the bound: a slot each, which the image's FROZEN list covers (the bound is
  fixed in the image; only the loop's own stencils write the counter).

docs/decisions/2026-12-04-fori-loop.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..dtypes import int32
from ..graph.loop import FORI, LoopBody, body_of
from ..graph.node import Node
from ..graph.traverse import live_nodes
from .layout import DataLayout
from .lower import ChainSpec, CompileError, Instr, lower_chain
from .runner_table import FORI_BEGIN, FORI_END
from .table import StencilTable

_Segment = tuple[list[Node], ChainSpec]  # (roots, spec) of an ordinary chain lowering


def _align(node: Node) -> int:
    return 16 if node.shape else node.dtype.size


def loops_in(live: Sequence[Node]) -> list[LoopBody]:
    """The loops whose results ``live`` holds, in the order they can run."""
    found: dict[int, LoopBody] = {}
    for node in live:
        if node.op == FORI:
            body = body_of(node)
            found.setdefault(body.serial, body)
    return list(found.values())


def lower_with_loops(spec: ChainSpec, table: StencilTable, layout: DataLayout,
                     progress: Callable[[int, int], None] | None = None,
                     live: Sequence[Node] | None = None) -> tuple[list[Instr], int]:
    """``lower_chain`` for a chain that may hold counted loops."""
    every = live if live is not None else live_nodes(
        [*spec.stores, *(s for s, _, _ in spec.end_copies)], stop=spec.placed)
    loops = loops_in(every)
    if not loops:
        return lower_chain(spec, table, layout, progress, live)
    if FORI_BEGIN not in table or FORI_END not in table:
        raise CompileError(f"the {table.arch} stencil table has no counted loop "
                           f"({FORI_BEGIN}, stencils/fori.c), so cp.fori_loop does not compile "
                           f"for {table.arch}: unroll the loop there (a Python for loop over "
                           f"the body)")
    where: dict[Node, int] = dict(spec.placed)  # every value in memory so far -> its slot
    results: dict[int, list[Node]] = {}
    for node in every:
        if node.op == FORI:
            results.setdefault(body_of(node).serial, []).append(node)
    # plan: the segments in order; a value is stored by the segment computing it if a later
    # one reads it (decided after all segments are known)
    plan: list[tuple[str, list[Node], set[Node], LoopBody | None]] = []
    avail: set[Node] = set(spec.placed)
    for loop in loops:
        inits = [loop_init(loop, k, results) for k in range(len(loop.carries))]
        roots = [x for x in (*inits, *loop.captures) if x not in avail]
        pre = live_nodes(roots, stop=avail)
        plan.append(("pre", roots, {n for n in pre if n not in avail}, loop))
        avail.update(pre)
        avail.update(results.get(loop.serial, ()))
    final_roots = [*spec.stores, *(s for s, _, _ in spec.end_copies)]
    final = live_nodes(final_roots, stop=avail)
    plan.append(("final", final_roots, {n for n in final if n not in avail}, None))
    # what each segment reads (its loop's captures and initial states included)
    reads: list[set[Node]] = []
    for _, roots, computed, owner in plan:
        read = set(roots) | {a for n in computed for a in n.args}
        if owner is not None:
            read.update(owner.captures)
            read.update(loop_init(owner, k, results) for k in range(len(owner.carries)))
        reads.append(read)
    instrs: list[Instr] = []
    ops = 0
    for index, (kind, _, computed, current) in enumerate(plan):
        needed: set[Node] = set().union(*reads[index + 1:]) if kind == "pre" else set()
        if current is not None:
            needed.update(current.captures)  # the body reads them on every iteration
        stores: dict[Node, list[int]] = {}
        for node in computed:
            if node in needed and node.op != "const" and node not in where:
                stores[node] = [layout.alloc(node.nbytes, align=_align(node))]
        if kind == "final":
            for node, offsets in spec.stores.items():
                stores.setdefault(node, []).extend(offsets)
            last = ChainSpec(dict(where), stores, list(spec.end_copies))
            part, count = lower_chain(last, table, layout, progress)
            instrs += part
            ops += count
            break
        assert current is not None
        loop = current
        carry_slots = [layout.alloc(c.nbytes, align=_align(c)) for c in loop.carries]
        for k, slot in enumerate(carry_slots):
            stores.setdefault(loop_init(loop, k, results), []).append(slot)
        part, count = lower_chain(ChainSpec(dict(where), stores, []), table, layout, progress)
        instrs += part
        ops += count
        # a carry slot holds the initial state only until the loop runs (then its result):
        # an initial value read later (a constant 1.0 used again after the loop) must not be
        # found there
        carries = set(carry_slots)
        for node, offsets in stores.items():
            kept = [o for o in offsets if o not in carries]
            if kept:
                where.setdefault(node, kept[0])
        if loop.n > 0:
            part, count = _loop(loop, carry_slots, where, table, layout, progress)
            instrs += part
            ops += count
        for node in results.get(loop.serial, ()):
            where[node] = carry_slots[node.attr[1]]  # type: ignore[index]
    return instrs, ops


def loop_init(loop: LoopBody, k: int, results: dict[int, list[Node]]) -> Node:
    """The initial state element ``k`` of ``loop`` (an operand of each of its results)."""
    return results[loop.serial][0].args[k]


def _loop(loop: LoopBody, carry_slots: list[int], where: dict[Node, int],
          table: StencilTable, layout: DataLayout,
          progress: Callable[[int, int], None] | None) -> tuple[list[Instr], int]:
    """begin, the body (once), the copies of the next state into the carries, end."""
    counter = layout.alloc(4, align=4)
    bound = layout.alloc(4, int32.pack(loop.n), 4)
    placed = {c: s for c, s in zip(loop.carries, carry_slots, strict=True)}
    placed.update({c: where[c] for c in loop.captures})
    if loop.index is not None:  # the counter is the iteration's number while the body runs
        placed[loop.index] = counter
    next_slots = [layout.alloc(c.nbytes, align=_align(c)) for c in loop.carries]
    stores: dict[Node, list[int]] = {}
    for out, slot in zip(loop.outputs, next_slots, strict=True):
        stores.setdefault(out, []).append(slot)
    body, ops = lower_chain(ChainSpec(placed, stores, []), table, layout, progress)
    copies = ChainSpec({c: s for c, s in zip(loop.carries, next_slots, strict=True)},
                       {c: [s] for c, s in zip(loop.carries, carry_slots, strict=True)}, [])
    copy, _ = lower_chain(copies, table, layout, progress)
    return ([Instr(FORI_BEGIN, (("out", counter),)), *body, *copy,
             Instr(FORI_END, (("out", counter), ("n", bound)))], ops)
