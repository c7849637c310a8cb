"""Saved programs: ``cp.save(path, ...)`` writes a program image (docs/image.md) with its port
names; ``cp.load(path)`` reads one back as a :class:`Program` that ``LocalTarget.deploy``,
``SerialTarget.deploy`` and the command line (``copapy run/info/deploy``, ``copapy-runner
--image``) run without the Python code that built it."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import image as im
from .arch import features
from .arch import targets as arch_targets
from .compiler import CompiledProgram, compile_program, compile_tasks
from .compiler.layout import ROLE_CONSTANT, ROLE_INPUT, ROLE_OUTPUT, ROLE_STATE, Port
from .dtypes import BY_CODE, DType
from .io import Channel
from .runtime.load import check_architecture, host_architecture
from .target_common import io_specs, task_specs
from .task import Task
from .value import Value, flatten, is_traced

__all__ = ["Program", "ProgramFileError", "load", "save"]

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
        self.image = bytes(image)
        self.source = source
        #: the architecture whose CPUs execute it (the image's id: x86_64 for x86_64-v3 code)
        self.arch: str = base.name
        #: the CPU features its code needs beyond the architecture's baseline (its
        #: CPU_FEATURES section): () for baseline code, which runs on every CPU of ``arch``
        self.cpu_features: tuple[str, ...] = needs
        #: the stencil table it was compiled with: ``arch``, or a variant (x86_64-v3)
        self.variant: str = features.variant_name(base.id, parsed.cpu_features)
        if not isinstance(parsed.metadata, dict):
            raise ProgramFileError(f"{source}: its metadata is not a JSON object")
        self.metadata: dict[str, Any] = dict(parsed.metadata)
        unknown = [p.dtype for p in parsed.ports if p.dtype not in BY_CODE]
        if unknown:
            raise ProgramFileError(f"{source}: a port has the unknown dtype code {unknown[0]}")
        self._parsed = parsed
        self.ports = [PortInfo(p.name, p.offset, BY_CODE[p.dtype], ROLE_NAMES.get(p.role, "?"),
                               None if p.task == NO_TASK else p.task, p.count)
                      for p in parsed.ports]
        names = self.metadata.get("tasks") or []
        self.tasks = [TaskInfo(names[k] if k < len(names) else f"task{k}", t.period_ns * 1e-9,
                               t.offset_ns * 1e-9, t.priority,
                               t.wcet_ns * 1e-9 if t.wcet_ns else None,
                               t.budget_ns * 1e-9 if t.budget_ns else None,
                               t.link_timeout_ns * 1e-9 if t.link_timeout_ns else None)
                      for k, t in enumerate(parsed.tasks)]
        by_offset = {p.offset: p.name for p in self.ports}
        self.bindings = [BindingInfo(b.task, "input" if b.direction == 1 else "output",
                                     Channel(b.kind, b.channel,
                                             "out" if b.direction == 2 else "in",
                                             safe=b.safe),
                                     by_offset.get(b.offset, f"@{b.offset}"))
                         for b in parsed.io_bindings]

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

    def compiled(self) -> CompiledProgram:
        """The program as the targets hold compiled ones, its ports keyed by name."""
        ports: dict[Any, Port] = {
            p.name: Port(p.name, p.offset, p.dtype, _role_code(p.role), p.count,
                         NO_TASK if p.task is None else p.task) for p in self.ports}
        meta = self.metadata
        ops = int(meta.get("ops", 0))
        return CompiledProgram(self.arch, self.image, ports, ops, int(meta.get("stencils", 0)),
                               len(self._parsed.code), 0, self._parsed.data_size,
                               len(self._parsed.patches), [], [])

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the image to ``path`` (the same bytes ``cp.save`` wrote)."""
        write_image(path, self.image)

    def __repr__(self) -> str:
        what = f"{len(self.tasks)} tasks" if self.periodic else "on request"
        return f"<copapy Program {self.source} {self.variant}, {what}, {len(self.ports)} ports>"


def _role_code(role: str) -> int:
    return {v: k for k, v in ROLE_NAMES.items()}[role]


def write_image(path: str | os.PathLike[str], image: bytes) -> None:
    """Write image bytes to ``path`` (through a temporary file: a reader never sees half)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(image)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ProgramFileError(f"cannot write {os.fspath(path)!r}: {exc.strerror}") from None


def _node_names(names: Mapping[str, Any] | None) -> dict[Any, str]:
    out: dict[Any, str] = {}
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
        if len(nodes) == 1:
            out[nodes[0]] = name
        else:  # an unpacked array: one port per element
            out.update({n: f"{name}[{k}]" for k, n in enumerate(nodes)})
    return out


def _binding_nodes(bindings: Iterable[Any]) -> dict[Any, Channel]:
    """save()'s ``bindings`` as node -> channel, or TypeError naming the form they take."""
    out: dict[Any, Channel] = {}
    for pair in bindings:
        if not (isinstance(pair, tuple | list) and len(pair) == 2
                and isinstance(pair[0], Value)):
            raise TypeError(f"bindings are (value, channel) pairs, e.g. [(speed, "
                            f"cp.io.Encoder(0))], got {pair!r}")
        out[pair[0].node] = pair[1]
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
    arch = check_architecture(arch) if arch is not None else host_architecture()
    tasks = [x for x in items if isinstance(x, Task)]
    node_names = _node_names(names)
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
    for node, name in node_names.items():
        if node not in compiled.ports:  # its name would be missing from the file
            raise ValueError(f"names[{name!r}]: the value is neither an input nor an output of "
                             f"the program, so it has no port to name: make it a task output "
                             f"(or a saved value), or leave it out of names")
    write_image(path, compiled.image)
    return Program(compiled.image, str(path))


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
