"""Compile the stencils for each target and pre-parse the objects into the tables copapy ships.

Usage:
    python tools/build_stencils.py                 # every src/copapy/targets/*.toml
    python tools/build_stencils.py x86_64 aarch64  # some
    python tools/build_stencils.py --check         # rebuild in a temp dir, compare with the
                                                   # committed tables
    python tools/build_stencils.py --convert       # rewrite the committed tables in the
                                                   # current file format, from their content
                                                   # (no compiler; the content stays the same)

Needs the build extra (``pip install -e '.[build]'``: ziglang's clang and pyelftools). Users never
run this: the tables in src/copapy/_tables are committed, and ``--check`` (run by the test suite)
proves they are reproducible from the sources.

A target with ``builder = "gcc"`` (TriCore: no clang backend) is compiled by the GCC cross
compiler its ``compiler`` key pins (``<driver>==<version>``), found as ``$COPAPY_<NAME>_GCC`` or
the driver on PATH (docs/tricore.md says where to get it). Without it, a run over all targets
skips that target with a printed reason; naming the target explicitly makes it an error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from copapy.arch.patchkind import PCREL, PatchKind, read_word  # noqa: E402
from copapy.arch.relocs import (  # noqa: E402
    ELF_MACHINES,
    IGNORED,
    TABLES,
    RelocSpec,
    branch,
    implicit_addend,
)
from copapy.arch.targets import by_name, targets  # noqa: E402
from copapy.compiler import tablefile  # noqa: E402

TABLE_FORMAT = tablefile.FORMAT
TABLE_DIR = ROOT / "src" / "copapy" / "_tables"
COMMON_FLAGS = [
    "-std=c11", "-O2", "-c", "-ffreestanding", "-fno-builtin", "-fno-pic", "-fno-pie",
    "-fno-stack-protector", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
    "-fno-math-errno", "-ffp-contract=off", "-fomit-frame-pointer", "-ffunction-sections",
    "-fdata-sections", "-fno-jump-tables", "-Wall", "-Wextra", "-Werror",
    "-Wno-unused-parameter",
]
# a slot symbol: cp_<role>_<type> (scalar), cp_v<role>_<type> (array), cp_p<role>_ptr (the
# pointer slot of a fused loop's array operand, stencils/fused.c); the role is what counts
SLOT_RE = re.compile(r"^cp_(?:v(?=(?:a|b|c|out)_)|p(?=(?:a|b|out)_ptr$))?"
                     r"(a|b|c|out|[nkj](?=_i32$))_(f32|f64|i32|ptr)$")
STENCIL_RE = re.compile(r"^([a-z0-9]+)_(f32|f64|i32)__")


class BuildError(RuntimeError):
    """A stencil cannot be turned into a table entry; the message names the stencil."""


class ZiglangMissing(SystemExit):
    """ziglang is not installed; the message names the install command (a SystemExit, so the
    scripts end with just that message)."""


class CompilerMissing(SystemExit):
    """A gcc-built target's pinned cross compiler is not found (or is another version); the
    message names the environment variable and the document that says where to get it."""


def clang_command() -> list[str]:
    """ziglang's clang with its own resource directory (the pinned compiler of the stencils)."""
    try:
        import ziglang  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ZiglangMissing("the stencil build needs ziglang: pip install -e '.[build]'") from exc
    resource = Path(ziglang.__file__).parent / "lib"
    return [sys.executable, "-m", "ziglang", "clang", f"-resource-dir={resource}"]


def gcc_env(target: dict[str, Any]) -> str:
    """The environment variable that names a gcc-built target's compiler driver."""
    return f"COPAPY_{str(target['name']).upper().replace('-', '_')}_GCC"


def gcc_command(target: dict[str, Any]) -> list[str]:
    """The pinned GCC cross compiler of a ``builder = "gcc"`` target (CompilerMissing if it is
    not there or reports another version)."""
    driver, version = str(target["compiler"]).split("==")
    where = f"set {gcc_env(target)} or put {driver} on PATH; docs/{target['name']}.md"
    path = os.environ.get(gcc_env(target)) or shutil.which(driver)
    if not path or not Path(path).is_file():
        raise CompilerMissing(f"{target['name']}: {driver} {version} not found ({where})")
    proc = subprocess.run([path, "-dumpversion"], capture_output=True, text=True)
    if proc.returncode or proc.stdout.strip() != version:
        raise CompilerMissing(f"{target['name']}: {path} is GCC {proc.stdout.strip() or '?'}, "
                              f"the table is built with {driver} {version} ({where})")
    return [path]


EXTRA = [Path(p) for p in os.environ.get("CP_STENCIL_EXTRA", "").split(os.pathsep) if p]


def sources() -> list[Path]:
    extra = [c for d in EXTRA for c in sorted(d.glob("*.c"))]
    return (
        sorted((ROOT / "stencils").glob("*.c"))
        + sorted((ROOT / "stencils" / "math").glob("*.c"))
        + extra
    )


def load_target(name: str) -> dict[str, Any]:
    """The build keys of src/copapy/targets/<name>.toml (its top level, hashed into the table)."""
    return dict(by_name(name).build)


def clang_targets() -> list[str]:
    """The targets whose stencils are C compiled by ziglang's clang, in the order of their ids
    (the dev tools that run clang on the stencils use these)."""
    return [t.name for t in targets() if t.builder == "clang"]


def c_targets() -> list[str]:
    """Every target whose stencils this script compiles (clang or its pinned GCC)."""
    return [t.name for t in targets() if t.builder in ("clang", "gcc")]


def target_flags(target: dict[str, Any]) -> list[str]:
    """The compiler flags of a stencil object for ``target`` (include directories aside)."""
    # fused element-wise loops (stencils/fused.c): the vector register width the toml declares
    width = target.get("fuse_vector_bytes")
    fuse = [] if width is None else [f"-DCP_FUSE_BYTES={width}"]
    # a block of two vector registers (cp_fused.h): the register width, half the block
    if target.get("fuse_register_bytes") is not None:
        fuse.append(f"-DCP_FUSE_REG_BYTES={target['fuse_register_bytes']}")
    if target.get("builder", "clang") == "gcc":
        return [*COMMON_FLAGS, *target["cflags"], *fuse]
    return [f"--target={target['triple']}", *COMMON_FLAGS, *target["cflags"], *fuse]


def compiler_command(target: dict[str, Any]) -> list[str]:
    """The compiler of ``target``'s stencils."""
    if target.get("builder", "clang") == "gcc":
        return gcc_command(target)
    return clang_command()


def compile_objects(target: dict[str, Any], workdir: Path) -> list[Path]:
    clang = compiler_command(target)
    flags = [*target_flags(target), *[f"-I{d}" for d in EXTRA],
             f"-I{ROOT / 'stencils' / 'include'}"]

    def one(src: Path) -> Path:
        obj = workdir / (src.parent.name + "_" + src.stem + ".o")
        if src.is_relative_to(ROOT):
            src = src.relative_to(ROOT)
        cmd = [*clang, *flags, str(src), "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode:
            raise BuildError(f"{target['name']}: compiling {src} failed:\n{proc.stderr}")
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return list(pool.map(one, sources()))


@dataclass
class Function:
    name: str
    code: bytes
    thumb: bool
    align: int
    relocs: list[list[Any]] = field(default_factory=list)  # [offset, kind, type, name, addend]
    strip: int = 0


@dataclass
class TableBuilder:
    target: dict[str, Any]
    kinds: list[PatchKind] = field(default_factory=list)
    kind_index: dict[PatchKind, int] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    rodata: dict[str, dict[str, Any]] = field(default_factory=dict)

    def kind_id(self, kind: PatchKind) -> int:
        if kind not in self.kind_index:
            self.kind_index[kind] = len(self.kinds)
            self.kinds.append(kind)
        return self.kind_index[kind]

    def rodata_blob(self, data: bytes, align: int) -> str:
        blob_id = hashlib.sha256(data + bytes([align])).hexdigest()[:16]
        self.rodata.setdefault(blob_id, {"data": data.hex(), "align": align})
        return blob_id

    def add_object(self, path: Path) -> None:
        from elftools.elf.elffile import ELFFile
        from elftools.elf.relocation import RelocationSection
        from elftools.elf.sections import SymbolTableSection

        table = TABLES[self.target["reloc_table"]]
        ignored = IGNORED.get(self.target["reloc_table"], frozenset())
        with open(path, "rb") as f:
            elf = ELFFile(f)
            self._check_header(path, elf)
            symtab = next(s for s in elf.iter_sections() if isinstance(s, SymbolTableSection))
            symbols = list(symtab.iter_symbols())
            sections = list(elf.iter_sections())
            # the function defined in each text section, by section index
            func_in_section: dict[int, Any] = {}
            for sym in symbols:
                if sym["st_info"]["type"] == "STT_FUNC" and isinstance(sym["st_shndx"], int):
                    func_in_section[sym["st_shndx"]] = sym
            # sections holding literal data inside code (ARM/AArch64 mapping symbols $d)
            has_data = {sym["st_shndx"] for sym in symbols
                        if sym.name.startswith("$d") and isinstance(sym["st_shndx"], int)}
            for sec in sections:
                if sec.name.startswith((".data", ".bss")) and sec.data_size:
                    raise BuildError(
                        f"{path.name}: writable section {sec.name}: "
                        "stencils must keep state in slots"
                    )
            relocs_of: dict[int, Any] = {}
            for sec in sections:
                if isinstance(sec, RelocationSection):
                    relocs_of[sec["sh_info"]] = sec
            for index, sym in func_in_section.items():
                sec = sections[index]
                name = sym.name.split("@")[0]
                code = bytes(sec.data())
                thumb = bool(sym["st_value"] & 1)
                if name in self.functions:
                    raise BuildError(f"function {name} defined twice ({path.name})")
                align = int(self.target["code_align"])
                if self.target.get("section_align", True) and index in has_data:
                    # a literal pool ($d mapping symbol) is loaded PC-relative: keep the
                    # section's alignment; plain code needs only instruction alignment
                    align = max(align, int(sec["sh_addralign"]))
                func = Function(name, code, thumb, align)
                rsec = relocs_of.get(index)
                if rsec is not None:
                    self._translate(func, rsec, symbols, sections, func_in_section, table, ignored)
                self.functions[name] = func

    def _check_header(self, path: Path, elf: Any) -> None:
        """The object is for the target's ELF machine and byte order (a wrong triple fails)."""
        want = ELF_MACHINES[self.target["elf_machine"]]
        little = self.target["endianness"] == "little"
        if elf["e_machine"] != want or elf.little_endian != little:
            raise BuildError(f"{path.name}: {elf['e_machine']} "
                             f"{'little' if elf.little_endian else 'big'}-endian object, "
                             f"{self.target['name']} needs {want} {self.target['endianness']}")

    def _translate(self, func: Function, rsec: Any, symbols: list[Any], sections: list[Any],
                   func_in_section: dict[int, Any], table: dict[int, RelocSpec],
                   ignored: frozenset[int]) -> None:
        is_rela = rsec.is_RELA()
        relocs = sorted(rsec.iter_relocations(), key=lambda r: r["r_offset"])
        by_offset = {r["r_offset"]: r for r in relocs}
        next_jumps: list[tuple[int, RelocSpec]] = []
        for rel in relocs:
            rtype = rel["r_info_type"]
            if rtype in ignored:
                continue
            spec = table.get(rtype)
            if spec is None:
                raise BuildError(f"{func.name}: relocation type {rtype} is not in the "
                                 f"{self.target['reloc_table']} table")
            offset = rel["r_offset"]
            sym = symbols[rel["r_info_sym"]]
            if spec.pcrel_lo:
                # the symbol labels the auipc; its %pcrel_hi relocation holds the real target
                hi = by_offset[sym["st_value"]]
                sym = symbols[hi["r_info_sym"]]
                addend = hi["r_addend"] + (offset - hi["r_offset"])
            elif is_rela:
                addend = rel["r_addend"]
            else:
                word = read_word(func.code, offset, spec.parts[0].kind)
                addend = implicit_addend(spec, word)
            target_type, target_name, addend = self._target(
                func, sym, addend, sections, func_in_section
            )
            if spec.literal:
                func.align = max(func.align, 4)
            for part in spec.parts:
                part_addend = addend + part.delta if part.kind.flags & PCREL else addend
                func.relocs.append([offset + part.delta, self.kind_id(part.kind), target_type,
                                    target_name, part_addend])
            if target_type == "next":
                self._check_next(func, spec, offset)
                next_jumps.append((offset, spec))
        if next_jumps:
            offset, spec = max(next_jumps, key=lambda j: j[0])
            if spec.jump is not None:
                start, length = spec.jump
                if (offset + start + length == len(func.code)
                        and branch(spec, func.code, offset) == "jump"):
                    func.strip = length

    def _check_next(self, func: Function, spec: RelocSpec, offset: int) -> None:
        """musttail must have produced jumps: a call to cp_next in a stencil would return
        into it."""
        if func.name != "cp_entry" and branch(spec, func.code, offset) == "call":
            raise BuildError(f"{func.name}: calls cp_next instead of jumping (musttail failed)")

    def _target(self, func: Function, sym: Any, addend: int, sections: list[Any],
                func_in_section: dict[int, Any]) -> tuple[str, str, int]:
        name = sym.name.split("@")[0]
        shndx = sym["st_shndx"]
        if shndx == "SHN_UNDEF":
            if name in ("cp_next", "cp_vnext"):  # cp_vnext: the same, in a fused loop
                return "next", "", addend
            if name in ("cp_vloop", "cp_floop"):  # a loop's backward branch (stencils/fused.c,
                return "loop", "", addend       # stencils/fori.c)
            m = SLOT_RE.match(name)
            if m:
                return "slot", m.group(1), addend
            return "func", name, addend
        sec = sections[shndx]
        base = sym["st_value"] if sym["st_info"]["type"] != "STT_SECTION" else 0
        if sec["sh_flags"] & 0x4:  # SHF_EXECINSTR: another function
            target = func_in_section.get(shndx)
            if target is None:
                raise BuildError(f"{func.name}: reference into {sec.name}, which holds no function")
            return "func", target.name.split("@")[0], addend + (base & ~1)
        if sec.name.startswith(".rodata") or sec["sh_type"] == "SHT_PROGBITS":
            blob = self.rodata_blob(bytes(sec.data()), max(1, sec["sh_addralign"]))
            return "rodata", blob, addend + base
        raise BuildError(f"{func.name}: unsupported reference to {name} in {sec.name}")

    def prune(self) -> None:
        """Drop float64 stencils on targets without FP64 and every helper nothing reaches."""
        if not self.target.get("float64", True):
            for name in [n for n in self.functions if STENCIL_RE.match(n)]:
                m = STENCIL_RE.match(name)
                assert m is not None
                if m.group(2) == "f64" or m.group(1) == "tof64":
                    del self.functions[name]
        roots = [n for n in self.functions if STENCIL_RE.match(n) or n in ("cp_entry", "cp_ret")]
        keep: set[str] = set()
        while roots:
            name = roots.pop()
            if name in keep or name not in self.functions:
                continue
            keep.add(name)
            roots.extend(r[3] for r in self.functions[name].relocs if r[2] == "func")
        self.functions = {n: f for n, f in self.functions.items() if n in keep}
        used = {r[3] for f in self.functions.values() for r in f.relocs if r[2] == "rodata"}
        self.rodata = {k: v for k, v in self.rodata.items() if k in used}

    def check_resolved(self) -> None:
        missing = sorted({(f.name, r[3]) for f in self.functions.values() for r in f.relocs
                          if r[2] == "func" and r[3] not in self.functions})
        if missing:
            lines = "\n".join(f"  {fn} -> {sym}" for fn, sym in missing)
            raise BuildError(f"{self.target['name']}: unresolved external symbols (no libc or "
                             f"compiler runtime may be called):\n{lines}")

    def check_whole(self) -> None:
        """A stencil is copied alone, so it must not reach another stencil (GCC's identical
        code folding turns a stencil whose body equals another's into a jump to it)."""
        folded = sorted((f.name, r[3]) for f in self.functions.values() for r in f.relocs
                        if r[2] == "func" and STENCIL_RE.match(r[3]))
        if folded:
            lines = "\n".join(f"  {fn} -> {sym}" for fn, sym in folded)
            raise BuildError(f"{self.target['name']}: stencils that jump to or call another "
                             f"stencil (build with -fno-ipa-icf):\n{lines}")

    def to_json(self, source_hash: str) -> dict[str, Any]:
        t = self.target
        return {
            "format": TABLE_FORMAT,
            "arch": t["name"],
            "arch_id": t["id"],
            "base_align": t["base_align"],
            "code_align": t["code_align"],
            "nop": t["nop"],
            "float64": t.get("float64", True),
            "source_hash": source_hash,
            "kinds": [k.to_json() for k in self.kinds],
            "functions": {
                n: {"code": f.code.hex(), "thumb": f.thumb, "align": f.align, "strip": f.strip,
                    "relocs": f.relocs}
                for n, f in sorted(self.functions.items())
            },
            "rodata": dict(sorted(self.rodata.items())),
        }


def source_hash(target: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for path in sources() + sorted((ROOT / "stencils" / "include").glob("*.h")):
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        h.update(rel.as_posix().encode() + b"\0" + path.read_bytes())
    h.update(json.dumps(target, sort_keys=True).encode())
    h.update(json.dumps(COMMON_FLAGS).encode())
    return h.hexdigest()


def build_table(name: str) -> bytes:
    target = load_target(name)
    builder = TableBuilder(target)
    with tempfile.TemporaryDirectory() as tmp:
        for obj in compile_objects(target, Path(tmp)):
            builder.add_object(obj)
    builder.prune()
    builder.check_resolved()
    builder.check_whole()
    return write_table(builder.to_json(source_hash(target)))


def write_table(content: dict[str, Any]) -> bytes:
    """The output step: a table's content as the bytes of its file (both the build and
    ``--convert`` write through here)."""
    return tablefile.encode(content)


def read_content(data: bytes) -> dict[str, Any]:
    """A committed table's content, from the current file format or from format 1 (one
    zlib-compressed JSON document: the tables before format 2, e.g. in the history)."""
    if data.startswith(tablefile.MAGIC):
        return tablefile.decode(data)
    content: dict[str, Any] = json.loads(zlib.decompress(data))
    if content.get("format") != 1:
        raise BuildError(f"unknown stencil table format {content.get('format')}")
    content["format"] = TABLE_FORMAT
    return content


def convert(names: list[str]) -> None:
    """Rewrite committed tables in the current format; their content (code, relocations,
    rodata, source hash) is checked to be unchanged."""
    for name in names:
        path = TABLE_DIR / f"{name}.cpst"
        old = path.read_bytes()
        content = read_content(old)
        data = write_table(content)
        if tablefile.decode(data) != content:
            raise BuildError(f"{name}: converted table does not hold the same content")
        path.write_bytes(data)
        print(f"{name}: {len(old)} -> {len(data)} bytes ({path.relative_to(ROOT)})")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("targets", nargs="*")
    parser.add_argument("--check", action="store_true", help="compare with the committed tables")
    parser.add_argument("--convert", action="store_true",
                        help="rewrite the committed tables in the current format (no compiler)")
    args = parser.parse_args()
    names = [n for n in args.targets or c_targets() if by_name(n).builder in ("clang", "gcc")]
    if args.convert:
        convert(names)
        return 0
    failed = False
    for name in names:
        try:
            data = build_table(name)
        except CompilerMissing as exc:
            if args.targets:
                raise
            print(f"{name}: skipped: {exc}")
            continue
        path = TABLE_DIR / f"{name}.cpst"
        if args.check:
            same = path.exists() and path.read_bytes() == data
            print(f"{name}: {'reproducible' if same else 'DIFFERS from ' + str(path)}")
            failed |= not same
        else:
            path.write_bytes(data)
            table = tablefile.decode(data)
            print(f"{name}: {len(table['functions'])} functions, "
                  f"{len(table['kinds'])} patch kinds, "
                  f"{len(data)} bytes -> {path.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
