"""Fused element-wise loops: find chains of packed element-wise operations that run as one
pass over the data, and plan their vector-register stencils (stencils/fused.c).

A fused loop computes a tree of element-wise nodes of one shape: its root, and every operand
that is itself a fusable element-wise array feeding nothing else (not an output, not in memory
already). The other operands are the leaves: arrays, read block by block (form ``p``), and
scalars, broadcast (form ``m``). The tree is evaluated with the two vector registers 0 and 1
(Sethi-Ullman order: the operand that needs more registers first); where both operands of a
node would need both registers, the second is cut off and becomes a leaf, computed before as
a loop of its own. Each element sees the operation sequence of the unfused loops, so the
results are the same bits.

A strided view (``sgather``) or a slice past the first element of an array @cp.jit reads in
place is an operand too: the step ``vrsgather_<w>__<d>_p`` loads its lanes into a register
from the argument's pointer slot (a slice: step 1), so ``x[::2] + x[1::2]``, ``x[::-1] * 2``
or ``x[1:] + x[:-1]`` is one loop that holds no temporary and no copy of ``x``, and a lone
large view (``x[1::3]``) is a loop of that step and the store into the caller's array
(docs/decisions/2026-12-04-gather-free-fused-loops.md).

Only where the stencil table has the forms (targets/<arch>.toml ``fuse_vector_bytes``); the
environment variable ``COPAPY_FUSE=0`` switches fusion off (read at import; ``ENABLED``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple

from ..graph.build import strided_attr
from ..graph.node import Node
from ..graph.ops import REGISTRY
from . import names
from .names import BLOCK, FUSED, LOOP
from .table import StencilTable

#: the stencil that starts a fused loop; the linker branches back to the stencil after it
LOOP_BEGIN = names.stencil(LOOP, "i32", "begin")
#: fusion on or off for every compile of this process (tests compare both)
ENABLED: bool = os.environ.get("COPAPY_FUSE", "1") != "0"
#: nodes of one tree at most (the recursion depth; deeper operands start loops of their own)
MAX_DEPTH = 64
#: a lone cheap operation (``x + y``, ``x * 2.0``) that reads an argument @cp.jit reads in place
#: runs as a one-operation fused loop from this many bytes of result on: the copies it saves
#: (each argument in, the result out) then cost more than the loop skeleton's per-block work;
#: below it array.c's loop and the copies are faster (RESULTS.md, "Lone operations in place")
LONE_LOOP_MIN_BYTES = 4096


class Step(NamedTuple):
    """One stencil of a loop body and the leaves its roles a and b read."""

    stencil: str
    operands: tuple[tuple[str, Node], ...]
    #: the strided view whose lanes the step loads (its start, step and source length are
    #: the step's slots b, c and j)
    gather: Node | None = None


class Loop(NamedTuple):
    """A fused loop: the body's stencils, the store of the root's block, the loop's end."""

    root: Node
    interior: tuple[Node, ...]  # the fused operands (never stored anywhere)
    leaves: tuple[Node, ...]  # what the loop reads, once per read
    body: tuple[Step, ...]
    store: str
    end: str
    #: the body is one stencil over the whole array (vb<op>: a lone math kernel's block form
    #: through pointer slots), without the loop skeleton
    whole: bool = False


StencilName = Callable[[Node], tuple[str, str]]


def home(node: Node) -> Node:
    """The node whose memory ``node`` is (through reshapes and slices from its first
    element, which share it from the same address)."""
    while node.op == "reshape" or (node.op == "slice" and node.attr[0] == 0):  # type: ignore[index]
        node = node.args[0]
    return node


def view_steps(node: Node) -> tuple[int, int] | None:
    """(start, step) of a strided view or a slice past the first element, which a loop reads
    by a gather step; None for anything else (a slice from the first element shares its
    array's address: a loop reads it as it is)."""
    if node.op == "sgather":
        start, step, _ = strided_attr(node)
        return start, step
    if node.op == "slice" and node.attr[0] != 0:  # type: ignore[index]
        return node.attr[0], 1  # type: ignore[index]
    return None


def gather_step(node: Node, dst: int | str) -> str:
    """The loop step that loads the lanes of the strided view ``node`` into register ``dst``
    (the bits of elements of its width: ``i32`` for every 4-byte type)."""
    return names.stencil(FUSED + "sgather", "f64" if node.dtype.size == 8 else "i32", dst, "p")


class _Planner:
    def __init__(self, order: Sequence[Node], table: StencilTable, stores: Collection[Node],
                 in_memory: Callable[[Node], bool], skip: Collection[Node],
                 stencil_name: StencilName, single: Collection[Node]) -> None:
        self.table = table
        self.single = single
        self.stencil_name = stencil_name
        self.skip = skip
        self.stores = stores
        self.in_memory = in_memory
        self.order = order
        self._users: dict[Node, int] | None = None  # counted on first use (array graphs only)
        self._computed: set[Node] = set()

    def users(self, node: Node) -> int:
        if self._users is None:
            self._users = {}
            for x in self.order:
                for a in x.args:
                    self._users[a] = self._users.get(a, 0) + 1
            self._computed = set(self.order)
        return self._users.get(node, 0) if node in self._computed else 0

    def fusable(self, node: Node) -> bool:
        if view_steps(node) is not None:
            return (len(node.shape) == 1 and node not in self.skip
                    and home(node.args[0]) in self.single and gather_step(node, 0) in self.table)
        if (not node.shape or node.op == "where" or node in self.skip
                or REGISTRY[node.op].shape_rule != "elementwise"
                or any(a.shape not in ((), node.shape) for a in node.args)):
            return False
        family, suffix = self.stencil_name(node)
        return names.stencil(FUSED + family, suffix, 0, *"p" * len(node.args)) in self.table

    def inner(self, node: Node) -> bool:
        """Can ``node`` be an operand kept in a register (fused into its single user)?"""
        return (self.users(node) == 1 and node not in self.stores and not self.in_memory(node)
                and self.fusable(node))

    def tree(self, root: Node) -> tuple[set[Node], dict[Node, int]]:
        """The fused operands of the tree at ``root`` and each node's register need."""
        interior: set[Node] = set()
        need: dict[Node, int] = {}

        def visit(node: Node, depth: int) -> int:
            kids = [a for a in node.args if a.shape and depth < MAX_DEPTH and self.inner(a)]
            needs = [visit(k, depth + 1) for k in kids]
            if len(kids) == 2 and needs[0] == needs[1] == 2:
                drop(kids[1])  # three registers: the second operand becomes a leaf
                kids, needs = kids[:1], needs[:1]
            interior.update(kids)
            if len(needs) == 2:
                n = max(needs) if needs[0] != needs[1] else needs[0] + 1
            else:
                n = needs[0] if needs else 1
            need[node] = n
            return n

        def drop(node: Node) -> None:
            stack = [node]
            while stack:
                x = stack.pop()
                interior.discard(x)
                stack.extend(a for a in x.args if a in interior)

        visit(root, 0)
        return interior, need

    def plan(self, root: Node) -> Loop | None:
        interior, need = self.tree(root)
        if not interior:
            # a lone operation on an in-place argument: a math kernel as its block form through
            # pointer slots; a cheap one as a one-operation loop if the array is large enough
            # (LONE_LOOP_MIN_BYTES), else array.c's loop with the argument copied
            family, suffix = self.stencil_name(root)
            whole = names.stencil(BLOCK + family, suffix, "p", "p")
            if len(root.args) == 1 and root.args[0] in self.single and whole in self.table:
                return Loop(root, (), root.args, (Step(whole, (("a", root.args[0]),)),), "", "",
                            True)
            if (root.size * root.dtype.size < LONE_LOOP_MIN_BYTES or root.op == "slice"
                    or not any(home(a) in self.single for a in root.args)):
                return None  # a slice alone is a view (lower.VIEWS), not a loop
        body: list[Step] = []
        leaves: list[Node] = []

        def gen(node: Node, d: int) -> None:
            if view_steps(node) is not None:
                body.append(Step(gather_step(node, d), (("a", node.args[0]),), node))
                leaves.append(node.args[0])
                return
            o = 1 - d
            args = node.args
            inner = [a in interior for a in args]
            forms = ["", ""][: len(args)]
            if len(args) == 2 and all(inner):
                first, second = (0, 1) if need[args[0]] >= need[args[1]] else (1, 0)
                gen(args[first], d)
                gen(args[second], o)
                forms[first], forms[second] = str(d), str(o)
            else:
                for k, a in enumerate(args):
                    if inner[k]:
                        gen(a, d)
                        forms[k] = str(d)
            operands = []
            for k, a in enumerate(args):
                if not inner[k]:
                    forms[k] = "p" if a.shape else "m"
                    operands.append(("ab"[k], a))
                    leaves.append(a)
            family, suffix = self.stencil_name(node)
            body.append(Step(names.stencil(FUSED + family, suffix, d, *forms), tuple(operands)))

        gen(root, 0)
        kind = root.dtype.stencil
        loop = Loop(root, tuple(interior), tuple(leaves), tuple(body),
                    names.stencil(FUSED + "store", kind, "p", "0"),
                    names.stencil(LOOP, kind, "end"))
        if (any(s.stencil not in self.table for s in loop.body) or loop.end not in self.table
                or loop.store not in self.table):
            return None
        return loop


def find_loops(order: Sequence[Node], table: StencilTable, stores: Collection[Node],
               in_memory: Callable[[Node], bool], skip: Collection[Node],
               stencil_name: StencilName, single: Collection[Node] = ()) -> dict[Node, Loop]:
    """root -> its fused loop, for the element-wise trees of ``order`` (operands before users)
    with at least two operations, or a lone operation that reads an array of ``single`` (the
    arguments @cp.jit reads in place: only fused loops and the whole-array kernels ``vb<op>``
    read through pointer slots): a math kernel, or a cheap operation of at least
    LONE_LOOP_MIN_BYTES. ``skip``: nodes another fusion consumes; ``stencil_name``: (family,
    type suffix) of a node's stencil (the lowering's)."""
    if not ENABLED or LOOP_BEGIN not in table:
        return {}
    planner = _Planner(order, table, stores, in_memory, skip, stencil_name, single)
    loops: dict[Node, Loop] = {}
    absorbed: set[Node] = set()
    for node in reversed(order):  # users before operands: a root before its tree
        if node in absorbed or not planner.fusable(node):
            continue
        loop = planner.plan(node)
        if loop is not None:
            loops[node] = loop
            absorbed.update(loop.interior)
    return loops
