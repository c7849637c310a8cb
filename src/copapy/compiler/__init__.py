"""Copy-and-patch compiler: graph outputs -> program image."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..graph.node import Node
from ..image import ARCH_IDS, Image, ImagePatch, ImagePort, ImageTask, kinds_table
from .layout import Port
from .link import link
from .lower import CompileError, lower
from .table import load_table

__all__ = ["CompileError", "CompiledProgram", "compile_program"]

COMPILER_VERSION = "copapy-0.1"


@dataclass
class CompiledProgram:
    arch: str
    image: bytes
    ports: dict[Node, Port]
    op_count: int
    stencil_count: int
    code_bytes: int
    stencil_bytes: int
    data_bytes: int
    runtime_patches: int


def compile_program(outputs: Sequence[Node], arch: str) -> CompiledProgram:
    """Compile one task computing ``outputs`` for ``arch`` into a program image."""
    table = load_table(arch)
    lowered = lower(outputs, table)
    linked = link([lowered.instrs], table)
    kinds, index = kinds_table([p.kind for p in linked.patches])
    ports = [ImagePort(p.name, p.offset, p.dtype.code, p.role, p.task, p.count)
             for p in lowered.ports.values()]
    data_size = max(lowered.layout.size, 4)
    image = Image(
        arch=ARCH_IDS[arch],
        code=linked.code,
        data_offset=linked.data_offset,
        data_size=-(-data_size // 8) * 8,
        base_align=table.base_align,
        data_init=lowered.layout.init_bytes(),
        kinds=kinds,
        patches=[ImagePatch(p.site, index[p.kind], p.addend) for p in linked.patches],
        tasks=[ImageTask(entry) for entry in linked.entries],
        ports=ports,
        metadata={"compiler": COMPILER_VERSION, "ops": lowered.op_count,
                  "stencils": len(lowered.instrs), "stencil_table": table.source_hash[:16]},
    )
    return CompiledProgram(arch, image.to_bytes(), lowered.ports, lowered.op_count,
                           len(lowered.instrs), len(linked.code), linked.stencil_bytes,
                           image.data_size, len(linked.patches))
