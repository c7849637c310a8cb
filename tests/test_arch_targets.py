"""src/copapy/targets/*.toml is the one declaration of every architecture: copapy.arch.targets
reads it, and the copies that cannot read toml (the C ids of the runner, the id table of
docs/image.md) are checked against it here."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import unicorn

from copapy import _runner
from copapy._contract import LoadError
from copapy.arch import targets as targets_module
from copapy.arch.cpu import MASK_ENV
from copapy.arch.relocs import ELF_MACHINES, TABLES
from copapy.arch.targets import (
    TargetFileError,
    UnknownArchitectureError,
    arch_names,
    by_id,
    by_name,
    host_arch,
    id_name,
    parse_target,
    targets,
)
from copapy.compiler.table import load_table
from copapy.runtime.errors import LOAD_ERROR_NAMES, CpuFeatureError
from copapy.runtime.unicorn_backend import Registers, new_emulator

ROOT = Path(__file__).resolve().parent.parent
NAMES = arch_names()


def c_name(name: str) -> str:
    """cortex-m4 -> CP_ARCH_CORTEX_M4"""
    return "CP_ARCH_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def raw(name: str) -> dict[str, object]:
    text = (ROOT / "src" / "copapy" / "targets" / f"{name}.toml").read_text()
    return tomllib.loads(text)


# ---------------------------------------------------------------- the module


def test_every_architecture_is_declared_once_in_id_order() -> None:
    bases = [t for t in targets() if not t.variant_of]
    ids = [t.id for t in bases]
    assert ids == sorted(set(ids)) and len(set(NAMES)) == len(NAMES)
    assert [by_name(n).name for n in NAMES] == NAMES
    assert [by_id(i).name for i in ids] == [t.name for t in bases]
    assert [t.id for t in targets()] == sorted(t.id for t in targets())


def test_a_variant_shares_its_base_id_and_runs_natively() -> None:
    """x86_64-v3: the images of x86_64 (its id), another table; by_id names the base."""
    variants = [t for t in targets() if t.variant_of]
    assert [t.name for t in variants] == ["x86_64-v3", "x86_64-v4"]
    for t in variants:
        base = by_name(t.variant_of)
        assert t.id == base.id and by_id(t.id) is base and not base.variant_of
        assert t.emulator == "native" and t.cpu_features
        assert t.build["cflags"][: len(base.build["cflags"])] == base.build["cflags"]


def test_variant_declarations_are_checked() -> None:
    top = dict(by_name("x86_64-v3").build)
    with pytest.raises(TargetFileError, match="variants"):
        parse_target("t", {**top, "variant_of": ""} | {"simd": {"disassembly": "x86"}})
    base = dict(by_name("x86_64").build)
    with pytest.raises(TargetFileError, match="variants"):
        parse_target("t", {**base, "emulator": "native:x", "unicorn": {
            "arch": "X86", "mode": "64", "sp": "RSP", "pc": "RIP"}})


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownArchitectureError) as info:
        by_name("arm64")
    message = str(info.value)
    assert "'arm64'" in message
    for name in NAMES:
        assert name in message
    assert isinstance(info.value, ValueError)


def test_unknown_id_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownArchitectureError, match="unknown architecture id 99") as info:
        by_id(99)
    assert all(f"{t.id} {t.name}" in str(info.value) for t in targets())
    assert id_name(99) == "unknown(99)" and id_name(targets()[0].id) == NAMES[0]


def test_host_arch_is_the_native_runners() -> None:
    assert host_arch() == by_id(_runner.ARCH).name


def test_the_emulator_of_every_architecture_is_set_up() -> None:
    for t in targets():
        assert t.test_emulators[0] == t.emulator
        if t.emulator == "native":  # a variant: the host's runner on a CPU with its features
            assert t.variant_of and t.test_emulators == ("native",), t.name
            continue
        assert {"unicorn": t.unicorn, "qemu": t.qemu}[t.emulator] is not None, t.name
        for extra in t.test_emulators[1:]:
            assert {"unicorn": t.unicorn, "qemu": t.qemu}[extra] is not None, t.name


def test_emulator_summary_matches_its_set_up() -> None:
    """The text after the colon of ``emulator`` is a summary for people; it names the set-up."""
    for t in targets():
        summary = str(t.build["emulator"]).partition(":")[2]
        if t.emulator == "qemu":
            assert t.qemu is not None and summary == t.qemu.machine, t.name
        elif t.emulator == "native":
            assert t.variant_of in summary, t.name
        else:
            assert t.unicorn is not None
            words = f"{t.unicorn.arch} {t.unicorn.mode} {t.unicorn.cpu}".lower()
            for token in summary.split(":"):
                assert token in words, (t.name, token, words)


@pytest.mark.parametrize("name", [t.name for t in targets() if t.unicorn is not None])
def test_unicorn_set_up_of_every_architecture(name: str) -> None:
    target = by_name(name)
    assert target.unicorn is not None
    emu = new_emulator(target)
    regs = Registers(unicorn, target.unicorn)
    for write in target.unicorn.fpu:
        assert emu.reg_read(regs[write.reg]) & write.value == write.value, write
    for reg in (target.unicorn.sp, target.unicorn.pc):
        assert isinstance(regs[reg], int)  # the name resolves to a unicorn register


def test_build_keys_match_the_tables_and_relocation_tables() -> None:
    for t in targets():
        table = load_table(t.name)
        assert (table.arch, table.arch_id, table.float64) == (t.name, t.id, t.float64)
        assert (table.base_align, table.code_align) == (t.build["base_align"],
                                                        t.build["code_align"])
        assert t.reloc_table in TABLES and t.build["elf_machine"] in ELF_MACHINES


def test_a_key_nothing_reads_is_rejected() -> None:
    good = raw("rv32")
    parse_target("rv32", good)
    with pytest.raises(TargetFileError, match="unknown key 'vendor'"):
        parse_target("rv32", {**good, "vendor": "x"})
    unicorn = dict(good["unicorn"])  # type: ignore[call-overload]
    with pytest.raises(TargetFileError, match="unknown key 'model'"):
        parse_target("rv32", {**good, "unicorn": {**unicorn, "model": "x"}})
    with pytest.raises(TargetFileError, match="missing key 'id'"):
        parse_target("rv32", {k: v for k, v in good.items() if k != "id"})
    with pytest.raises(TargetFileError, match="no matching"):
        parse_target("rv32", {**good, "emulator": "qemu-system-riscv32:virt"})


def test_a_builder_needs_its_compiler_keys() -> None:
    good = raw("tricore")
    assert parse_target("tricore", good).builder == "gcc"
    with pytest.raises(TargetFileError, match="gcc-built target needs compiler"):
        parse_target("tricore", {k: v for k, v in good.items() if k != "compiler"})
    with pytest.raises(TargetFileError, match="builder 'tricore-asm' is neither"):
        parse_target("tricore", {**good, "builder": "tricore-asm"})
    assert parse_target("tricore", good).flushes_subnormals
    assert not parse_target("rv32", raw("rv32")).flushes_subnormals


def test_hashed_build_keys_exclude_the_run_set_up() -> None:
    """tools/build_stencils.py hashes Target.build: the top level, none of the tables."""
    for t in targets():
        assert not any(isinstance(v, dict) for v in t.build.values())
        assert set(raw(t.name)) - set(t.build) <= {"unicorn", "qemu", "tests", "linux", "simd",
                                                   "image_features"}


# ---------------------------------------------------------------- copies that cannot read toml
# The C side may lag behind (an architecture that only runs on unicorn needs no C at all, and
# the runner then calls its id "unknown"), but whatever it names must be what the tomls say.


def test_runner_header_ids_match_the_tomls() -> None:
    text = (ROOT / "runner" / "include" / "copapy" / "runner.h").read_text()
    enum = {k: int(v) for k, v in re.findall(r"\b(CP_ARCH_[A-Z0-9_]+)\s*=\s*(\d+)", text)}
    want = {c_name(t.name): t.id for t in targets()}
    assert enum, "no CP_ARCH_* constants found in runner.h"
    wrong = {k: v for k, v in enum.items() if want.get(k) != v}
    assert not wrong, (f"runner.h: {wrong} differ from src/copapy/targets/*.toml, which say "
                       f"{ {k: want.get(k) for k in wrong} }")


def test_runner_name_table_matches_the_tomls() -> None:
    """cp_arch_name's table is indexed by id: entry k must be the name of id k."""
    text = (ROOT / "runner" / "src" / "message.c").read_text()
    body = re.search(r"cp_arch_name\(uint32_t arch\)\s*\{.*?\{(.*?)\};", text, re.S)
    assert body is not None, "cp_arch_name's name table not found in message.c"
    names = re.findall(r'"([^"]*)"', body.group(1))
    assert names[0] == "unknown"
    assert names[1:] == [id_name(i) for i in range(1, len(names))], names


def test_load_error_names_agree_everywhere() -> None:
    """The runner core's load errors (cp_status): contract.h's table (which runner.h's enum
    and cp_status_name expand, tests/test_contract.py checks the C side against the generated
    module), Python's names (LOAD_ERROR_NAMES, what the emulated and serial loaders report)
    and the table of docs/image.md are one list."""
    enum = {int(e): e.name for e in LoadError}
    assert enum == LOAD_ERROR_NAMES and len(enum) >= 12
    spec = (ROOT / "docs" / "image.md").read_text().split("## Load errors", 1)[1]
    rows = dict(re.findall(r"^\|\s*(\d+)\s*\|\s*([A-Z_]+)\s*\|", spec.split("\n## ")[0],
                           re.M))
    documented = {int(k): v for k, v in rows.items()} | {10: "ARGUMENT"}  # 10: prose
    assert documented == enum


def test_image_spec_id_table_matches_the_tomls() -> None:
    text = (ROOT / "docs" / "image.md").read_text()
    section = text.split("## Architecture ids", 1)[1].split("\n## ", 1)[0]
    pairs = re.findall(r"\|\s*(\d+)\s*\|\s*([a-z0-9_-]+)\s*\|", section)
    assert {int(i): n for i, n in pairs} == {t.id: t.name for t in targets() if not t.variant_of}


def test_firmware_builds_name_ids_symbolically() -> None:
    """The bare-metal Makefile passes CP_ARCH_* constants of runner.h, never a number, and
    builds the harness every [qemu] table names."""
    header = (ROOT / "runner" / "include" / "copapy" / "runner.h").read_text()
    text = (ROOT / "runner" / "baremetal" / "Makefile").read_text()
    values = re.findall(r"-DCP_(?:HARNESS|RUNNER)_ARCH=(\S+)", text)
    assert values and all(re.search(rf"\b{v}\s*=", header) for v in values), values
    for t in targets():
        if t.qemu is not None:
            assert t.qemu.harness in text, f"the Makefile builds no {t.qemu.harness}"
            assert c_name(t.name) in values, f"no harness built with {c_name(t.name)}"


def test_cpu_flags_are_read_from_cpuinfo() -> None:
    from copapy.arch.cpu import parse_flags

    text = "processor\t: 0\nvendor_id\t: X\nflags\t\t: fpu sse2 avx2 fma\n\nprocessor\t: 1\n"
    assert parse_flags(text) == {"fpu", "sse2", "avx2", "fma"}
    assert parse_flags("Features\t: fp asimd\n") == {"fp", "asimd"}
    assert parse_flags("") == frozenset()
    # lines (the file object host_flags passes): the first processor's, nothing read after
    lines = iter(text.splitlines(keepends=True))
    assert parse_flags(lines) == {"fpu", "sse2", "avx2", "fma"}
    assert next(lines) == "\n"


def test_host_variant_follows_the_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    import copapy.arch.targets as at
    from copapy.runtime import load

    v3 = by_name("x86_64-v3")
    monkeypatch.delenv(MASK_ENV, raising=False)  # the flags below are the whole CPU
    monkeypatch.setattr(at, "host_flags", lambda: frozenset(v3.cpu_features))
    assert at.best_host_arch() == "x86_64-v3" and load.fastest_host_architecture() == "x86_64-v3"
    assert load.host_architecture() == "x86_64"  # images that may be saved stay portable
    assert load.is_native("x86_64-v3") and load.is_native("x86_64")
    monkeypatch.setattr(at, "host_flags", lambda: frozenset(v3.cpu_features[:-1]))
    assert at.best_host_arch() == "x86_64" and not load.is_native("x86_64-v3")
    with pytest.raises(CpuFeatureError, match=r"x86_64-v3 code.*lacks xsave") as info:
        load.load(b"", "x86_64-v3")
    assert info.value.missing == ("xsave",)


# ---------------------------------------------------------------- the parsed cache


def test_the_shipped_parse_cache_is_current() -> None:
    """_tables/targets.json holds exactly what tomllib reads from every declaration."""
    tool = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_target_cache.py"),
                           "--check"], capture_output=True, text=True)
    assert tool.returncode == 0, tool.stdout + tool.stderr
    for name in NAMES:
        assert targets_module.parse_file(f"{name}.toml") == raw(name)


def test_an_edited_declaration_is_parsed_not_read_from_the_cache(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache entry whose length/crc32 key differs from the file's bytes is ignored."""
    stale = {"x86_64.toml": {"key": [1, 2], "toml": {"name": "stale"}}}
    monkeypatch.setattr(targets_module, "_cache", lambda: stale)
    assert targets_module.parse_file("x86_64.toml") == raw("x86_64")
    current = targets_module.file_key((ROOT / "src" / "copapy" / "targets" / "x86_64.toml")
                                      .read_bytes())
    monkeypatch.setattr(targets_module, "_cache",
                        lambda: {"x86_64.toml": {"key": current, "toml": {"name": "cached"}}})
    assert targets_module.parse_file("x86_64.toml") == {"name": "cached"}


def test_a_fused_block_is_one_or_two_registers() -> None:
    good = raw("x86_64-v3")
    assert parse_target("x86_64-v3", good).build["fuse_register_bytes"] * 2 == \
        good["fuse_vector_bytes"]
    for bad in (48, 64, 8):
        with pytest.raises(TargetFileError, match="must be half of fuse_vector_bytes"):
            parse_target("x86_64-v3", {**good, "fuse_register_bytes": bad})
    one = {k: v for k, v in good.items() if k != "fuse_register_bytes"}
    assert "fuse_register_bytes" not in parse_target("x86_64-v3", one).build
