"""Errors of the scalar lowering loop (compiler/_lower.c calls back into the _Lowerer): a
stencil the table lacks, in either register form, is a CompileError naming it, and a
failing step leaves no half-built program behind."""

from __future__ import annotations

import pytest

import copapy as cp
from copapy.compiler import CompileError, compile_program
from copapy.compiler import program as program_module
from copapy.compiler.table import load_table

from .support.tables import Without


@pytest.mark.parametrize("prefix", ["mul_f32__", "mul_f32__1_", "store_f32__m_1", "sub_f32__0_m"])
def test_a_missing_stencil_is_a_compile_error(prefix: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = cp.value(1.5), cp.value(2.0)
    # both registers busy and values live across the product: forms 0/1/m and a spill
    a = x * y
    b = a - y * 3.0
    c = (b * a) * (a - x) - (b * 0.5 - a * x)
    out = [c.node, (a * b).node]
    monkeypatch.setattr(program_module, "load_table",
                        lambda arch: Without(load_table(arch), prefix))  # type: ignore[arg-type]
    with pytest.raises(CompileError, match=f"no stencil {prefix}.* for architecture x86_64"):
        compile_program(out, "x86_64")


def test_the_same_graph_compiles_with_the_full_table() -> None:
    x, y = cp.value(1.5), cp.value(2.0)
    a = x * y
    assert compile_program([(a - y * 3.0).node], "x86_64").op_count == 3
