"""The linker's resolution of pending patches (addresses and x86 rel32 words in C,
compiler/_link.c): values, and the errors for a word out of range or a reference nothing
resolved."""

from __future__ import annotations

import struct

import pytest

from copapy.compiler import CompileError
from copapy.compiler.link import _REL32, _Linker
from copapy.compiler.table import load_table


def linker_with(pending: list[list[object]], size: int = 64) -> _Linker:
    linker = _Linker(load_table("x86_64"))
    linker.code += bytes(size)
    linker.pending.extend(pending)
    return linker


def test_rel32_words_are_written_relative_to_their_site() -> None:
    linker = linker_with([[4, _REL32, "data", "", 8], [12, _REL32, "code", "", 0],
                          [20, _REL32, "func", "f", -4], [28, _REL32, "rodata", "r", 2]])
    linker.func_offsets["f"] = 40
    linker.rodata_offsets["r"] = 48
    assert linker.resolve(1000) == []
    words = [struct.unpack_from("<i", linker.code, site)[0] for site in (4, 12, 20, 28)]
    assert words == [1000 + 8 - 4, 0 - 12, 40 - 4 - 20, 48 + 2 - 28]


def test_a_rel32_word_out_of_range_is_a_compile_error() -> None:
    linker = linker_with([[0, _REL32, "data", "", 0x8000_0000]])
    with pytest.raises(CompileError, match="program too large for x86_64: value 0x80000000"):
        linker.resolve(0)
    linker = linker_with([[8, _REL32, "code", "", -0x8000_0000]])
    with pytest.raises(CompileError, match="value -0x80000008 does not fit in 32 bits"):
        linker.resolve(0)


def test_an_unresolved_reference_is_a_compile_error() -> None:
    linker = linker_with([[0, _REL32, "next", "", 0]])
    with pytest.raises(CompileError, match="unresolved reference to next ''"):
        linker.resolve(0)
