"""compiler/names.py is the grammar every stencil of every table follows: a name the lowering
builds there is a name the stencil build made."""

from __future__ import annotations

import pytest

from copapy.compiler import names
from copapy.compiler.table import available_architectures, load_table


@pytest.mark.parametrize("arch", available_architectures())
def test_every_stencil_name_is_built_by_the_grammar(arch: str) -> None:
    table = load_table(arch)
    stencils = [n for n in table.names() if "__" in n]
    assert len(stencils) > 100
    for name in stencils:
        head, _, tail = name.partition("__")
        family, _, dtype = head.rpartition("_")
        dst, *forms = tail.split("_")
        assert names.stencil(family, dtype, dst, *forms) == name


def test_the_grammar_names_the_loop_and_register_forms() -> None:
    assert names.stencil("add", "f32", 0, "1", "m") == "add_f32__0_1_m"
    assert names.stencil(names.FUSED + "mul", "f64", "p", "p", "p") == "vrmul_f64__p_p_p"
    assert names.stencil(names.LOOP, "i32", "begin") == "vloop_i32__begin"
    assert names.stencil("store", "i32", "m", "m") in load_table("x86_64")
