"""Unpacked lane-order reductions run on the packed stencils (docs/design.md, "Unpacked
reductions ... packed at compile time").

An unpacked ``sum``/``@``/``min``/``max`` is a tree of scalar nodes in the lane order of
graph/lanes.py: eight lane chains ``((t_j op t_{j+8}) op t_{j+16}) ...`` under a fixed tree.
When its N items ``t_k`` are isomorphic element-wise expressions whose leaves are, at each
position, one scalar for every k (a broadcast), N distinct scalar inputs (placed side by side:
an input block) or N constants (a packed constant), the tree is replaced by the packed
reduction of the packed element expression: the same operations on the same values in the
same order, so the same bits, at the packed speed.
Anything else stays scalar. The graph the user built (gradients, folding) is not touched: the
rewrite works on the compiler's copy of the outputs' closure.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ..graph.build import make, slice_
from ..graph.lanes import LANES
from ..graph.node import Node, const_array, fresh_array_input, input_initial
from ..graph.ops import REGISTRY, STRUCTURAL
from . import names
from .lower import VIEWS, _stencil_name
from .table import StencilTable

#: reductions of fewer elements stay scalar (their straight-line code is as fast as the
#: packed loop's set-up); at least 16, two items in every lane, which the search assumes
MIN_ELEMENTS = 16
#: the packed reduction of each combining operation
_REDUCTIONS = {"add": "rsum", "min": "rmin", "max": "rmax"}
#: parse steps allowed per node of the graph (keeps the search linear on any graph)
_BUDGET_PER_NODE = 8
#: element expressions deeper than this stay scalar
_MAX_DEPTH = 64
#: structure numbers recurse this deep, then iterate
_RECURSION = 200
_BY_TYPE = frozenset({"input", "const"})
_COMMUTATIVE = frozenset(name for name, spec in REGISTRY.items() if spec.commutative)


@dataclass
class Packing:
    """The compiler's rewrite of a graph: ``replaced`` maps every node that changed to its
    new form (reduction roots to packed reductions, their users rebuilt); ``blocks`` maps the
    stand-in leaf of each input block to its scalar inputs in element order (the layout
    places them side by side at the stand-in's offset, each keeps its own port)."""

    replaced: dict[Node, Node] = field(default_factory=dict)
    blocks: dict[Node, tuple[Node, ...]] = field(default_factory=dict)


def pack_reductions(order: Sequence[Node], table: StencilTable,
                    min_elements: int | None = None, stop: Collection[Node] = (),
                    blocks: Mapping[Node, tuple[Node, int]] | None = None) -> Packing:
    """Find the packable lane-order reductions of ``order`` (operands first) and rewrite
    them; an empty ``Packing`` (no node created) when there are none. ``stop``: values
    another task computes (leaves here; an element only as a broadcast scalar). ``blocks``:
    the inputs already in blocks (another task's) -> (stand-in, index); ``Packing.blocks``
    holds only the new blocks."""
    packer = _Packer(table, MIN_ELEMENTS if min_elements is None else min_elements, stop)
    packer.member.update(blocks or {})
    return packer.run(order)


class _Packer:
    def __init__(self, table: StencilTable, min_elements: int, stop: Collection[Node]) -> None:
        self.table = table
        self.min_elements = max(min_elements, 2 * LANES)
        self.stop = stop
        #: inner nodes and roots of recognised lane trees, and the stop nodes (never part of
        #: a lane tree; an element only as a broadcast scalar)
        self.consumed: set[Node] = set(stop)
        #: input -> (its block's stand-in, index)
        self.member: dict[Node, tuple[Node, int]] = {}
        self.packing = Packing()
        self.budget = 0
        #: node -> its structure's number; structure -> number (``shape``)
        self.shapes: dict[Node, int] = {}
        self.structures: dict[tuple[object, ...], int] = {}

    def run(self, order: Sequence[Node]) -> Packing:
        self.budget = _BUDGET_PER_NODE * len(order) + 1024
        out = self.packing.replaced
        consumed = self.consumed
        for node in order:
            op = node.op
            # a root of the fixed tree combines two combinations
            if (op in _REDUCTIONS and node.args[0].op == op and node.args[1].op == op
                    and not node.shape and node not in consumed and self.budget > 0):
                new = self.try_pack(node, out)
                if new is not None:
                    out[node] = new
                    continue
            if out and not out.keys().isdisjoint(node.args) and node not in self.stop:
                # a user of a rewritten node
                args = tuple(out.get(a, a) for a in node.args)
                out[node] = make(REGISTRY[op], args, node.attr)
        return self.packing

    # ---- recognising the lane tree -------------------------------------------------------

    def try_pack(self, root: Node, out: dict[Node, Node]) -> Node | None:
        items = self.items(root)
        if items is None:
            return None
        claims: dict[Node, tuple[Node, int]] = {}
        blocks: dict[Node, tuple[Node, ...]] = {}
        pattern = _Classifier(self, claims, blocks, out).classify(tuple(items))
        if pattern is None or not pattern.shape:
            return None
        name = _REDUCTIONS[root.op]
        if name == "rsum" and pattern.op == "mul" and all(a.shape for a in pattern.args):
            new = make(REGISTRY["dot"], pattern.args)
        else:
            new = make(REGISTRY[name], (pattern,))
        if not self.has_stencils(new):
            return None
        self.member.update(claims)
        self.packing.blocks.update(blocks)
        return new

    def items(self, root: Node) -> list[Node] | None:
        """The items of the lane-order tree rooted at ``root``, in element order, or None."""
        op = root.op
        (a, b), consumed = root.args, self.consumed
        inner = [root, a, b, *a.args, *b.args]  # the fixed tree over eight lanes
        for node in inner[3:]:
            if node.op != op:
                return None
        for node in inner:
            if node.shape or node in consumed:
                return None
        lanes_raw = [lane for node in inner[3:] for lane in node.args]
        for lane in lanes_raw:  # two items or more in each lane (min_elements >= 16)
            if lane.op != op:
                return None
        self.budget -= 8
        commutative = REGISTRY[op].commutative
        best = None
        # items told apart by fingerprint (cheap: elements that read unnamed inputs and the
        # same constants), else by structure (per-element constants)
        for key in (_fingerprint, self.shape):
            best = self.lanes(root, lanes_raw, key, commutative)
            if best is not None:
                break
        if best is None:
            return None
        lanes, chains = best
        n = _count(lanes)
        q, r = divmod(n, LANES)
        if n < self.min_elements or [len(lane) for lane in lanes] != [q + 1] * r + [q] * (
                LANES - r):
            return None
        self.consumed.update(inner)
        self.consumed.update(chains)
        return [lanes[k % LANES][k // LANES] for k in range(n)]

    def lanes(self, root: Node, lanes_raw: list[Node], key: Callable[[Node], int],
              commutative: bool) -> tuple[list[list[Node]], list[Node]] | None:
        """(lanes in lane order, chain nodes) of the tree ``root`` whose items ``key`` tells
        apart from the chains, or None."""
        # the lanes are chains of isomorphic items: of two lengths at most, so of two
        # structures (most adds of adds that are no lane tree fail here)
        if len({key(lane) for lane in lanes_raw}) > 2:
            return None
        # the items' key is an operand's of every lane
        candidates: list[int] = []
        for lane in lanes_raw:
            for arg in lane.args[::-1] if commutative else lane.args[1:]:
                if key(arg) not in candidates:
                    candidates.append(key(arg))
        best: tuple[list[list[Node]], list[Node]] | None = None
        for fp in candidates:
            found = self.tree(root, root.op, fp, 0, commutative, key)
            if found is not None and (best is None or _count(found[0]) > _count(best[0])):
                best = found
        return best

    def tree(self, node: Node, op: str, fp: int, depth: int, commutative: bool,
             key: Callable[[Node], int]) -> tuple[list[list[Node]], list[Node]] | None:
        """(lanes in lane order, chain nodes) of the subtree ``node`` of the fixed tree; the
        operands of a commutative combination may be either way round (the canonical operand
        order swaps them): the subtree with more elements first, then the earlier-made one."""
        if depth == 3:
            chain = self.chain(node, op, fp, commutative, key)
            return None if chain is None else ([chain[0]], chain[1])
        left = self.tree(node.args[0], op, fp, depth + 1, commutative, key)
        right = self.tree(node.args[1], op, fp, depth + 1, commutative, key)
        if left is None or right is None:
            return None
        if commutative and _key(right[0]) < _key(left[0]):
            left, right = right, left
        return left[0] + right[0], left[1] + right[1]

    def chain(self, node: Node, op: str, fp: int, commutative: bool,
              shape: Callable[[Node], int]) -> tuple[list[Node], list[Node]] | None:
        """(items, chain nodes) of one lane ``((t0 op t1) op t2) ...`` whose items have the
        key ``fp`` (a fingerprint or ``_Packer.shape``)."""
        items: list[Node] = []
        chain: list[Node] = []
        c = node
        while shape(c) != fp:
            self.budget -= 1
            if c.op != op or c.shape or c in self.consumed or self.budget <= 0:
                return None
            chain.append(c)
            x, y = c.args
            if not commutative:
                if shape(y) != fp:
                    return None
                items.append(y)
                c = x
                continue
            sx, sy = shape(x), shape(y)
            if sx == fp and sy == fp:
                first, second = (x, y) if x.serial < y.serial else (y, x)
                items += [second, first]
                break
            if sy == fp:
                items.append(y)
                c = x
            elif sx == fp:
                items.append(x)
                c = y
            else:
                return None
        else:
            items.append(c)
        items.reverse()
        return items, chain

    def shape(self, node: Node, depth: int = 0) -> int:
        """A number for the structure of ``node``'s expression: equal for two expressions
        that differ only in which inputs and constants they read and in the order of a
        commutative operation's operands (exact: structures are interned, no hash decides).
        Each node once; recursive, and iterative below ``_RECURSION`` levels."""
        known = self.shapes.get(node)
        if known is not None:
            return known
        if depth > _RECURSION:
            return self.shape_deep(node)
        ids = [self.shape(a, depth + 1) for a in node.args if node not in self.stop]
        return self.number(node, ids)

    def shape_deep(self, node: Node) -> int:
        stack, shapes = [node], self.shapes
        while stack:
            top = stack[-1]
            pending = [] if top in self.stop else [a for a in top.args if a not in shapes]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if top not in shapes:
                self.number(top, [] if top in self.stop else [shapes[a] for a in top.args])
        return shapes[node]

    def number(self, node: Node, ids: list[int]) -> int:
        """The structure number of ``node`` from its operands' (``ids``)."""
        op = node.op
        if op == "index" and _element_of_input(node):
            # the elements of one packed input alike, whichever element (classify lines up
            # consecutive ones as a slice of it)
            key: tuple[object, ...] = ("index", node.dtype.code, id(node.args[0]))
        elif not ids:
            # inputs and constants by type; states, cp.dt, other tasks' values: themselves
            key = ((op, node.dtype.code, node.shape) if op in _BY_TYPE
                   else ("leaf", id(node)))
        else:
            self.budget -= 1
            if op in _COMMUTATIVE:
                ids.sort()  # the canonical operand order may differ per element
            key = (op, node.dtype.code, node.shape, node.attr, *ids)
        number = self.shapes[node] = self.structures.setdefault(key, len(self.structures))
        return number

    # ---- what the table must hold -------------------------------------------------------

    def has_stencils(self, new: Node) -> bool:
        """The array stencils the unfused lowering of ``new`` uses are in the table (fused
        dots and loops are optional: the lowering checks their own stencils)."""
        family, suffix = _stencil_name(new)
        forms = ["v" if a.shape else "m" for a in new.args]
        if names.stencil(family, suffix, 0, *forms) not in self.table or (
                names.stencil(family, suffix, 1, *forms) not in self.table):
            return False
        stack = [a for a in new.args if a.shape]
        seen: set[Node] = set()
        while stack:
            node = stack.pop()
            if node in seen or node.op in ("input", "const") or node.op in VIEWS:
                continue
            seen.add(node)
            family, suffix = _stencil_name(node)
            forms = ["v" if a.shape else "m" for a in node.args]
            if names.stencil(family, suffix, "v", *forms) not in self.table:
                return False
            stack.extend(a for a in node.args if a.shape)
        return True


class _Classifier:
    """The packed form of N isomorphic element expressions (one tuple per operand position),
    or None if they are not regular. Claims input blocks tentatively (``claims``,
    ``blocks``); the packer keeps them only if the reduction is packed."""

    def __init__(self, packer: _Packer, claims: dict[Node, tuple[Node, int]],
                 blocks: dict[Node, tuple[Node, ...]], out: dict[Node, Node]) -> None:
        self.packer = packer
        self.claims = claims
        self.blocks = blocks
        self.out = out

    def classify(self, nodes: tuple[Node, ...], depth: int = 0) -> Node | None:
        head = nodes[0]
        if all(n is head for n in nodes):
            return None if head.shape else self.out.get(head, head)  # a broadcast scalar
        op, dtype, attr, arity = head.op, head.dtype, head.attr, len(head.args)
        consumed = self.packer.consumed
        for n in nodes:
            # a lane tree's node is not an element (another reduction's result is one only
            # as a broadcast scalar)
            if n.op != op or n.dtype is not dtype or n.shape or n in consumed:
                return None
        if op == "input":
            return self.block(nodes)
        if op == "index":
            return self.elements(nodes)
        if op == "const":
            return const_array(b"".join(n.attr for n in nodes),  # type: ignore[misc]
                               dtype, (len(nodes),))
        spec = REGISTRY.get(op)
        if (spec is None or spec.shape_rule != "elementwise" or op in STRUCTURAL
                or depth > _MAX_DEPTH):
            return None
        for n in nodes:
            if n.attr != attr or len(n.args) != arity:
                return None
        rows = [n.args for n in nodes]
        if spec.commutative and arity == 2:
            # the canonical operand order compares fingerprints, which differ with the
            # constants: line the operands up by structure
            shape, first = self.packer.shape, self.packer.shape(head.args[0])
            rows = [r if shape(r[0]) == first else (r[1], r[0]) for r in rows]
        args = []
        for k in range(arity):
            packed = self.classify(tuple(r[k] for r in rows), depth + 1)
            if packed is None:
                return None
            args.append(packed)
        return make(spec, tuple(args), attr)

    def elements(self, members: tuple[Node, ...]) -> Node | None:
        """Consecutive scalar elements of one packed input (an unpacked view of it, such as
        ``A.to_unpacked()[i] @ x.to_unpacked()``): a slice of that input."""
        head = members[0]
        base, start = head.args[0], head.attr
        if not _element_of_input(head) or not isinstance(start, int):
            return None
        for k, m in enumerate(members):
            if m.args[0] is not base or m.attr != start + k:
                return None
        return slice_(base, start, len(members))

    def block(self, members: tuple[Node, ...]) -> Node | None:
        """The stand-in of N distinct scalar inputs placed side by side (a new block, the
        block that already holds them, or a slice of it)."""
        if len(set(members)) != len(members):
            return None
        known = [self.claims.get(m) or self.packer.member.get(m) for m in members]
        if all(k is None for k in known):
            initial = b"".join(input_initial(m) for m in members)
            stand = fresh_array_input(members[0].dtype, initial, (len(members),))
            for k, m in enumerate(members):
                self.claims[m] = (stand, k)
            self.blocks[stand] = members
            return stand
        first = known[0]
        if first is None:
            return None
        stand, start = first
        for k, where in enumerate(known):
            if where is None or where[0] is not stand or where[1] != start + k:
                return None
        return slice_(stand, start, len(members))


def _element_of_input(node: Node) -> bool:
    """A scalar element (``index``) of a packed input."""
    return not node.shape and node.args[0].op == "input"


def _fingerprint(node: Node) -> int:
    return node.fingerprint


def _count(lanes: list[list[Node]]) -> int:
    return sum(len(lane) for lane in lanes)


def _key(lanes: list[list[Node]]) -> tuple[int, int]:
    """More elements first, then the earlier-made first element (the element order)."""
    return -_count(lanes), min(lane[0].serial for lane in lanes)
