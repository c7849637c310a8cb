"""Copy-and-patch compiler: graph outputs -> program image."""

from __future__ import annotations

from .lower import CompileError
from .program import CompiledProgram, IoSpec, TaskSpec, compile_program, compile_tasks

__all__ = ["CompileError", "CompiledProgram", "IoSpec", "TaskSpec", "compile_program",
           "compile_tasks"]
