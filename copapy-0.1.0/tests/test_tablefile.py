"""Stencil table files (format 2): exact round trip, on-demand reading, damage detected."""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from copapy.compiler import tablefile
from copapy.compiler.table import StencilTable, load_table
from copapy.compiler.tablefile import TableFormatError, decode, encode

ROOT = Path(__file__).resolve().parent.parent
TABLES = sorted((ROOT / "src" / "copapy" / "_tables").glob("*.cpst"))
sys.path.insert(0, str(ROOT / "tools"))

import build_stencils  # noqa: E402


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_committed_table_round_trips_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    content = decode(data)
    assert encode(content) == data
    assert build_stencils.write_table(content) == data


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_functions_read_on_demand_are_the_content(path: Path) -> None:
    data = path.read_bytes()
    content = decode(data)
    table = StencilTable(data)
    assert table.names() == sorted(content["functions"])
    assert table.rodata == {k: (bytes.fromhex(v["data"]), v["align"])
                            for k, v in content["rodata"].items()}
    for name in reversed(table.names()):  # chunks out of order
        raw = content["functions"][name]
        f = table.function(name)
        assert (f.code.hex(), f.thumb, f.align, f.strip) == (raw["code"], raw["thumb"],
                                                             raw["align"], raw["strip"])
        assert [[r.offset, table.kinds.index(r.kind), r.target_type, r.target, r.addend]
                for r in f.relocs] == raw["relocs"]
    assert table.source_hash == content["source_hash"]


def test_load_table_uses_the_shipped_file() -> None:
    table = load_table("x86_64")
    assert "cp_entry" in table and "no_such_stencil" not in table
    with pytest.raises(KeyError, match="no stencil 'no_such_stencil' for x86_64"):
        table.function("no_such_stencil")


relocs = st.lists(st.tuples(st.integers(0, 2**16), st.integers(0, 3),
                            st.sampled_from(["next", "slot", "func", "rodata", "loop"]),
                            st.text(max_size=12), st.integers(-2**31, 2**31 - 1))
                  .map(list), max_size=4)
functions = st.dictionaries(
    st.text(st.characters(blacklist_characters="\n", blacklist_categories=["Cs"]), min_size=1,
            max_size=20),
    st.fixed_dictionaries({"code": st.binary(max_size=3000).map(bytes.hex),
                           "thumb": st.booleans(), "align": st.sampled_from([1, 2, 4, 16]),
                           "strip": st.integers(0, 5), "relocs": relocs}),
    max_size=40)


@settings(max_examples=60, deadline=None)
@given(functions, st.dictionaries(st.text(max_size=8), st.fixed_dictionaries(
    {"align": st.sampled_from([1, 8]), "data": st.binary(max_size=64).map(bytes.hex)}),
    max_size=4))
def test_any_content_round_trips(functions: dict[str, Any], rodata: dict[str, Any]) -> None:
    content = {"format": 2, "arch": "x", "arch_id": 7, "base_align": 4096, "code_align": 1,
               "nop": "90", "float64": True, "source_hash": "ab" * 32,
               "kinds": [[32, 5, 0, 32, 0, [[0, 32, 0]], ""]], "functions": functions,
               "rodata": rodata}
    data = encode(content)
    back = decode(data)
    assert back == {**content, "functions": dict(sorted(functions.items())),
                    "rodata": dict(sorted(rodata.items()))}
    assert encode(back) == data


def _x86_64() -> bytes:
    return (ROOT / "src" / "copapy" / "_tables" / "x86_64.cpst").read_bytes()


def test_format_1_file_is_refused_by_the_loader_and_converted_by_the_builder() -> None:
    content = decode(_x86_64())
    old = zlib.compress(json.dumps({**content, "format": 1}, sort_keys=True).encode(), 9)
    with pytest.raises(TableFormatError, match="not a stencil table file"):
        StencilTable(old)
    assert build_stencils.write_table(build_stencils.read_content(old)) == _x86_64()


def test_other_format_number_is_refused() -> None:
    data = bytearray(_x86_64())
    data[4:8] = (3).to_bytes(4, "little")
    with pytest.raises(TableFormatError, match="format 3 is not 2; rebuild"):
        StencilTable(bytes(data))
    with pytest.raises(TableFormatError, match="content of format 1"):
        encode({"format": 1})


@pytest.mark.parametrize("cut", [0, 10, 100, -1])
def test_truncated_file_is_refused(cut: int) -> None:
    with pytest.raises(TableFormatError):
        StencilTable(_x86_64()[:cut])


def test_damaged_chunk_is_refused_when_read() -> None:
    data = bytearray(_x86_64())
    f = tablefile.TableFile(bytes(data))
    data[f._starts[1] + 10] ^= 0xFF  # inside the second code chunk
    table = StencilTable(bytes(data))
    first = table.names()[0]
    assert table.function(first).code  # chunk 0 is intact
    in_chunk_1 = next(n for i, n in enumerate(table.names()) if f._index[4 * i] == 1)
    with pytest.raises(TableFormatError, match="damaged"):
        table.function(in_chunk_1)
