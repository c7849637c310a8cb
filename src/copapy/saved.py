"""Saved programs: ``cp.save(path, ...)`` writes a program image (docs/image.md) with its port
names; ``cp.load(path)`` reads one back as a :class:`Program` that ``LocalTarget.deploy``,
``SerialTarget.deploy`` and the command line (``copapy run/info/deploy``, ``copapy-runner
--image``) run without the Python code that built it."""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import image as im
from . import saved_meta
from .arch import features
from .arch import targets as arch_targets
from .checks import bind_range
from .compiler import CompiledProgram, compile_program, compile_tasks
from .compiler.layout import ROLE_CONSTANT, ROLE_INPUT, ROLE_OUTPUT, ROLE_STATE, Port
from .compiler.runner_table import VERIFIED_ARCHS
from .dtypes import BY_CODE, DType
from .graph import element_shapes
from .graph.node import input_name
from .graph.ranges import analyse
from .io import Channel, image_channel
from .runtime.load import check_architecture, host_architecture
from .target_common import NamedPorts, io_specs, task_specs
from .task import Task
from .value import Value, flatten, is_traced

__all__ = ["Program", "ProgramFileError", "build", "load", "save"]

#: the file name suffix of saved programs
SUFFIX = ".cpimg"
ROLE_NAMES = {ROLE_INPUT: "input", ROLE_OUTPUT: "output", ROLE_STATE: "state",
              ROLE_CONSTANT: "constant"}
NO_TASK = 0xFFFF


class ProgramFileError(ValueError):
    """A file is not a usable saved program (the message names the file and the problem)."""


@dataclass(frozen=True)
class PortInfo:
    """A named location of a saved program: what ``tg.read(name)`` / ``tg.write(name, x)``
    reach. ``task`` is the producing task of an output or state (None: shared)."""

    name: str
    offset: int
    dtype: DType
    role: str
    task: int | None
    count: int


@dataclass(frozen=True)
class ArrayInfo:
    """An array port of a saved program: ``tg.read(name)`` is a NumPy array of ``shape``.
    Its ``ports`` hold the elements in row-major order: one packed port ``name``, or one port
    per element ``name[k]`` (which ``tg.read("name[k]")`` still reaches)."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    ports: tuple[PortInfo, ...]

    @property
    def role(self) -> str:
        return self.ports[0].role

    @property
    def task(self) -> int | None:
        return self.ports[0].task

    @property
    def count(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class TaskInfo:
    """A task of a saved program (times in seconds; period 0: runs on request)."""

    name: str
    period: float
    offset: float
    priority: int
    wcet: float | None
    #: the execution time a job may take before the runner's supervisor stops it (None: the
    #: runner's default, wcet or the period)
    budget: float | None = None
    #: dead-man switch: the outputs go safe when the host link is silent this long
    link_timeout: float | None = None


@dataclass(frozen=True)
class BindingInfo:
    """An I/O binding: the task reads (``input``) or drives (``output``) a channel."""

    task: int
    direction: str
    channel: Channel
    port: str


class Program:
    """A compiled program read from a file or bytes: independent of the target that runs it
    (as long as the target executes ``arch`` code)."""

    def __init__(self, image: bytes, source: str = "<bytes>") -> None:
        try:
            parsed = im.parse(image)
        except im.ImageFormatError as exc:
            raise ProgramFileError(f"{source}: {exc}") from None
        try:
            base = arch_targets.by_id(parsed.arch)
            needs = features.feature_names(base, parsed.cpu_features)
        except (arch_targets.UnknownArchitectureError, features.UnknownFeatureError) as exc:
            raise ProgramFileError(f"{source}: {exc}") from None
        variant = features.variant_name(base.id, parsed.cpu_features)
        if parsed.format_version == im.FORMAT_VERSION_CODE and variant in VERIFIED_ARCHS:
            raise ProgramFileError(
                f"{source}: image format 1 carries machine code, and {variant} runners run "
                f"only what they can verify (format 2, stencil ids; docs/image.md): it was "
                f"saved by an older copapy; compile and save the program again with this one")
        self.image = bytes(image)
        self.source = source
        #: the architecture whose CPUs execute it (the image's id: x86_64 for x86_64-v3 code)
        self.arch: str = base.name
        #: the CPU features its code needs beyond the architecture's baseline (its
        #: CPU_FEATURES section): () for baseline code, which runs on every CPU of ``arch``
        self.cpu_features: tuple[str, ...] = needs
        #: the stencil table it was compiled with: ``arch``, or a variant (x86_64-v3)
        self.variant: str = features.variant_name(base.id, parsed.cpu_features)
        self.metadata: dict[str, Any] = dict(parsed.metadata)
        self._parsed = parsed
        try:
            #: the METADATA section, checked against its schema (copapy.saved_meta)
            self.meta = saved_meta.parse(parsed.metadata)
            self.ports = _ports(parsed.ports, len(parsed.tasks))
            #: the array ports by name (cp.save's names=, and named input arrays)
            self.arrays = _arrays(self.meta.arrays, self.ports)
            self.bindings = _bindings(parsed.io_bindings, self.ports, len(parsed.tasks))
        except ValueError as exc:  # a field no writer of this format writes
            raise ProgramFileError(f"{source}: {exc}") from None
        names = self.meta.tasks
        self.tasks = [TaskInfo(names[k] if k < len(names) else f"task{k}", t.period_ns * 1e-9,
                               t.offset_ns * 1e-9, t.priority,
                               t.wcet_ns * 1e-9 if t.wcet_ns else None,
                               t.budget_ns * 1e-9 if t.budget_ns else None,
                               t.link_timeout_ns * 1e-9 if t.link_timeout_ns else None)
                      for k, t in enumerate(parsed.tasks)]

    # ---- what it is

    @property
    def periodic(self) -> bool:
        """Periodic tasks (``deploy`` + ``step``), or one computation run on request."""
        return any(t.period > 0 for t in self.tasks)

    @property
    def tick_ns(self) -> int:
        """The largest tick that divides every task period and offset (what the host runner
        uses); 0 for a program run on request."""
        times = [round(x * 1e9) for t in self.tasks for x in (t.period, t.offset)]
        return math.gcd(*times)

    @property
    def tick(self) -> float:
        return self.tick_ns * 1e-9

    def port(self, name: str) -> PortInfo:
        """The port called ``name``; KeyError lists the names there are."""
        for p in self.ports:
            if p.name == name:
                return p
        raise KeyError(f"the program has no port {name!r}; it has "
                       f"{', '.join(p.name for p in self.ports) or 'none'}")

    def named(self, name: str) -> PortInfo | ArrayInfo:
        """What ``tg.read(name)`` reads: an array port, or else a port; KeyError lists both."""
        if name in self.arrays:
            return self.arrays[name]
        try:
            return self.port(name)
        except KeyError:
            raise KeyError(f"the program has no port {name!r}; it has "
                           f"{', '.join(self.names()) or 'none'}") from None

    def names(self, role: str | None = None) -> list[str]:
        """The names ``tg.read`` takes (of ``role``'s ports), in port order: each array once,
        as a whole, and the ports that are no array's elements."""
        array_of = {p.name: a.name for a in self.arrays.values() for p in a.ports}
        out = dict.fromkeys(array_of.get(p.name, p.name) for p in self.ports
                            if role is None or p.role == role)
        return list(out)

    def published_ns(self, name: str) -> int:
        """The simulated time (ns) from which the port ``name`` holds a computed value: the
        end of its task's first period for a computed output (``LocalTarget.read`` raises
        NotComputedError before it), else 0 (inputs, constants, states and the outputs a
        state presets hold their initial data)."""
        port = self.port(name)
        if name not in self.meta.computed or port.task is None:
            return 0
        task = self._parsed.tasks[port.task]
        return int(task.offset_ns + task.period_ns)

    def compiled(self) -> CompiledProgram:
        """The program as the targets hold compiled ones, its ports keyed by name."""
        ports = NamedPorts(
            {p.name: Port(p.name, p.offset, p.dtype, _role_code(p.role), p.count,
                          NO_TASK if p.task is None else p.task) for p in self.ports},
            {a.name: (a.shape, tuple(p.name for p in a.ports)) for a in self.arrays.values()})
        return CompiledProgram(self.arch, self.image, ports, self.meta.ops, self.meta.stencils,
                               len(self._parsed.code), 0, self._parsed.data_size,
                               len(self._parsed.patches), [], [])

    def __reduce__(self) -> tuple[Any, ...]:
        """A program pickles as its image bytes (and where they came from): a worker
        process rebuilds the same program from them."""
        return (Program, (self.image, self.source))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the image to ``path`` (the same bytes ``cp.save`` wrote)."""
        write_image(path, self.image)

    def __repr__(self) -> str:
        what = f"{len(self.tasks)} tasks" if self.periodic else "on request"
        return f"<copapy Program {self.source} {self.variant}, {what}, {len(self.ports)} ports>"


def _role_code(role: str) -> int:
    return {v: k for k, v in ROLE_NAMES.items()}[role]


def _ports(ports: Sequence[im.ImagePort], tasks: int) -> list[PortInfo]:
    """The PORTS section's entries, or ValueError naming the first that no writer makes."""
    out: list[PortInfo] = []
    seen: set[str] = set()
    for k, p in enumerate(ports):
        where = f"ports[{k}] {p.name!r}"
        saved_meta.text(p.name, f"ports[{k}].name")
        if p.name in seen:
            raise ValueError(f"{where}: a second port of that name")
        if p.dtype not in BY_CODE:
            raise ValueError(f"{where}: unknown dtype code {p.dtype}")
        if p.role not in ROLE_NAMES:
            raise ValueError(f"{where}: unknown role {p.role} (1 input, 2 output, 3 state, "
                             f"4 constant)")
        if p.count < 1:
            raise ValueError(f"{where}: holds {p.count} elements")
        if p.task != NO_TASK and p.task >= tasks:
            raise ValueError(f"{where}: task {p.task}, but the program has {tasks} tasks")
        seen.add(p.name)
        out.append(PortInfo(p.name, p.offset, BY_CODE[p.dtype], ROLE_NAMES[p.role],
                            None if p.task == NO_TASK else p.task, p.count))
    return out


def _arrays(specs: Sequence[saved_meta.ArraySpec], ports: Sequence[PortInfo]
            ) -> dict[str, ArrayInfo]:
    """The metadata's arrays with their ports (one packed port ``name`` or ``name[k]`` for
    each element), or ValueError naming the array that the ports do not hold."""
    by_name = {p.name: p for p in ports}
    out: dict[str, ArrayInfo] = {}
    for k, a in enumerate(specs):
        where = f"arrays[{k}] {a.name!r}"
        if a.name in out:
            raise ValueError(f"{where}: a second array of that name")
        parts: tuple[PortInfo, ...]
        if a.name in by_name:
            parts = (by_name[a.name],)
            if parts[0].count != a.size:
                raise ValueError(f"{where}: shape {list(a.shape)} has {a.size} elements, its "
                                 f"port holds {parts[0].count}")
        else:
            if a.size > len(ports):
                raise ValueError(f"{where}: shape {list(a.shape)} has {a.size} elements, the "
                                 f"program has {len(ports)} ports")
            missing = [f"{a.name}[{i}]" for i in range(a.size)
                       if by_name.get(f"{a.name}[{i}]", None) is None
                       or by_name[f"{a.name}[{i}]"].count != 1]
            if missing:
                raise ValueError(f"{where}: no port {a.name!r} and no one-element port "
                                 f"{missing[0]!r}")
            parts = tuple(by_name[f"{a.name}[{i}]"] for i in range(a.size))
        kinds = {(p.dtype, p.role, p.task) for p in parts}
        if kinds != {(a.dtype, parts[0].role, parts[0].task)}:
            raise ValueError(f"{where}: its {a.dtype.name} elements are in ports of other "
                             f"dtypes, roles or tasks")
        out[a.name] = ArrayInfo(a.name, a.shape, a.dtype, parts)
    return out


def _bindings(bindings: Sequence[im.ImageIoBinding], ports: Sequence[PortInfo], tasks: int
              ) -> list[BindingInfo]:
    """The IO_BINDINGS section's entries, or ValueError naming one no writer makes."""
    by_offset = {p.offset: p.name for p in ports}
    out: list[BindingInfo] = []
    for k, b in enumerate(bindings):
        try:
            channel = image_channel(b.kind, b.channel, b.direction, b.safe)
        except ValueError as exc:
            raise ValueError(f"io_bindings[{k}]: {exc}") from None
        if b.task >= tasks:
            raise ValueError(f"io_bindings[{k}]: task {b.task}, but the program has {tasks} "
                             f"tasks")
        out.append(BindingInfo(b.task, "output" if channel.is_output else "input", channel,
                               by_offset.get(b.offset, f"@{b.offset}")))
    return out


_ELEMENT = re.compile(r"(.+)\[(\d+)\]")


def array_specs(compiled: CompiledProgram, shapes: Mapping[str, tuple[int, ...]],
                aliases: Mapping[str, Any] | None = None) -> list[saved_meta.ArraySpec]:
    """The arrays save() describes in the metadata: each packed port or state (its node has
    the shape) and the elements ``name[0..n-1]`` of an unpacked array (of ``shapes[name]``,
    the arrays names= gives, else the shape its first element recorded when a named input or
    state array was made (graph.element_shapes), else 1-D). The elements of a task's unpacked
    state, ``name[k]@taskN``, are not described (an array's elements are ``name[k]``)."""
    # (node, port) pairs, not a dict by node: a delay's output is its state leaf, which has
    # an output port and a state port (keyed by node, the state's replaced the output's, so
    # the array the delay named was not described: read back flat or not at all)
    pairs = [*compiled.ports.items(),
             *((node, Port(name, 0, node.dtype, ROLE_STATE, node.size))
               for name, node in compiled.states.items()),
             *((node, replace(compiled.ports[node], name=alias))
               for alias, node in (aliases or {}).items())]
    specs = {p.name: saved_meta.ArraySpec(p.name, tuple(node.shape), p.dtype)
             for node, p in pairs if node.shape}
    groups: dict[str, list[Port]] = {}
    for _, p in pairs:
        m = _ELEMENT.fullmatch(p.name)
        if m and p.count == 1:
            groups.setdefault(m[1], []).append(p)
    nodes = {p.name: node for node, p in pairs}
    by_name = {p.name: p for _, p in pairs}
    for name, parts in groups.items():
        first = nodes.get(f"{name}[0]")
        recorded = element_shapes.shape_of(first) if first is not None else None
        shape = shapes.get(name) or recorded or (len(parts),)
        if (name not in nodes and math.prod(shape) == len(parts)
                and {p.name for p in parts} == {f"{name}[{i}]" for i in range(len(parts))}
                and len({(p.dtype, p.role, p.task) for p in parts}) == 1):
            specs[name] = saved_meta.ArraySpec(name, shape, parts[0].dtype)
    for name, shape in shapes.items():  # a one-element array names= names: one scalar port
        node = nodes.get(name)
        if name not in specs and node is not None and math.prod(shape) == node.size == 1:
            specs[name] = saved_meta.ArraySpec(name, shape, by_name[name].dtype)
    return list(specs.values())


def write_image(path: str | os.PathLike[str], image: bytes) -> None:
    """Write image bytes to ``path`` through a temporary file that is on the disk before it
    replaces ``path``: a reader, a crash or a power loss leaves the old file or the new one,
    never half of one; an interrupted write (KeyboardInterrupt too) leaves no temporary."""
    target = Path(path)
    tmp = _temporary(target, os.getpid())
    _remove_stale(target)
    try:
        with open(tmp, "wb") as f:  # truncates a stale one of a former process of this pid
            f.write(image)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ProgramFileError(f"cannot write {os.fspath(path)!r}: {exc.strerror}") from None
        raise
    if os.name == "posix":  # the rename itself is on the disk once its directory is synced
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):  # file systems that cannot sync a directory
                os.fsync(fd)
        finally:
            os.close(fd)


def _temporary(target: Path, pid: int) -> Path:
    return target.with_name(f".{target.name}.tmp{pid}")


def _remove_stale(target: Path) -> None:
    """Remove the temporaries of ``target`` that processes which no longer run left (killed
    while writing it)."""
    prefix = f".{target.name}.tmp"
    try:
        names = [n for n in os.listdir(target.parent or ".") if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            with contextlib.suppress(OSError):
                _temporary(target, int(pid)).unlink()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):  # another user's, or not a pid
        return True
    return True


def _node_names(names: Mapping[str, Any] | None) -> tuple[dict[Any, str], dict[str, Any]]:
    """(node -> port name, alias name -> node): a value's first name names its port; a name
    for a value that already has one (an input's ``cp.value(..., name=...)``, or an earlier
    entry: ``names={"y": x * 1.0}`` where ``x * 1.0`` is ``x``) is a second port of the same
    slot, so no name given elsewhere is lost."""
    out: dict[Any, str] = {}
    aliases: dict[str, Any] = {}
    if names is not None and not isinstance(names, Mapping):
        raise TypeError(f"names maps port names to values ({{'speed': speed}}), got "
                        f"{type(names).__name__}")
    for name, v in (names or {}).items():
        if not isinstance(name, str):
            raise TypeError(f"names: a port name is a str, got {type(name).__name__} {name!r}")
        if not is_traced(v):
            raise TypeError(f"names[{name!r}] must be a copapy value or array, got "
                            f"{type(v).__name__}")
        nodes = v.nodes()
        if len(nodes) > 1:
            _check_elements(name, nodes)
        for k, n in enumerate(nodes):
            port = name if len(nodes) == 1 else f"{name}[{k}]"
            own = input_name(n) if n.op == "input" else None
            if out.get(n, port) != port or (n not in out and own not in (None, port)):
                aliases[port] = n
            else:
                out[n] = port
    return out, aliases


def with_aliases(image: bytes, compiled: CompiledProgram, aliases: Mapping[str, Any]) -> bytes:
    """``image`` with a port named ``alias`` beside each aliased node's own port: the same
    offset, dtype, role, task and count (reading or writing one is the other)."""
    if not aliases:
        return image
    img = im.parse(image)
    taken = {p.name for p in img.ports}
    for alias, node in aliases.items():
        port = compiled.ports[node]
        if alias in taken:
            raise ValueError(f"names[{alias!r}]: the program has another port of that name "
                             f"({alias!r} names a second value): give them different names")
        taken.add(alias)
        img.ports.append(im.ImagePort(alias, port.offset, port.dtype.code, port.role,
                                      port.task, port.count))
    return img.to_bytes()


def _check_elements(name: str, nodes: Sequence[Any]) -> None:
    """An unpacked array whose elements are partly the program's inputs (np.cumsum(v)[0] is
    v[0]) has no port of its own to read it by: its input elements would be renamed."""
    inputs = [k for k, n in enumerate(nodes) if n.op == "input"]
    if inputs and len(inputs) < len(nodes):
        raise ValueError(f"names[{name!r}]: element {inputs[0]} is an input of the program "
                         f"itself (as np.cumsum(v)[0] is v[0]), so the array has no port of "
                         f"its own: its elements would take the input's place and name. Name "
                         f"the computed elements one by one, or save the input under its "
                         f"own name only")


def _shapes(names: Mapping[str, Any] | None) -> dict[str, tuple[int, ...]]:
    """The shapes of the arrays (and quaternions) that ``names`` names."""
    return {name: tuple(getattr(v, "shape", (len(v.nodes()),)))
            for name, v in (names or {}).items()
            if len(v.nodes()) > 1 or len(getattr(v, "shape", ())) > 0}


def with_arrays(image: bytes, arrays: Sequence[saved_meta.ArraySpec],
                ranges: Sequence[saved_meta.RangeSpec] = (), computed: Sequence[str] = ()
                ) -> bytes:
    """``image`` with ``arrays`` described in its metadata (``tg.read(name)`` of a loaded
    program reads them whole), the ports' value ``ranges`` and the ``computed`` outputs."""
    if not arrays and not ranges and not computed:
        return image
    img = im.parse(image)
    extra: dict[str, Any] = {"arrays": [a.to_json() for a in arrays]} if arrays else {}
    if ranges:
        extra["ranges"] = [r.to_json() for r in ranges]
    if computed:
        extra["computed"] = list(computed)
    img.metadata = {**img.metadata, **extra}
    return img.to_bytes()


def computed_ports(compiled: CompiledProgram) -> list[str]:
    """The outputs with no value before their task first publishes (``Port.needs_run``):
    a loaded program knows them too, so nothing reads their initial 0 as a value."""
    return [p.name for p in compiled.ports.values() if p.needs_run]


def range_specs(compiled: CompiledProgram) -> list[saved_meta.RangeSpec]:
    """The value range of every port (the range analysis of what the program computes)."""
    found = analyse(list(compiled.ports)).ranges
    specs = []
    for node, port in compiled.ports.items():
        r = found.get(node)
        if r is None:
            continue
        specs.append(saved_meta.RangeSpec(port.name, r.lo if math.isfinite(r.lo) else None,
                                          r.hi if math.isfinite(r.hi) else None, r.nan))
    return specs


def _binding_nodes(bindings: Iterable[Any]) -> dict[Any, Channel]:
    """save()'s ``bindings`` as node -> channel, or TypeError naming the form they take."""
    out: dict[Any, Channel] = {}
    for pair in bindings:
        if not (isinstance(pair, tuple | list) and len(pair) == 2
                and isinstance(pair[0], Value)):
            raise TypeError(f"bindings are (value, channel) pairs, e.g. [(speed, "
                            f"cp.io.Encoder(0))], got {pair!r}")
        out[pair[0].node] = pair[1]
        bind_range(pair[0].node, pair[1])  # as tg.bind: the input takes the channel's range
    return out


def save(path: str | os.PathLike[str], *items: Any, arch: str | None = None,
         names: Mapping[str, Any] | None = None,
         bindings: Iterable[tuple[Any, Channel]] = ()) -> Program:
    """Compile ``cp.Task`` objects (periodic tasks) or values (one computation run on
    request) and write the program image to ``path`` (conventionally ``*.cpimg``).

    ``names`` maps port names to values (``{"speed": speed}``); other ports keep their default
    names: an input's ``cp.value(..., name=...)`` or ``inputK``, ``<task>.outK`` for task
    outputs, ``outputK`` for values. ``bindings`` pairs values with ``cp.io`` channels (as
    ``tg.bind(value, channel)``). ``arch`` defaults to this machine's. Returns the saved
    :class:`Program`.
    """
    if not items:
        raise TypeError("save(path, ...) needs cp.Task objects or values to compile")
    program = build(*items, arch=arch, names=names, bindings=bindings)
    write_image(path, program.image)
    return Program(program.image, str(path))


def build(*items: Any, arch: str | None = None, names: Mapping[str, Any] | None = None,
          bindings: Iterable[tuple[Any, Channel]] = ()) -> Program:
    """What ``save`` writes, without a file: the :class:`Program` of tasks or values (the
    same arguments; ``cp.sweep`` builds its image this way)."""
    if not items:
        raise TypeError("build() needs cp.Task objects or values to compile")
    arch = check_architecture(arch) if arch is not None else host_architecture()
    tasks = [x for x in items if isinstance(x, Task)]
    node_names, aliases = _node_names(names)
    if tasks and len(tasks) != len(items):
        raise TypeError("save() takes either cp.Task objects (periodic tasks) or values (run on "
                        "request), not both")
    if tasks:
        io = io_specs(_binding_nodes(bindings))
        compiled = compile_tasks(task_specs(tasks), arch, io, node_names)
    else:
        if list(bindings):
            raise TypeError("I/O bindings need periodic tasks: save(path, cp.Task(...), ...)")
        compiled = compile_program(flatten(items, "save()"), arch, node_names)
    for node, name in [*node_names.items(), *((n, a) for a, n in aliases.items())]:
        if node not in compiled.ports:  # its name would be missing from the file
            raise ValueError(f"names[{name!r}]: the value is neither an input nor an output of "
                             f"the program, so it has no port to name: make it a task output "
                             f"(or a saved value), or leave it out of names")
    image = with_aliases(compiled.image, compiled, aliases)
    return Program(with_arrays(image, array_specs(compiled, _shapes(names), aliases),
                               range_specs(compiled), computed_ports(compiled)))


def load(path: str | os.PathLike[str]) -> Program:
    """Read a saved program (checks magic, version, size and CRC; the runner that loads it
    checks everything else, docs/image.md)."""
    try:
        blob = Path(path).read_bytes()
    except OSError as exc:
        raise ProgramFileError(f"cannot read {os.fspath(path)!r}: {exc.strerror}") from None
    return Program(blob, os.fspath(path))


def is_image_file(path: str) -> bool:
    """Whether ``path`` names a regular file that starts like a program image (a serial port
    or pty is never opened here: reading one would block)."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(4) == im.MAGIC
    except OSError:
        return False
