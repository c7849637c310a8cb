"""From graph outputs (one on-request chain, or periodic tasks with LET) to a program image."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from .._contract import IoDirection
from .._gc import without_gc
from ..arch.features import feature_mask
from ..arch.targets import by_name
from ..graph.build import rebuild
from ..graph.node import Node, const, input_initial, input_name
from ..graph.state import state_initial, update_is_signal, update_of
from ..graph.traverse import closure
from ..image import (
    Image,
    ImageIoBinding,
    ImageLetCopy,
    ImagePatch,
    ImagePort,
    ImageTask,
    kinds_table,
)
from ..progress import Progress
from .fori import lower_with_loops
from .lanepack import pack_reductions
from .layout import (
    DEFERRED,
    ROLE_CONSTANT,
    ROLE_INPUT,
    ROLE_OUTPUT,
    ROLE_STATE,
    DataLayout,
    Port,
)
from .link import link
from .lower import VIEWS, ChainSpec, CompileError, Instr, view_base
from .manifest import encode, frozen_slots
from .runner_table import VERIFIED_ARCHS, runner_table
from .table import StencilTable, load_table

COMPILER_VERSION = "copapy-0.1"
RELEASE, PUBLISH = 0, 1
IO_INPUT, IO_OUTPUT = int(IoDirection.INPUT), int(IoDirection.OUTPUT)


class TaskSpec(NamedTuple):
    """A periodic task as the compiler sees it (graph nodes, times in nanoseconds)."""

    name: str
    outputs: tuple[Node, ...]
    period_ns: int
    offset_ns: int = 0
    priority: int = 0
    wcet_ns: int = 0
    budget_ns: int = 0  # execution budget (0: wcet, else the period; docs/realtime.md)
    link_timeout_ns: int = 0  # dead-man switch (0: none)


class IoSpec(NamedTuple):
    node: Node
    kind: int  # 1 GPIO, 2 PWM, 3 ENCODER, 4 ADC
    channel: int
    direction: int  # 1 input (channel -> value), 2 output (value -> channel)
    safe: float = 0.0  # an output channel's value in the safe state


@dataclass
class CompiledProgram:
    arch: str
    image: bytes
    ports: dict[Node, Port]  # the values the host can read (and inputs it can write)
    op_count: int
    stencil_count: int
    code_bytes: int
    stencil_bytes: int
    data_bytes: int
    runtime_patches: int
    tasks: list[TaskSpec] = field(default_factory=list)
    task_ops: list[int] = field(default_factory=list)
    #: array inputs read only through a pointer slot, and outputs written only through one
    #: that nothing reads -> the slot (compile_program(in_place))
    pointers: dict[Node, int] = field(default_factory=dict)
    #: state port name -> its state leaf (states are no ``ports``: the host reads them by
    #: name; cp.save describes the arrays among them with their shapes)
    states: dict[str, Node] = field(default_factory=dict)


def _presets(states: Sequence[Node], outputs: Sequence[Node] = ()) -> dict[Node, bytes]:
    """The outputs with a value before their first run, and that value: a state (delay) and a
    state's update that is the signal (feedback, integrate) start at the state's init
    (docs/semantics.md); a delay's update is its input, a value of its own. An output that is
    an element or slice of such a value starts at those bytes of its init (the elements of a
    packed feedback that another task reads: it read zeros before their first publication)."""
    found = {update_of(s): state_initial(s) for s in states if update_is_signal(s)}
    found.update({s: state_initial(s) for s in states})  # a state's own init comes first
    for node in outputs:
        if node.op in VIEWS and node not in found:
            base, offset = view_base(node)
            init = found.get(base)
            if init is not None:
                found[node] = init[offset:offset + node.nbytes]
    return found


def _align(node: Node) -> int:
    """Arrays start on 16 bytes (SIMD loads), scalars on their own size."""
    return 16 if node.shape else node.dtype.size


class _Builder:
    """Collects layout, chains, copies and ports, then links and writes the image."""

    def __init__(self, arch: str, names: Mapping[Node, str] | None = None) -> None:
        self.arch = arch
        #: port names the caller chose (cp.save(..., names=...)); others get default names
        self.names: Mapping[Node, str] = names or {}
        self.used_names: dict[str, Node] = {}
        self.table: StencilTable = load_table(arch)
        self.layout = DataLayout()
        self.ports: dict[Node, Port] = {}
        self.image_ports: list[ImagePort] = []
        self.chains: list[list[Instr]] = []
        self.copies: list[ImageLetCopy] = []
        self.bindings: list[ImageIoBinding] = []
        #: state port name -> state leaf (CompiledProgram.states)
        self.states: dict[str, Node] = {}
        self.ops = 0
        self.task_ops: list[int] = []
        #: input blocks (compiler/lanepack.py): stand-in -> members; member -> (stand-in,
        #: index); stand-in -> offset once placed
        self.blocks: dict[Node, tuple[Node, ...]] = {}
        self.member: dict[Node, tuple[Node, int]] = {}
        self.block_offsets: dict[Node, int] = {}
        #: write format 1 (code) even where runners verify: @cp.jit's in-place images, whose
        #: pointer slots Program.invoke moves per call (loaded only on the trusted path)
        self.code_image = arch not in VERIFIED_ARCHS
        #: array inputs without initial data and array outputs go to the deferred zone
        #: (@cp.jit: the caller's arrays stand in for them; DataLayout.alloc_deferred)
        self.defer = False
        #: a bar for compiles longer than about a second
        self.progress = Progress("compiling")

    def shared_input(self, node: Node) -> int:
        port = self.ports.get(node)
        if port is None:
            block = self.member.get(node)
            if block is not None:  # one of the scalar inputs an input block holds
                return self.input_block(block[0]) + block[1] * node.dtype.size
            initial = input_initial(node)
            offset = (self.layout.alloc_deferred(node.nbytes, _align(node))
                      if self.defer and node.shape and not initial else
                      self.layout.alloc(node.nbytes, initial, _align(node)))
            self.input_port(node, offset)
            return offset
        return port.offset

    def input_port(self, node: Node, offset: int) -> None:
        port = Port(self.name(node, input_name(node) or f"input{len(self.ports)}"), offset,
                    node.dtype, ROLE_INPUT, node.size)
        self.ports[node] = port
        self.image_ports.append(ImagePort(port.name, offset, node.dtype.code, ROLE_INPUT,
                                          count=node.size))

    def pack(self, order: list[Node], states: list[Node], outputs: Sequence[Node],
             stop: set[Node] | None = None, mapping: Mapping[Node, Node] | None = None
             ) -> tuple[list[Node], list[Node], dict[Node, Node]]:
        """Unpacked lane-order reductions rewritten to packed ones (compiler/lanepack.py):
        the closure of the rewritten outputs and the rewrite composed with ``mapping`` (the
        task's cp.dt substitution), which are unchanged if nothing packs. ``stop``: values
        of other tasks."""
        mapping = mapping or {}
        packing = pack_reductions(order, self.table, stop=stop or (), blocks=self.member)
        if not packing.replaced:
            return order, states, dict(mapping)
        self.blocks.update(packing.blocks)
        self.member.update({m: (stand, k) for stand, members in packing.blocks.items()
                            for k, m in enumerate(members)})
        replaced = packing.replaced
        combined = {**replaced, **{n: replaced.get(m, m) for n, m in mapping.items()}}
        order, states = closure(outputs, stop or set(), combined)
        return order, states, combined

    def input_block(self, stand: Node) -> int:
        """The offset of an input block: its scalar inputs side by side, aligned as a packed
        array's data, each with its own port (so the host writes each element)."""
        offset = self.block_offsets.get(stand)
        if offset is None:
            members = self.blocks[stand]
            offset = self.layout.alloc(stand.nbytes, input_initial(stand), _align(stand))
            self.block_offsets[stand] = offset
            for k, m in enumerate(members):
                if m not in self.ports:
                    self.input_port(m, offset + k * m.dtype.size)
        return offset

    def _chosen(self, node: Node) -> bool:
        """Whether the user named the port (``names``, or ``cp.value(name=...)``)."""
        return node in self.names or (node.op == "input" and input_name(node) is not None)

    def name(self, node: Node, default: str) -> str:
        """The port name of ``node``: the caller's, else ``default``; unique per image."""
        name = self.names.get(node, default)
        other = self.used_names.setdefault(name, node)
        if other is not node and (self._chosen(node) or self._chosen(other)):
            raise CompileError(f"two ports of the program are named {name!r}: give them "
                               f"different names")
        return name

    def state_slots(self, states: Sequence[Node], task: int, spec: ChainSpec,
                    mapping: dict[Node, Node] | None = None,
                    given: Mapping[Node, int] | None = None) -> None:
        """A slot per state (its value this run) and one for its update (next run).
        ``given``: states whose value slot is one allocated already (a folded private output)."""
        mapping = mapping or {}
        given = given or {}
        for k, s in enumerate(states):
            offset = given.get(s, -1)
            if offset < 0:
                offset = self.layout.alloc(s.nbytes, state_initial(s), _align(s))
            else:
                self.layout.preset(offset, state_initial(s))
            nxt = self.layout.alloc(s.nbytes, align=_align(s))
            spec.placed[s] = offset
            update = update_of(s)
            spec.stores.setdefault(mapping.get(update, update), []).append(nxt)
            spec.end_copies.append((s, nxt, offset))
            name = s.attr[1] or f"state{k}"  # type: ignore[index]
            port_name = f"{name}@task{task}" if task != 0xFFFF else name
            self.states[port_name] = s
            self.image_ports.append(ImagePort(port_name, offset, s.dtype.code, ROLE_STATE, task,
                                              s.size))

    def add_chain(self, spec: ChainSpec, live: Sequence[Node]) -> None:
        """``live``: the chain's closure (saves the schedule a walk over the graph)."""
        instrs, ops = lower_with_loops(spec, self.table, self.layout, self.progress.part, live)
        self.chains.append(instrs)
        self.ops += ops
        self.task_ops.append(ops)

    def place_deferred(self) -> None:
        """The deferred zone after every other slot: its offsets in the code and the ports."""
        if not self.layout.deferred:
            return
        shift = self.layout.place_deferred()

        def moved(offset: int) -> int:
            return offset + shift if offset >= DEFERRED else offset

        self.chains = [[Instr(i.stencil, tuple((r, moved(o)) for r, o in i.slots))
                        for i in chain] for chain in self.chains]
        self.ports = {n: replace(p, offset=moved(p.offset)) for n, p in self.ports.items()}
        self.image_ports = [replace(p, offset=moved(p.offset)) for p in self.image_ports]

    def finish(self, tasks: Sequence[ImageTask], specs: list[TaskSpec]) -> CompiledProgram:
        self.place_deferred()
        self.progress.phase("linking")
        try:
            linked = link(self.chains, self.table)
        finally:
            self.progress.close()
        kinds, index = kinds_table([p.kind for p in linked.patches])
        data_size = -(-max(self.layout.size, 8) // 8) * 8
        image_tasks = [ImageTask(entry, t.period_ns, t.offset_ns, t.priority, 0, t.wcet_ns, 0,
                                 t.budget_ns, t.link_timeout_ns)
                       for entry, t in zip(linked.entries, tasks, strict=True)]
        stencils = sum(len(c) for c in self.chains)
        image = Image(
            arch=self.table.arch_id,
            code=linked.code,
            data_offset=linked.data_offset,
            data_size=data_size,
            base_align=self.table.base_align,
            data_init=self.layout.init_bytes(),
            kinds=kinds,
            patches=[ImagePatch(p.site, index[p.kind], p.addend) for p in linked.patches],
            tasks=image_tasks,
            ports=self.image_ports,
            let_copies=self.copies,
            io_bindings=self.bindings,
            metadata={"compiler": COMPILER_VERSION, "ops": self.ops, "stencils": stencils,
                      "stencil_table": self.table.source_hash[:16],
                      "tasks": [t.name for t in specs]},
            cpu_features=feature_mask(by_name(self.arch)),
        )
        if not self.code_image:
            image.blocks = encode(linked.blocks)
            image.table_pin = runner_table(self.arch).pin
            image.frozen = frozen_slots(self.table, linked.blocks)
            image.code_size = len(linked.code)
            # a task names its chain, not a code offset: the runner places the chains
            image.tasks = [t._replace(entry=k) for k, t in enumerate(image.tasks)]
        return CompiledProgram(self.arch, image.to_bytes(), self.ports, self.ops, stencils,
                               len(linked.code), linked.stencil_bytes, data_size,
                               len(linked.patches), list(specs), self.task_ops,
                               states=self.states)


@without_gc
def compile_program(outputs: Sequence[Node], arch: str,
                    names: Mapping[Node, str] | None = None,
                    in_place: bool = False,
                    fold: Mapping[Node, Node] | None = None) -> CompiledProgram:
    """One chain, run on request (``tg.run()``): inputs and outputs are read in place.
    ``names`` gives ports other names than the defaults (``outputK``, the inputs' names).
    ``in_place`` (@cp.jit only): array inputs that only element-wise operations read are read
    through pointer slots, which the caller may point at its own buffer for one call
    (``CompiledProgram.pointers``; docs/design.md, "@cp.jit in place"). Images for
    LocalTarget, cp.save and SerialTarget never ask for it. ``fold``: nodes replaced by
    simpler ones (comparisons the value ranges decide, checks.folded); the outputs keep their
    ports."""
    b = _Builder(arch, names)
    b.code_image = b.code_image or in_place
    b.defer = b.layout.defer_temps = in_place
    order, states = closure(outputs, set(), fold)
    order, states, mapping = b.pack(order, states, outputs, mapping=fold)
    spec = ChainSpec({}, {}, [])
    for node in order:
        if node in b.blocks:
            spec.placed[node] = b.input_block(node)
        elif node.op == "input":
            spec.placed[node] = b.shared_input(node)
            if in_place and node.shape:
                spec.in_place.add(node)
    spec.in_place.difference_update(outputs)  # an output port that is an input reads its bytes
    preset = _presets(states, outputs)
    for k, node in enumerate(outputs):
        if node in b.ports:
            continue
        if node.op == "const":
            offset = b.layout.alloc(node.nbytes, node.attr, _align(node))  # type: ignore[arg-type]
            role = ROLE_CONSTANT
        else:
            init = preset.get(node)
            offset = (b.layout.alloc_deferred(node.nbytes, _align(node))
                      if b.defer and node.shape and init is None else
                      b.layout.alloc(node.nbytes, init, _align(node)))
            spec.stores.setdefault(mapping.get(node, node), []).append(offset)
            role = ROLE_OUTPUT
        name = b.name(node, f"output{k}")
        b.ports[node] = Port(name, offset, node.dtype, role, node.size,
                             needs_run=role == ROLE_OUTPUT and node not in preset)
        b.image_ports.append(ImagePort(name, offset, node.dtype.code, role, count=node.size))
    b.state_slots(states, 0xFFFF, spec, mapping)
    b.add_chain(spec, order)
    compiled = b.finish([ImageTask(0)], [])
    compiled.pointers = spec.pointers
    return compiled


def _state_outputs(outputs: Sequence[Node], private: Sequence[int], states: Sequence[Node],
                   mapping: Mapping[Node, Node]) -> dict[Node, int]:
    """States whose value slot can be the private slot of an output that is their update:
    the chain's end leaves the update there, and nothing else writes the slot before the
    task's publication (its next run comes after it), so the copy publishes the same bytes
    and the chain stores the value once (docs/decisions/2026-12-04-state-outputs-in-place.md)."""
    by_update: dict[Node, Node] = {}
    for s in states:
        update = update_of(s)
        if update is not s and not s.shape:
            by_update.setdefault(mapping.get(update, update), s)
    given: dict[Node, int] = {}
    for node, slot in zip(outputs, private, strict=True):
        state = by_update.get(mapping.get(node, node))
        if (state is not None and state not in given and state.dtype == node.dtype
                and state.nbytes == node.nbytes):
            given[state] = slot
    return given


def _substitute_dt(roots: Sequence[Node], period_s: float, stop: set[Node]) -> dict[Node, Node]:
    """Replace ``cp.dt`` by the task's period in everything the roots compute."""
    order, _ = closure(roots, stop)
    mapping: dict[Node, Node] = {n: const(period_s, n.dtype) for n in order if n.op == "dt"}
    if not mapping:
        return {}
    return rebuild(order, mapping, stop)


@without_gc
def compile_tasks(tasks: Sequence[TaskSpec], arch: str, io: Sequence[IoSpec] = (),
                  names: Mapping[Node, str] | None = None,
                  fold_releases: bool = False) -> CompiledProgram:
    """Periodic tasks with logical execution time (docs/realtime.md). ``names`` gives ports
    other names than the defaults (``<task>.outK``, the inputs' names). ``fold_releases``: a
    task's chain reads its inputs and other tasks' outputs in their shared slots instead of
    RELEASE copies (exact where nothing writes a shared slot while a chain runs: LocalTarget;
    docs/decisions/2026-12-04-release-reads-in-place.md), and an output that is a state's
    update is published from the state's slot, which is its private output slot
    (docs/decisions/2026-12-04-state-outputs-in-place.md)."""
    if not tasks:
        raise CompileError("deploy() needs at least one cp.Task")
    if len(tasks) > 32:
        raise CompileError(f"{len(tasks)} tasks; a program holds at most 32")
    b = _Builder(arch, names)
    producer: dict[Node, int] = {}
    for k, t in enumerate(tasks):
        for node in t.outputs:
            if node in producer and producer[node] != k:
                raise CompileError(f"{node!r} is an output of tasks {tasks[producer[node]].name!r} "
                                   f"and {t.name!r}: a value has one producing task")
            producer[node] = k
    state_owner: dict[Node, int] = {}
    # shared ports for task outputs (what the host and other tasks see)
    shared_out: dict[Node, int] = {}
    for node, k in producer.items():
        if node.op == "input":
            raise CompileError(f"task {tasks[k].name!r}: an output is the input {node!r} itself "
                               f"(an expression such as x * 1.0 simplifies to x, and "
                               f"cp.delay(x, 0) is x): a task output is computed by the task; "
                               f"read the input directly (tg.read(x)), or publish a value "
                               f"computed from it, e.g. cp.delay(x, 1) for x at the previous "
                               f"release")
        init: bytes | None = node.attr if node.op == "const" else None  # type: ignore[assignment]
        offset = b.layout.alloc(node.nbytes, init, _align(node))
        shared_out[node] = offset
        name = b.name(node, f"{tasks[k].name}.out{tasks[k].outputs.index(node)}")
        b.ports[node] = Port(name, offset, node.dtype, ROLE_OUTPUT, node.size, task=k,
                             needs_run=init is None)
        b.image_ports.append(ImagePort(name, offset, node.dtype.code, ROLE_OUTPUT, k,
                                       node.size))
    # the private output slots, all tasks' in the order of the shared ones and laid out like
    # them: a tick's PUBLISH copies then continue one another (the runner's plan merges them)
    private_out: list[list[int]] = []
    for t in tasks:
        private_out.append([b.layout.alloc(node.nbytes, align=16 if not private_out and j == 0
                                           else _align(node))
                            for j, node in enumerate(t.outputs)])
    readers: dict[Node, list[int]] = {}
    for k, t in enumerate(tasks):
        others = {n for n, p in producer.items() if p != k}
        mapping = _substitute_dt(t.outputs, t.period_ns * 1e-9, others)
        order, states = closure([mapping.get(n, n) for n in t.outputs], others)
        order, states, mapping = b.pack(order, states, t.outputs, others, mapping)
        for s in states:
            if s in state_owner:
                raise CompileError(
                    f"the signal state {s!r} is used by tasks {tasks[state_owner[s]].name!r} and "
                    f"{t.name!r}: make its value an output of one task so the other reads it "
                    f"through a LET port")
            state_owner[s] = k
        for node, init in _presets(states, t.outputs).items():  # state outputs start at init
            if producer.get(node) == k:
                b.layout.preset(shared_out[node], init)
                b.ports[node] = replace(b.ports[node], needs_run=False)
        spec = ChainSpec({}, {}, [])
        private_blocks: dict[Node, int] = {}
        for node in order:
            block = b.member.get(node) if node.op == "input" else None
            if node in b.blocks or block is not None:
                # an input block: one copy of the whole block per release
                stand, index = (node, 0) if block is None else block
                private = private_blocks.get(stand)
                if private is None:
                    shared = b.input_block(stand)
                    private = private_blocks[stand] = (
                        shared if fold_releases
                        else b.layout.alloc(stand.nbytes, align=_align(stand)))
                    if not fold_releases:
                        b.copies.append(ImageLetCopy(k, RELEASE, stand.nbytes, shared, private))
                    for member in b.blocks[stand]:
                        readers.setdefault(member, []).append(k)
                spec.placed[node] = private + index * node.dtype.size
            elif node.op == "input" or node in others:
                shared = b.shared_input(node) if node.op == "input" else shared_out[node]
                if fold_releases:
                    spec.placed[node] = shared  # read at its release: the chain runs then
                else:
                    private = b.layout.alloc(node.nbytes, align=_align(node))
                    spec.placed[node] = private
                    b.copies.append(ImageLetCopy(k, RELEASE, node.nbytes, shared, private))
                if node.op == "input":
                    readers.setdefault(node, []).append(k)
        given = _state_outputs(t.outputs, private_out[k], states, mapping) if fold_releases else {}
        folded = set(given.values())
        for node, private in zip(t.outputs, private_out[k], strict=True):
            if private not in folded:
                spec.stores.setdefault(mapping.get(node, node), []).append(private)
            b.copies.append(ImageLetCopy(k, PUBLISH, node.nbytes, private, shared_out[node]))
        b.state_slots(states, k, spec, mapping, given)
        b.add_chain(spec, order)
    for binding in io:
        if binding.direction == IO_INPUT:
            if binding.node.op != "input":
                raise CompileError(f"{binding.node!r} is bound to an input channel but is not an "
                                   f"input made with cp.value()")
            for k in readers.get(binding.node, []):
                b.bindings.append(ImageIoBinding(k, IO_INPUT, binding.kind, binding.channel,
                                                 binding.node.dtype.code,
                                                 b.ports[binding.node].offset))
        else:
            k = producer.get(binding.node, -1)
            if k < 0:
                raise CompileError(f"{binding.node!r} drives an output channel but is not an "
                                   f"output of any deployed task")
            b.bindings.append(ImageIoBinding(k, IO_OUTPUT, binding.kind, binding.channel,
                                             binding.node.dtype.code, shared_out[binding.node],
                                             float(binding.safe)))
    image_tasks = [ImageTask(0, t.period_ns, t.offset_ns, t.priority, 0, t.wcet_ns, 0,
                             t.budget_ns, t.link_timeout_ns) for t in tasks]
    return b.finish(image_tasks, list(tasks))
