"""Lowering: schedule the graph, keep values in the chain's virtual registers, pick stencils.

Every stencil reads its operands from one of two registers of their class (f32, f64, i32) or
from a data slot, and writes its result into a register. The allocator is a linear scan over
the schedule with Belady's rule (evict the value used furthest in the future); a value is
stored to a slot only if it is evicted while still needed, or if it is an output. Temporary
slots are reused once their value is dead. Everything is linear in the number of nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..dtypes import DType
from ..graph.build import live_nodes
from ..graph.node import Node
from ..graph.ops import REGISTRY
from .layout import DataLayout
from .table import StencilTable

NEVER = 1 << 62


class CompileError(ValueError):
    """The graph cannot be compiled for the chosen architecture."""


@dataclass(frozen=True)
class Instr:
    """One stencil instance and the data slots its operand roles refer to."""

    stencil: str
    slots: tuple[tuple[str, int], ...]  # (role, data offset)


@dataclass
class ChainSpec:
    """What one chain must compute and where the values live.

    ``placed``: leaves already in memory (inputs, values of other tasks, state) -> offset.
    ``stores``: nodes whose value must be written to these offsets (outputs, next state).
    ``end_copies``: (src, dst) slot copies after everything else (state takes its update).
    """

    placed: dict[Node, int]
    stores: dict[Node, list[int]]
    end_copies: list[tuple[Node, int, int]]


def _class(dtype: DType) -> str:
    return dtype.stencil


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
                 stores: dict[Node, list[int]]) -> None:
        self.table = table
        self.layout = layout
        self.stores = stores
        self.instrs: list[Instr] = []
        self.regs: dict[str, list[Node | None]] = {"f32": [None, None], "f64": [None, None],
                                                   "i32": [None, None]}
        self.mem: dict[int, int] = {}  # id(node) -> slot offset
        self.temp_of: dict[int, int] = {}  # id(node) -> temporary slot offset (to release)
        self.uses: dict[int, list[int]] = {}
        self.ptr: dict[int, int] = {}

    def next_use(self, node: Node) -> int:
        uses = self.uses.get(id(node))
        if not uses:
            return NEVER
        p = self.ptr[id(node)]
        return uses[p] if p < len(uses) else NEVER

    def emit(self, stencil: str, slots: list[tuple[str, int]]) -> None:
        if stencil not in self.table:
            raise CompileError(f"no stencil {stencil} for architecture {self.table.arch}")
        self.instrs.append(Instr(stencil, tuple(slots)))

    def store(self, node: Node, reg: int | str, offset: int, src: int | None = None) -> None:
        slots = [("out", offset)] if src is None else [("a", src), ("out", offset)]
        self.emit(f"store_{_class(node.dtype)}__m_{reg}", slots)

    def slot_of(self, node: Node) -> int:
        offset = self.mem.get(id(node))
        if offset is None:
            if node.op == "const":
                offset = self.layout.constant(node.dtype, node.attr)  # type: ignore[arg-type]
                self.mem[id(node)] = offset
            else:
                raise AssertionError(f"{node!r} is neither in a register nor in memory")
        return offset

    def lower(self, order: Sequence[Node]) -> None:
        for i, node in enumerate(order):
            for a in node.args:
                self.uses.setdefault(id(a), []).append(i)
        for key in self.uses:
            self.ptr[key] = 0
        for i, node in enumerate(order):
            self.lower_node(i, node)

    def lower_node(self, i: int, node: Node) -> None:
        family, suffix = _stencil_name(node)
        roles = ("c", "a", "b") if node.op == "where" else ("a", "b")[: len(node.args)]
        forms: list[str] = []
        slots: list[tuple[str, int]] = []
        for role, arg in zip(roles, node.args, strict=True):
            cls = self.regs[_class(arg.dtype)]
            if cls[0] is arg:
                forms.append("0")
            elif cls[1] is arg:
                forms.append("1")
            else:
                forms.append("m")
                slots.append((role, self.slot_of(arg)))
        # the operands are consumed: advance their next-use pointers
        for arg in node.args:
            self.ptr[id(arg)] += 1
        cls_name = _class(node.dtype)
        regs = self.regs[cls_name]
        dst = self.pick_register(regs)
        victim = regs[dst]
        if victim is not None and self.next_use(victim) != NEVER and id(victim) not in self.mem:
            offset = self.layout.temp(victim.dtype.size)
            self.store(victim, dst, offset)
            self.mem[id(victim)] = offset
            self.temp_of[id(victim)] = offset
        self.emit(f"{family}_{suffix}__{dst}_{'_'.join(forms)}", slots)
        regs[dst] = node
        for arg in node.args:
            if self.next_use(arg) == NEVER:
                self.forget(arg)
        for offset in self.stores.get(node, ()):
            self.store(node, dst, offset)
            self.mem.setdefault(id(node), offset)
        if self.next_use(node) == NEVER:
            regs[dst] = None

    def pick_register(self, regs: list[Node | None]) -> int:
        """Belady: a free register, else the one whose value is needed furthest ahead."""
        best, best_key = 0, -1
        for r in (0, 1):
            v = regs[r]
            if v is None:
                return r
            use = self.next_use(v)
            if use == NEVER:
                return r
            # prefer values already in memory (no store needed), then the furthest use
            key = use + (NEVER // 2 if id(v) in self.mem else 0)
            if key > best_key:
                best, best_key = r, key
        return best

    def forget(self, node: Node) -> None:
        """A value is dead: free its register and its temporary slot."""
        regs = self.regs[_class(node.dtype)]
        for r in (0, 1):
            if regs[r] is node:
                regs[r] = None
        temp = self.temp_of.pop(id(node), None)
        if temp is not None:
            self.layout.release(temp, node.dtype.size)


MEMORY_OPS = ("input", "const", "state")


def check_types(nodes: Sequence[Node], table: StencilTable) -> None:
    for node in nodes:
        if not table.float64 and node.dtype.name == "float64":
            raise CompileError(f"{table.arch} has no float64 unit: use float32 values "
                               f"(cp.value(x) without dtype) for this target")
        if node.op == "dt":
            raise CompileError("cp.dt is the period of a periodic task: use it in values "
                               "deployed with cp.Task(..., period=...)")


def lower_chain(spec: ChainSpec, table: StencilTable,
                layout: DataLayout) -> tuple[list[Instr], int]:
    """Stencils of one chain and the number of operations it computes (linear time)."""
    roots = list(spec.stores) + [src for src, _, _ in spec.end_copies]
    order = live_nodes(roots, stop=spec.placed)
    check_types(order, table)
    lowerer = _Lowerer(table, layout, spec.stores)
    for node, offset in spec.placed.items():
        lowerer.mem[id(node)] = offset
    # outputs that are values in memory already: copied first, before state changes
    for node, offsets in spec.stores.items():
        if node in spec.placed or node.op == "const":
            src = lowerer.slot_of(node)
            for offset in offsets:
                lowerer.store(node, "m", offset, src)
    computed = [n for n in order if n.op not in MEMORY_OPS and n not in spec.placed]
    lowerer.lower(computed)
    for node, src, dst in spec.end_copies:
        lowerer.store(node, "m", dst, src)
    layout.end_temp_scope()
    return lowerer.instrs, len(computed)
