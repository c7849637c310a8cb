"""Shared helpers of the cross-architecture tests (tests/test_cross_arch.py).

Which runner executes which architecture (read from src/copapy/targets/*.toml), and one way to
drive all of them: a *batch* is a
compiled image plus a list of input sets; every input set is written as raw bytes into the
data region, the task runs once, and the raw bytes of the output slots are read back. Raw
bytes on both sides keep the comparison free of any Python float conversion (a float32
signalling NaN, for instance, would be quietened by a round trip through a Python float).

Runners:

* ``native``: the C runner extension ``copapy._runner`` (x86_64 only, this machine);
* ``unicorn``: ``copapy.runtime.unicorn_backend.UnicornProgram`` (the Python runner on the
  unicorn CPU emulator, set up as the toml's ``[unicorn]`` table says);
* ``qemu``: ``copapy.runtime.qemu_backend.run_jobs``, the real C runner core as bare-metal
  firmware on the qemu-system board of the toml's ``[qemu]`` table; every input set is one job
  (LOAD, WRITE, RUN, DUMP) and all jobs of a call share as few boots as possible.

Every architecture with C stencils runs on the emulator its toml's ``emulator`` names (the one
LocalTarget uses) and on those of ``[tests] extra_emulators`` (Cortex-M7 also on qemu's real M7
model, since unicorn runs M7 code on an ARMv8-A CPU); x86_64 on unicorn runs the Python patcher
and an emulated CPU on the baseline's own machine code.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copapy.arch.features import base_of
from copapy.arch.targets import by_name, host_arch, targets
from copapy.compiler import compile_program
from copapy.dtypes import DType
from copapy.graph.node import Node
from copapy.graph.reference import evaluate_graph
from copapy.loading import emulator_image
from copapy.runtime.load import is_native

from .cpu import lacks

REPO = Path(__file__).resolve().parents[2]
UNICORN_INSTALL = "pip install 'copapy[emu]'  (or: pip install unicorn==2.1.4)"
QEMU_INSTALL = "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm make"

#: the architectures with C stencils (the whole operation set), in the order of the image ids;
#: the others (hand-written assembly subsets: TriCore) have a tests/test_<name>.py of their own
ARCHS = [t.name for t in targets() if t.builder in ("clang", "gcc")]
OTHER_TARGETS = [t.name for t in targets() if t.builder not in ("clang", "gcc")]


@dataclass(frozen=True)
class Config:
    """One architecture on one runner."""

    arch: str
    runner: str  # native | unicorn | qemu

    @property
    def id(self) -> str:
        return f"{self.arch}-{self.runner}"


#: the baseline every other configuration is compared with, bit for bit
NATIVE = Config("x86_64", "native")

#: every architecture on the emulator LocalTarget(arch=...) uses, then its toml's extra ones
CONFIGS = [Config(t.name, e) for t in targets() if t.name in ARCHS for e in t.test_emulators]
CONFIG_IDS = [c.id for c in CONFIGS]


def has_float64(arch: str) -> bool:
    """What the architecture's stencil table says (the compiler rejects float64 without it)."""
    from copapy.compiler.table import load_table

    return bool(load_table(arch).float64)


def missing_tools(runner: str) -> str | None:
    """None if ``runner`` can run here, else what is missing and the command that installs it."""
    if runner == "unicorn":
        try:
            import unicorn  # noqa: F401
        except ImportError:
            return f"the unicorn emulator is not installed: {UNICORN_INSTALL}"
    if runner == "qemu":
        missing = [t for t in ("qemu-system-arm", "arm-none-eabi-gcc", "make")
                   if shutil.which(t) is None]
        if missing:
            return f"{', '.join(missing)} not installed: {QEMU_INSTALL}"
    return None


# ---- batches: one image, many input sets


Writes = list[tuple[int, bytes]]  # (data offset, raw bytes)


@dataclass
class Batch:
    """One compiled image; each input set is written, the task runs, the outputs are read."""

    image: bytes
    input_sets: list[Writes]
    outputs: list[tuple[int, int]]  # (data offset, size) read after every run
    results: list[list[bytes]] = field(default_factory=list)  # filled by execute()


def execute(config: Config, batches: Sequence[Batch]) -> None:
    """Run every batch on ``config``; fills ``batch.results[k][j]`` (input set k, output j)."""
    problem = missing_tools(config.runner)
    if problem:
        raise AssertionError(problem)  # a missing emulator is a failure, never a skip
    if config.runner == "native":
        if not is_native(config.arch):  # a variant (x86_64-v3) on a CPU without its features
            target = by_name(config.arch)
            if base_of(target).name != host_arch():  # the wheel's tests on another CPU
                pytest.skip(f"{config.arch}: runs natively on {base_of(target).name} only, "
                            f"this machine is {host_arch()}")
            pytest.skip(f"{config.arch}: this CPU lacks {', '.join(lacks(target))} "
                        "(docs/design.md, 'Vector stencil tables')")
        _execute_native(batches)
    elif config.runner == "unicorn":
        _execute_unicorn(config.arch, batches)
    elif config.runner == "qemu":
        _execute_qemu(config.arch, batches)
    else:
        raise ValueError(config.runner)


def _execute_native(batches: Iterable[Batch]) -> None:
    from copapy import _runner

    for batch in batches:
        prog = _runner.load(batch.image, own_code=True)  # compiled here: v1 (in_place) too
        with memoryview(prog) as data:
            batch.results = []
            for writes in batch.input_sets:
                for offset, raw in writes:
                    data[offset : offset + len(raw)] = raw
                prog.run()
                batch.results.append([bytes(data[o : o + s]) for o, s in batch.outputs])
        prog.unload()


def _merged(writes: Writes) -> Writes:
    """Adjacent writes as one (inputs usually sit side by side in the data region)."""
    out: Writes = []
    for offset, raw in sorted(writes):
        if out and out[-1][0] + len(out[-1][1]) == offset:
            out[-1] = (out[-1][0], out[-1][1] + raw)
        else:
            out.append((offset, raw))
    return out


def _read_plan(outputs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Few (offset, size) ranges that cover every output slot."""
    ranges: list[tuple[int, int]] = []
    for offset, size in sorted(set(outputs)):
        if ranges and ranges[-1][0] + ranges[-1][1] >= offset:
            start = ranges[-1][0]
            ranges[-1] = (start, max(ranges[-1][1], offset + size - start))
        else:
            ranges.append((offset, size))
    return ranges


def as_code(image: bytes) -> bytes:
    """The image as format 1, as the emulated back ends take it (they do not build code from
    stencil ids): verified first by the runner's verifier against its architecture's table
    (loading.emulator_image), so every program these tests run passed verification."""
    return emulator_image(image)


def _execute_unicorn(arch: str, batches: Iterable[Batch]) -> None:
    from copapy.runtime.unicorn_backend import UnicornProgram

    for batch in batches:
        prog = UnicornProgram(as_code(batch.image), arch)
        plan = _read_plan(batch.outputs)
        start = min(o for o, _s in plan) if plan else 0
        size = max(o + s for o, s in plan) - start if plan else 0
        batch.results = []
        for writes in batch.input_sets:
            for offset, raw in _merged(writes):
                prog.write_bytes(offset, raw)
            prog.run()
            if len(plan) == 1:
                data = prog.read_bytes(start, size)
            else:
                data = bytearray(size)
                for o, s in plan:
                    data[o - start : o - start + s] = prog.read_bytes(o, s)
            batch.results.append([bytes(data[o - start : o - start + s])
                                  for o, s in batch.outputs])


def _execute_qemu(arch: str, batches: Sequence[Batch]) -> None:
    from copapy.runtime import qemu_backend as qb

    try:
        qb.harness_path(arch)
    except RuntimeError as exc:  # e.g. newlib missing: the build fails
        raise AssertionError(f"{exc}\ninstall: {QEMU_INSTALL}") from exc

    jobs = [qb.Job(as_code(b.image), (*(qb.Write(o, raw) for o, raw in _merged(writes)), qb.Run()))
            for b in batches for writes in b.input_sets]
    results = iter(qb.run_jobs(arch, jobs))
    for batch in batches:
        batch.results = []
        for _ in batch.input_sets:
            data = next(results).check().data
            assert data is not None
            batch.results.append([data[o : o + s] for o, s in batch.outputs])


# ---- comparison


def same_raw(got: bytes, want: bytes, dtype: DType) -> bool:
    """Bit-identical, element by element; any NaN equals any NaN (NaN payloads differ between
    CPUs). int32, and bool stored as int32 0/1: every bit counts."""
    if got == want:
        return True
    return len(got) == len(want) and first_difference(got, want, dtype) < 0


def first_difference(got: bytes, want: bytes, dtype: DType) -> int:
    """Index of the first element that differs (NaN equals NaN), -1 if none."""
    size = dtype.size
    for k in range(0, len(want) // size):
        g, w = got[k * size : (k + 1) * size], want[k * size : (k + 1) * size]
        if g == w:
            continue
        if dtype.is_float:
            gv, wv = struct.unpack(dtype.fmt, g)[0], struct.unpack(dtype.fmt, w)[0]
            if gv != gv and wv != wv:
                continue
        return k
    return -1


def show(raw: bytes, dtype: DType) -> str:
    """A value with its bits, for failure messages."""
    value = dtype.unpack(raw)
    return f"{value!r} (0x{raw[::-1].hex()})"


def has_live_float64(outputs: Iterable[Node]) -> bool:
    """Does computing ``outputs`` involve a float64 value (rejected without FP64 support)?

    An output that is itself an input or a constant needs no code (the host reads the slot),
    so a float64 one is accepted everywhere; any float64 operand or result of a computed
    node is not."""
    seen: set[int] = set()
    stack = [n for n in outputs if n.op not in ("input", "const")]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.dtype.name == "float64":
            return True
        stack.extend(node.args)
    return False


def stencils_used(outputs: Sequence[Node], arch: str = "x86_64", last: bool = False,
                  in_place: bool = False) -> Any:
    """Names of the stencils ``compile_program(outputs, arch, in_place=...)`` chains (read
    from the compiler's lowering step); with ``last``, the name of the last one that is not a
    store."""
    names = stencil_sequence(outputs, arch, in_place)
    if last:
        return [n for n in names if not n.startswith("store_")][-1]
    return set(names)


def stencil_sequence(outputs: Sequence[Node], arch: str = "x86_64",
                     in_place: bool = False) -> list[str]:
    """The stencils of the chains ``compile_program(outputs, arch, in_place=...)`` lowers, in
    order."""
    from copapy.compiler import compile_program, program

    chains: list[list[Any]] = []
    real = program.lower_with_loops

    class Lowered(Exception):
        pass

    def spy(*args: Any, **kwargs: Any) -> Any:
        chains.append(real(*args, **kwargs)[0])
        raise Lowered  # linking and the image are not needed

    program.lower_with_loops = spy  # type: ignore[assignment]
    try:
        compile_program(list(outputs), arch, in_place=in_place)
    except Lowered:
        pass
    finally:
        program.lower_with_loops = real  # type: ignore[assignment]
    return [instr.stencil for chain in chains for instr in chain]


def run_one_input(config: Config, x: Node, outs: Sequence[Node], data: Any,
                  stencil: str) -> list[tuple[bytes, Any]] | None:
    """Compile ``outs`` (of the one input ``x``) for ``config``, run them once with ``data``
    written into ``x`` and return (raw bytes, NumPy reference) per output."""
    compiled = compile_program(list(outs), config.arch)
    ports = compiled.ports
    batch = Batch(compiled.image, [[(ports[x].offset, data.tobytes())]],
                  [(ports[o].offset, o.nbytes) for o in outs])
    execute(config, [batch])
    want = evaluate_graph(list(outs), {x: data.reshape(x.shape)})
    return [(got, np.ascontiguousarray(w)) for got, w in zip(batch.results[0], want,
                                                               strict=True)]
