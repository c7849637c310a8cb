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
from ..graph.node import Node, input_initial, input_name
from ..graph.ops import REGISTRY
from .layout import ROLE_CONSTANT, ROLE_INPUT, ROLE_OUTPUT, DataLayout, Port
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
class Lowered:
    instrs: list[Instr]
    layout: DataLayout
    ports: dict[Node, Port]
    op_count: int


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
    def __init__(self, table: StencilTable, layout: DataLayout, ports: dict[Node, Port]) -> None:
        self.table = table
        self.layout = layout
        self.ports = ports
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

    def store(self, node: Node, reg: int, offset: int) -> None:
        self.emit(f"store_{_class(node.dtype)}__m_{reg}", [("out", offset)])

    def slot_of(self, node: Node) -> int:
        offset = self.mem.get(id(node))
        if offset is None:
            if node.op == "const":
                offset = self.layout.constant(node.dtype, node.attr)  # type: ignore[arg-type]
                self.mem[id(node)] = offset
            else:
                raise AssertionError(f"{node!r} is neither in a register nor in memory")
        return offset

    def lower(self, order: Sequence[Node], outputs: set[int]) -> None:
        for i, node in enumerate(order):
            for a in node.args:
                self.uses.setdefault(id(a), []).append(i)
        for key in self.uses:
            self.ptr[key] = 0
        for i, node in enumerate(order):
            self.lower_node(i, node, id(node) in outputs)

    def lower_node(self, i: int, node: Node, is_output: bool) -> None:
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
        if is_output:
            port = self.ports[node]
            self.store(node, dst, port.offset)
            self.mem[id(node)] = port.offset
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


def lower(outputs: Sequence[Node], table: StencilTable) -> Lowered:
    """Turn the graph behind ``outputs`` into a stencil chain and a data layout."""
    layout = DataLayout()
    ports: dict[Node, Port] = {}
    order = live_nodes(outputs)
    for node in order:
        if node.op == "input":
            offset = layout.alloc(node.dtype.size, input_initial(node))
            name = input_name(node) or f"input{len(ports)}"
            ports[node] = Port(name, offset, node.dtype, ROLE_INPUT)
        if not table.float64 and node.dtype.name == "float64":
            raise CompileError(f"{table.arch} has no float64 support; use float32 values")
    for k, node in enumerate(outputs):
        if node in ports:
            continue
        if node.op == "const":
            offset = layout.alloc(node.dtype.size, node.attr)  # type: ignore[arg-type]
            ports[node] = Port(f"output{k}", offset, node.dtype, ROLE_CONSTANT)
        else:
            offset = layout.alloc(node.dtype.size)
            ports[node] = Port(f"output{k}", offset, node.dtype, ROLE_OUTPUT)
    lowerer = _Lowerer(table, layout, ports)
    for node, port in ports.items():
        if port.role == ROLE_INPUT:
            lowerer.mem[id(node)] = port.offset
    computed = [n for n in order if n.op not in ("input", "const")]
    output_ids = {id(n) for n in outputs if n.op not in ("input", "const")}
    lowerer.lower(computed, output_ids)
    return Lowered(lowerer.instrs, layout, ports, len(computed))
