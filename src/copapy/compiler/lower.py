"""Lowering: schedule the graph, keep values in the chain's virtual registers, pick stencils.

Every stencil reads its operands from one of two registers of their class (f32, f64, i32) or
from a data slot, and writes its result into a register. The allocator is a linear scan over
the schedule with Belady's rule (evict the value used furthest in the future); a value is
stored to a slot only if it is evicted while still needed, or if it is an output. Temporary
slots are reused once their value is dead. Everything is linear in the number of nodes.

The per-node loops (the uses of every value, the lowering of scalar operations) run in C
(``compiler/_lower.c``) on this module's ``_Lowerer`` state; arrays, fused loops and the
rarer steps (spills, stores, releasing temporaries) are the methods below, which the C loop
calls.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..dtypes import DType, float64, int32
from ..graph.build import strided_attr
from ..graph.levels import MAX_LEVELS, level_attr
from ..graph.node import Node
from ..graph.ops import REGISTRY
from . import _lower, names
from .fuse import LOOP_BEGIN, Loop, find_loops, home, view_steps
from .inplace import store_in_place
from .layout import DataLayout
from .schedule import evaluation_order
from .table import StencilTable

NEVER = 1 << 62


class CompileError(ValueError):
    """The graph cannot be compiled for the chosen architecture."""


#: the operations lowered to a gather whose source may be read through a pointer slot
_GATHERS = frozenset({"sgather", "ngather", "transpose"})


class Instr(NamedTuple):
    """One stencil instance and the data slots its operand roles refer to (a named tuple:
    one is made per operation, and a tuple is the cheapest immutable record)."""

    stencil: str
    slots: tuple[tuple[str, int], ...]  # (role, data offset)


@dataclass
class ChainSpec:
    """What one chain must compute and where the values live.

    ``placed``: leaves already in memory (inputs, values of other tasks, state) -> offset.
    ``stores``: nodes whose value must be written to these offsets (outputs, next state).
    ``end_copies``: (src, dst) slot copies after everything else (state takes its update).
    ``in_place``: array inputs to read through a pointer slot where they can be (@cp.jit):
    each element-wise use runs in a fused loop, a single operation too. ``pointers`` (filled
    by ``lower_chain``): those whose every read goes through their pointer slot -> its offset;
    with ``in_place``, also the outputs whose only write is a fused loop's store through their
    pointer slot and that nothing reads (a caller may point it at a fresh array).
    """

    placed: dict[Node, int]
    stores: dict[Node, list[int]]
    end_copies: list[tuple[Node, int, int]]
    in_place: set[Node] = field(default_factory=set)
    pointers: dict[Node, int] = field(default_factory=dict)


def _class(dtype: DType) -> str:
    return dtype.stencil




def _scalar_name(node: Node, dst: int, forms: str) -> str:
    """The stencil of scalar ``node`` into register ``dst``, its operands in ``forms`` (a
    character each: ``0``/``1`` a register, ``m`` a slot); _lower.c calls it."""
    return names.stencil(*_stencil_name(node), dst, *forms)


def _store_name(cls: str, reg: int | str) -> str:
    """The stencil that stores register ``reg`` (``m``: a slot) of type class ``cls``."""
    return names.stencil("store", cls, "m", str(reg))


def _stencil_name(node: Node) -> tuple[str, str]:
    """(family, operand type suffix) of the stencil that computes ``node``."""
    spec = REGISTRY[node.op]
    if node.op == "where":
        return "where", node.args[1].dtype.stencil
    operand = node.args[0].dtype
    if node.op == "cast_i32" and operand.is_bool:
        return "mov", "i32"
    return spec.stencil, operand.stencil


class _Lowerer:
    def __init__(self, table: StencilTable, layout: DataLayout,
                 stores: dict[Node, list[int]], in_place: set[Node] | None = None) -> None:
        self.table = table
        self.layout = layout
        self.stores = stores
        self.in_place: set[Node] = in_place or set()
        #: data offset -> the pointer slot a fused loop reads or writes that array through
        self.pointer_slots: dict[int, int] = {}
        #: the in-place candidates that something other than a fused loop reads
        self.copied: set[Node] = set()
        #: every node something computed reads (with in_place only)
        self.read: set[Node] = set()
        self.instrs: list[Instr] = []
        self.regs: dict[str, list[Node | None]] = {"f32": [None, None], "f64": [None, None],
                                                   "i32": [None, None]}
        self.mem: dict[Node, int] = {}  # node -> slot offset
        self.temp_of: dict[Node, int] = {}  # node -> temporary slot offset (to release)
        #: remaining use positions of each value, latest first (consumed with pop())
        self.remaining: dict[Node, list[int]] = {}
        self.fused: dict[Node, tuple[str, Node, Node, Node, Node]] = {}
        #: stencil names already checked against the table
        self.known: set[str] = set()
        #: op -> its name's operand type -> the scalar stencil names by register and operand
        #: forms (filled by _lower.c)
        self.names: dict[str, dict[DType, list[str | None]]] = {}
        self.loops: dict[Node, Loop] = {}
        #: arrays computed straight into the slot of the reshape that is their only reader and
        #: an output nothing reads (with in_place only): the reshape copies nothing
        self.forward: dict[Node, Node] = {}
        #: outputs whose one store goes through their pointer slot (a fused loop's store, a
        #: gather's form p result): @cp.jit may aim the slot at a new array
        self.through_pointer: set[Node] = set()

    def next_use(self, node: Node) -> int:
        uses = self.remaining.get(node)
        return uses[-1] if uses else NEVER

    def advance(self, node: Node) -> None:
        """One use of ``node`` (and of the arrays a view of it looks into) is done."""
        self.remaining[node].pop()
        while node.op in VIEWS:
            node = node.args[0]
            self.remaining[node].pop()

    def emit(self, stencil: str, slots: list[tuple[str, int]]) -> None:
        self.check_stencil(stencil)
        self.instrs.append(Instr(stencil, tuple(slots)))

    def check_stencil(self, stencil: str) -> None:
        """CompileError if the table lacks ``stencil`` (each name is looked up once)."""
        if stencil not in self.known:
            if stencil not in self.table:
                raise CompileError(f"no stencil {stencil} for architecture {self.table.arch}")
            self.known.add(stencil)

    def store(self, node: Node, reg: int | str, offset: int, src: int | None = None) -> None:
        """``store_<class>__m_<reg>``: the value from register ``reg`` (or, for ``"m"``, from
        the slot ``src``) into the slot ``offset``."""
        _lower.store(self, node, reg, offset, src)

    def slot_of(self, node: Node) -> int:
        if node.op in VIEWS:
            base, shift = view_base(node)
            # a view whose base this chain does not hold has its own slot: an element of
            # another task's packed value, read through its LET port
            if base in self.mem or base.op == "const" or node not in self.mem:
                return self.slot_of(base) + shift
            return self.mem[node]
        offset = self.mem.get(node)
        if offset is not None:
            return offset
        if node.op != "const":
            raise AssertionError(f"{node!r} is neither in a register nor in memory")
        align = ARRAY_ALIGN if node.shape else node.dtype.size
        raw: bytes = node.attr  # type: ignore[assignment]
        offset = self.layout.constant(node.dtype, raw, align)
        self.mem[node] = offset
        return offset

    def chain_of(self, node: Node) -> list[Node]:
        """The node and, through views, the arrays whose memory it uses."""
        if node.op not in VIEWS:
            return [node]
        out = [node]
        while node.op in VIEWS:
            node = node.args[0]
            out.append(node)
        return out

    def lower(self, order: list[Node],
              progress: Callable[[int, int], None] | None = None) -> None:
        """``progress(done, total)`` is called every 1024 nodes (a compile's progress bar)."""
        self.fused = fused = self.find_fusions(order)
        skipped = {f[1] for f in fused.values()}
        self.loops = loops = find_loops(order, self.table, self.stores,
                                        lambda n: n in self.mem, skipped, _stencil_name,
                                        self.in_place)
        skipped.update(n for loop in loops.values() for n in loop.interior)
        if self.in_place:
            self.read = {a for node in order for a in node.args}
            # a reshape or slice that is no output reads nothing (its readers read its home)
            gathered = self.gathered_views(order)
            self.copied = {home(a) for node in order if node not in loops
                           and node not in skipped and not self.reads_in_place(node)
                           and not (node is not home(node) and node not in self.stores)
                           and node not in gathered
                           for a in node.args if home(a) in self.in_place}
            self.copied.update(a for node in fused for a in self.operands(node)
                               if a in self.in_place)
            self.forward = self.reshaped_outputs(order)
        # the per-node loops run in C (compiler/_lower.c): the uses of every value, then the
        # nodes (scalar operations there, arrays through lower_array)
        _lower.remaining_uses(self, order, skipped, fused.keys() | loops.keys())
        _lower.lower_nodes(self, order, skipped, progress)

    def find_fusions(self, order: Sequence[Node]) -> dict[Node, tuple[str, Node, Node, Node, Node]]:
        """dot(a op s, b) whose element-wise operand feeds nothing else: one pass, no temp.

        Returns dot -> (stencil family, fused operand, array a, scalar s, array b).
        """
        dots = [node for node in order if node.op == "dot"]
        if not dots:
            return {}
        counts: dict[Node, int] = {}
        for node in order:
            for a in node.args:
                counts[a] = counts.get(a, 0) + 1
        fused = {}
        for node in dots:
            for k, cand in enumerate(node.args):
                if (cand.op not in ("add", "sub", "mul") or counts.get(cand) != 1
                        or cand in self.stores or cand in self.mem):
                    continue
                x, y = cand.args
                if x.shape == cand.shape and not y.shape:
                    array, scalar, family = x, y, "dotsub" if cand.op == "sub" else "dot" + cand.op
                elif y.shape == cand.shape and not x.shape:
                    array, scalar, family = y, x, "dotrsub" if cand.op == "sub" else "dot" + cand.op
                else:
                    continue
                family_name = names.stencil(family, node.dtype.stencil, 0, "v", "m", "v")
                if family_name not in self.table:
                    continue
                fused[node] = (family, cand, array, scalar, node.args[1 - k])
                break
        return fused

    def operands(self, node: Node) -> tuple[Node, ...]:
        """What a node reads: a fused dot reads its element-wise operand's operands."""
        fusion = self.fused.get(node)
        if fusion is None:
            loop = self.loops.get(node)
            return node.args if loop is None else loop.leaves
        return fusion[2], fusion[3], fusion[4]

    def consume(self, node: Node) -> None:
        """The operands of ``node`` are used: advance next-use pointers, free dead values."""
        self.free_dead(self.use_operands(node))

    def use_operands(self, node: Node) -> tuple[Node, ...]:
        """Advance the operands' next-use pointers (without freeing anything yet)."""
        args = self.operands(node)
        for arg in args:
            self.advance(arg)
        return args

    def free_dead(self, args: Sequence[Node]) -> None:
        """Free the registers and slots of operands that are not used again."""
        for arg in args:
            for x in self.chain_of(arg):
                if self.next_use(x) == NEVER:
                    self.forget(x)

    def ensure_mem(self, node: Node) -> int:
        """A memory slot holding the scalar ``node`` (stored from its register if needed)."""
        if node in self.mem or node.op == "const" or node.op in VIEWS:
            return self.slot_of(node)
        regs = self.regs[_class(node.dtype)]
        reg = 0 if regs[0] is node else 1
        assert regs[reg] is node, f"{node!r} is neither in a register nor in memory"
        offset = self.layout.temp(node.dtype.size)
        self.store(node, reg, offset)
        self.mem[node] = offset
        self.temp_of[node] = offset
        return offset

    def const_int(self, value: int) -> int:
        return self.layout.constant(INT32, INT32.pack(value))

    def reshaped_outputs(self, order: Sequence[Node]) -> dict[Node, Node]:
        """Computed arrays whose only reader is a reshape that is an output (one slot) nothing
        reads -> that reshape: the array is computed into the output's slot (array_out), so
        neither a temporary nor a copy exists (a 2-D gather's result, ``m.T``)."""
        readers: dict[Node, int] = {}
        for node in order:
            for a in node.args:
                readers[a] = readers.get(a, 0) + 1
        computed = set(order)
        return {node.args[0]: node for node in order
                if node.op == "reshape" and len(self.stores.get(node, ())) == 1
                and node not in self.read and node.args[0] in computed
                and readers[node.args[0]] == 1 and node.args[0] not in self.stores
                and node.args[0].op not in VIEWS}

    def array_out(self, node: Node) -> int:
        offsets = self.stores.get(node)
        if offsets:
            offset = offsets[0]
        elif node in self.forward:
            offset = self.stores[self.forward[node]][0]
        else:
            offset = self.layout.temp(node.nbytes, ARRAY_ALIGN)
            self.temp_of[node] = offset
        self.mem[node] = offset
        return offset

    def copy_array(self, node: Node, src: int, dst: int) -> None:
        self.emit(names.stencil("mov", node.dtype.stencil, "v", "v"),
                  [("a", src), ("out", dst), ("n", self.const_int(node.size))])

    def copy_slot(self, node: Node, src: int, dst: int) -> None:
        """The value of ``node`` from slot ``src`` into slot ``dst``: every element of an
        array (a packed signal state and its update), a scalar's one."""
        if node.shape:
            self.copy_array(node, src, dst)
        else:
            self.store(node, "m", dst, src)

    def lower_array(self, node: Node) -> None:
        """Array values live in memory; reductions return a scalar in a register."""
        if node.op in VIEWS:
            self.consume(node)
            self.copy_stores(node)
            return
        loop = self.loops.get(node)
        if loop is not None:  # a lone strided view of an argument too (fuse.gather_step)
            self.lower_loop(node, loop)
            return
        suffix = node.args[0].dtype.stencil if node.args else node.dtype.stencil
        if node.op == "stack":
            out = self.array_out(node)
            for k, item in enumerate(node.args):
                regs = self.regs[_class(item.dtype)]
                dst = out + k * item.dtype.size
                if regs[0] is item or regs[1] is item:
                    self.store(item, 0 if regs[0] is item else 1, dst)
                else:
                    self.store(item, "m", dst, self.slot_of(item))
            self.consume(node)
            self.copy_stores(node, skip_first=True)
            return
        if node.op == "concat":
            out = self.array_out(node)
            pos = out
            for part in node.args:
                if part.shape:
                    self.copy_array(part, self.slot_of(part), pos)
                else:
                    self.store(part, "m", pos, self.ensure_mem(part))
                pos += part.nbytes
            self.consume(node)
            self.copy_stores(node, skip_first=True)
            return
        if node.op == "transpose":
            rows, cols = node.args[0].shape
            # out[c, r] = a[r, c]: the level gather (c, 1), (r, cols), one loop stencil
            self.lower_levels(node, "ngather", ((cols, 1), (rows, cols)))
            return
        if node.op in ("sgather", "sscatter"):
            self.lower_strided(node)
            return
        if node.op in ("ngather", "nscatter"):
            counts, steps, _ = level_attr(node)
            self.lower_levels(node, node.op, tuple(zip(counts, steps, strict=True)))
            return
        if node.op in ("argsort", "pgather", "pscatter"):
            self.lower_rows(node)
            return
        fusion = self.fused.get(node)
        if fusion is not None:
            family, _, array, scalar, other = fusion
            slots = [("a", self.slot_of(array)), ("c", self.ensure_mem(scalar)),
                     ("b", self.slot_of(other)), ("n", self.const_int(array.size))]
            # operands are freed only after the stencil: a spill by evict() must not land in
            # a slot the stencil still reads
            args = self.use_operands(node)
            regs = self.regs[_class(node.dtype)]
            dst = self.pick_register(regs)
            self.evict(regs, dst)
            self.emit(names.stencil(family, node.dtype.stencil, dst, "v", "m", "v"), slots)
            self.free_dead(args)
            self.finish_scalar(node, regs, dst)
            return
        family, suffix = _stencil_name(node)
        roles = ("c", "a", "b") if node.op == "where" else ("a", "b")[: len(node.args)]
        forms: list[str] = []
        slots = []
        for role, arg in zip(roles, node.args, strict=True):
            if arg.shape:
                forms.append("v")
                slots.append((role, self.slot_of(arg)))
            else:
                forms.append("m")
                slots.append((role, self.ensure_mem(arg)))
        dims = _dims(node)
        slots += [(role, self.const_int(v)) for role, v in dims]
        if node.shape:
            if REGISTRY[node.op].shape_rule == "elementwise":
                # element i only reads element i: the result may reuse an operand's slot
                self.consume(node)
                out = self.array_out(node)
            else:
                out = self.array_out(node)
                self.consume(node)
            self.emit(names.stencil(family, suffix, "v", *forms), [*slots, ("out", out)])
            self.copy_stores(node, skip_first=True)
            return
        # reduction to a scalar register (operands freed after the stencil, as above)
        args = self.use_operands(node)
        regs = self.regs[_class(node.dtype)]
        dst = self.pick_register(regs)
        self.evict(regs, dst)
        self.emit(names.stencil(family, suffix, dst, *forms), slots)
        self.free_dead(args)
        self.finish_scalar(node, regs, dst)

    def pointer_to(self, offset: int) -> int:
        """The pointer slot designating the array at ``offset`` (one per array offset, so an
        in-place input's reads all go through its one slot). Never an input's own slot for a
        result: inputs are placed, not temporaries, so no result takes their offset."""
        slot = self.pointer_slots.get(offset)
        if slot is None:
            slot = self.pointer_slots[offset] = self.layout.pointer(offset)
        return slot

    def pointer_ports(self) -> dict[Node, int]:
        """The in-place candidates read only through their pointer slot -> the slot; and the
        outputs written only by a fused loop's store, which nothing reads -> their slot."""
        out = {}
        for node in self.in_place:
            offset = self.mem.get(node)
            if node not in self.copied and offset is not None and offset in self.pointer_slots:
                out[node] = self.pointer_slots[offset]
        if self.in_place:
            for node, offsets in self.stores.items():
                if (len(offsets) == 1 and (node in self.loops or node in self.through_pointer)
                        and node not in self.read):
                    out[node] = self.pointer_slots[offsets[0]]
        return out

    def output_of(self, node: Node) -> Node | None:
        """The output that ``node``'s one store is (itself, or the reshape it is computed
        into), if nothing reads it; None otherwise."""
        target = node if len(self.stores.get(node, ())) == 1 else self.forward.get(node)
        return target if target is not None and target not in self.read else None

    def lower_loop(self, node: Node, loop: Loop) -> None:
        """A fused element-wise loop (compiler/fuse.py); its result may reuse an operand's
        slot, as an unfused element-wise result may (block i is read before it is stored).
        Its arrays are addressed through pointer slots (stencils/fused.c)."""
        body = [(step.stencil, [*((role, self.pointer_to(self.slot_of(x)) if x.shape
                                   else self.ensure_mem(x)) for role, x in step.operands),
                                *self.gather_slots(step.gather)])
                for step in loop.body]
        self.consume(node)
        out = self.array_out(node)
        if loop.whole:
            if node in self.forward:
                self.through_pointer.add(self.forward[node])
            stencil, slots = body[0]
            self.emit(stencil, [*slots, ("out", self.pointer_to(out)),
                                ("n", self.const_int(node.size))])
            self.copy_stores(node, skip_first=True)
            return
        if node in self.forward:
            self.through_pointer.add(self.forward[node])
        self.emit(LOOP_BEGIN, [("n", self.const_int(node.size))])
        for stencil, slots in body:
            self.emit(stencil, slots)
        self.emit(loop.store, [("out", self.pointer_to(out))])
        self.emit(loop.end, [])
        self.copy_stores(node, skip_first=True)

    def gather_slots(self, view: Node | None) -> list[tuple[str, int]]:
        """A loop step's strided view or slice (fuse.gather_step): its start and step (int32 in
        8-byte slots, as for sgather) and the length j of the array it steps through."""
        if view is None or (steps := view_steps(view)) is None:
            return []
        start, step = steps
        return [("b", self.const_word(start)), ("c", self.const_word(step)),
                ("j", self.const_int(view.args[0].size))]

    def finish_scalar(self, node: Node, regs: list[Node | None], dst: int) -> None:
        """A scalar result is in register ``dst``: store it where it must go."""
        regs[dst] = node
        for offset in self.stores.get(node, ()):
            self.store(node, dst, offset)
            self.mem.setdefault(node, offset)
        if self.next_use(node) == NEVER:
            regs[dst] = None

    def copy_stores(self, node: Node, skip_first: bool = False) -> None:
        offsets = self.stores.get(node, [])
        if not offsets:
            return
        src = self.slot_of(node)
        for offset in offsets[1 if skip_first else 0:]:
            if offset == src:
                continue  # computed there (array_out of a reshaped output)
            if node.shape:
                self.copy_array(node, src, offset)
            else:
                self.store(node, "m", offset, src)

    def reads_in_place(self, node: Node) -> bool:
        """A gather of an in-place input that the table has a pointer form of (``v_p_m_m``):
        it reads the caller's buffer through the input's pointer slot, so nothing copies it.
        A level gather (ngather, transpose) of a view past the input's first element too
        (``ngatherat``: the block's start is in its slot b)."""
        if node.op not in _GATHERS:
            return False
        if home(node.args[0]) in self.in_place:
            return self.gather_name(node, "p") in self.table
        return (node.op != "sgather" and view_base(node.args[0])[0] in self.in_place
                and self.gather_name(node, "p", at=True) in self.table)

    def gathered_views(self, order: Sequence[Node]) -> set[Node]:
        """Views (a slice past an input's first element, the reshapes around it) that no output
        is and that only gathers reading in place read, directly or through such views: they
        read nothing themselves, so they do not make the input copied (ngatherat)."""
        users: dict[Node, list[Node]] = {}
        for node in order:
            for a in node.args:
                if a.op in VIEWS:
                    users.setdefault(a, []).append(node)
        free: set[Node] = set()
        for node in reversed(order):  # users first
            if node in users and node not in self.stores and all(
                    u in free or self.reads_in_place(u) for u in users[node]):
                free.add(node)
        return free

    def gather_name(self, node: Node, source: str, at: bool = False) -> str:
        """The gather (or scatter) stencil of ``node``, its source ``a`` in form ``source``
        (``at``: a level gather of a block at an offset, ngatherat)."""
        op = "ngatherat" if at else "ngather" if node.op == "transpose" else node.op
        width = "f64" if node.dtype.size == 8 else "i32"
        return names.stencil(op, width, "v", source, "m", "m")

    def gather_source(self, node: Node) -> tuple[str, tuple[str, int], int | None]:
        """The stencil of a gather or scatter, its slot ``a`` and the block's start in the
        array ``a`` designates (None: the block is that array): the source's pointer slot when
        it is read in place (reads_in_place), else the source's own slot."""
        src = self.slot_of(node.args[0])
        if self.in_place and self.reads_in_place(node):
            base, shift = view_base(node.args[0])
            if home(node.args[0]) is base:
                return self.gather_name(node, "p"), ("a", self.pointer_to(src)), None
            return (self.gather_name(node, "p", at=True),
                    ("a", self.pointer_to(self.slot_of(base))), shift // node.dtype.size)
        return self.gather_name(node, "v"), ("a", src), None

    def lower_strided(self, node: Node) -> None:
        """A strided view (sgather) or its adjoint (sscatter): one loop stencil of the element
        width (a move of bits), start and step in int32 slots, the lengths n (the vector) and
        j (the array it steps through)."""
        start, step, _ = strided_attr(node)
        stencil, source, _ = self.gather_source(node)
        out = self.array_out(node)
        vector, whole = (node, node.args[0]) if node.op == "sgather" else (node.args[0], node)
        self.emit(stencil,
                  [source, ("b", self.const_word(start)), ("c", self.const_word(step)),
                   ("out", out), ("n", self.const_int(vector.size)),
                   ("j", self.const_int(whole.size))])
        self.consume(node)
        self.copy_stores(node, skip_first=True)

    def lower_levels(self, node: Node, op: str, levels: tuple[tuple[int, int], ...]) -> None:
        """An N-D strided view or transpose (ngather) or its adjoint (nscatter): one loop
        stencil over three levels (count, step) (stencils/include/cp_index.h), fewer padded
        with outer levels of count 1."""
        pad = MAX_LEVELS - len(levels)
        (c0, s0), (c1, s1), (c2, s2) = ((1, 0),) * pad + levels
        block = node.args[0] if op == "ngather" else node
        stencil, source, at = self.gather_source(node)
        if at is None:
            first, size = self.const_pair(s0, s1), block.size
        else:  # the block from element ``at`` of the input: its start after the two steps
            first = self.layout.constant(INT64, struct.pack("<4i", s0, s1, at, 0), 16)
            size = view_base(block)[0].size
        out = self.array_out(node)
        target = self.output_of(node) if self.in_place else None
        into = stencil.replace("__v_", "__p_", 1)
        if target is not None and into != stencil and into in self.table:
            # a result nothing reads: through its pointer slot into the caller's new array (from
            # a temporary too: the second gather of a 4-D permutation, ngather__p_v)
            stencil, dst = into, self.pointer_to(out)
            self.through_pointer.add(target)
        else:
            dst = out
        self.emit(stencil,
                  [source, ("b", first), ("c", self.const_pair(s2, c2)),
                   ("out", dst), ("n", self.const_int(c0)), ("k", self.const_int(c1 * c2)),
                   ("j", self.const_int(size))])
        self.consume(node)
        self.copy_stores(node, skip_first=True)

    def lower_rows(self, node: Node) -> None:
        """Sorting along the last axis: argsort (with a scratch row), the permutation's gather
        and its scatter; k rows of n elements. The result never shares an operand's slot."""
        n = node.shape[-1]
        rows = [("n", self.const_int(n)), ("k", self.const_int(node.size // n))]
        out = self.array_out(node)
        if node.op == "argsort":
            # scratch: two rows of (key, index) words for 4-byte elements, one index row for
            # 8-byte ones (stencils/include/cp_index.h); j counts its int32 rows
            values = node.args[0]
            words = 4 if values.dtype.size == 4 else 1
            scratch = self.layout.temp(4 * n * words, ARRAY_ALIGN)
            self.emit(names.stencil("argsort", values.dtype.stencil, "v", "v", "v"),
                      [("a", self.slot_of(values)), ("b", scratch), ("out", out), *rows,
                       ("j", self.const_int(words))])
            self.layout.release(scratch, 4 * n * words)
        else:
            perm, values = node.args
            width = "f64" if node.dtype.size == 8 else "i32"
            self.emit(names.stencil(node.op, width, "v", "v", "v"),
                      [("a", self.slot_of(values)), ("b", self.slot_of(perm)), ("out", out),
                       *rows])
        self.consume(node)
        self.copy_stores(node, skip_first=True)

    def const_pair(self, first: int, second: int) -> int:
        """Two int32 in one 8-byte slot (the level stencils' b and c)."""
        return self.layout.constant(INT64, struct.pack("<ii", first, second))

    def const_word(self, value: int) -> int:
        """An int32 in an 8-byte slot (its low, first bytes): the strided stencils read it as
        the int32 slot of a role that verified loading sizes by the element (4 or 8 bytes)."""
        return self.layout.constant(INT64, struct.pack("<ii", value, -1 if value < 0 else 0))

    def evict(self, regs: list[Node | None], dst: int) -> None:
        """Save the value in ``dst`` if it is still needed and not in memory (a spill)."""
        _lower.evict(self, regs, dst)

    def pick_register(self, regs: list[Node | None]) -> int:
        """Belady: a free register, else the one whose value is needed furthest ahead
        (values already in memory first: they need no store)."""
        return _lower.pick_register(self, regs)

    def forget(self, node: Node) -> None:
        """A value is dead: free its register and its temporary slot."""
        _lower.forget(self, node)

MEMORY_OPS = ("input", "const", "state")
VIEWS = frozenset({"index", "slice", "reshape"})
ARRAY_ALIGN = 16
INT32 = int32
INT64 = float64  # the alignment and size of an 8-byte constant slot
_lower.configure(Instr, _scalar_name, _store_name, VIEWS)


def view_base(node: Node) -> tuple[Node, int]:
    """The array a view looks into and the byte offset of the view's first element."""
    offset = 0
    while node.op in VIEWS:
        if node.op == "index":
            offset += node.attr * node.dtype.size  # type: ignore[operator]
        elif node.op == "slice":
            offset += node.attr[0] * node.dtype.size  # type: ignore[index]
        node = node.args[0]
    return node, offset


def _dims(node: Node) -> list[tuple[str, int]]:
    """The length slots an array stencil reads (docs: stencils/array.c)."""
    if node.op in ("matvec", "matmul"):
        a, b = node.args
        dims = [("n", a.shape[0]), ("k", a.shape[1])]
        return [*dims, ("j", b.shape[1])] if node.op == "matmul" else dims
    if node.op == "vecmat":
        return [("k", node.args[1].shape[0]), ("j", node.args[1].shape[1])]
    if node.op in ("rsum", "rmin", "rmax", "dot"):
        return [("n", node.args[0].size)]
    return [("n", node.size)]


def check_types(nodes: Sequence[Node], table: StencilTable) -> None:
    for node in nodes:
        if not table.float64 and node.dtype.name == "float64":
            raise CompileError(f"{table.arch} has no float64 unit: use float32 values "
                               f"(cp.value(x) without dtype) for this target")
        if node.op == "dt":
            raise CompileError("cp.dt is the period of a periodic task: use it in values "
                               "deployed with cp.Task(..., period=...)")


def lower_chain(spec: ChainSpec, table: StencilTable, layout: DataLayout,
                progress: Callable[[int, int], None] | None = None,
                live: Sequence[Node] | None = None) -> tuple[list[Instr], int]:
    """Stencils of one chain and the number of operations it computes (linear time).
    ``live``: what the chain's roots depend on, operands first, if the caller has it."""
    roots = list(spec.stores) + [src for src, _, _ in spec.end_copies]
    order = evaluation_order(roots, stop=spec.placed, live=live)
    check_types(order, table)
    lowerer = _Lowerer(table, layout, spec.stores,
                       {n for n in spec.in_place if n in spec.placed and n not in spec.stores})
    for node, offset in spec.placed.items():
        lowerer.mem[node] = offset
    # outputs that are values in memory already: copied first, before state changes
    for node, offsets in spec.stores.items():
        if node in spec.placed or node.op == "const":
            src = lowerer.slot_of(node)
            for offset in offsets:
                lowerer.copy_slot(node, src, offset)
    computed = [n for n in order if n.op not in MEMORY_OPS and n not in spec.placed]
    lowerer.lower(computed, progress)
    spec.pointers.update(lowerer.pointer_ports())
    if progress is not None:
        progress(len(computed), len(computed))
    for node, src, dst in store_in_place(lowerer.instrs, spec.end_copies):
        lowerer.copy_slot(node, src, dst)
    layout.end_temp_scope()
    return lowerer.instrs, len(computed)
