"""Assemble the hand-written TriCore stencils into src/copapy/_tables/tricore.cpst.

Usage:
    python tools/build_tricore_stencils.py           # rebuild the table
    python tools/build_tricore_stencils.py --check   # rebuild, compare with the committed table

No TriCore C compiler can be installed (docs/tricore.md), so the TriCore stencils are assembly:
``stencils/tricore/*.S`` go through the C preprocessor of the pinned ziglang clang
(``clang -E -P -x assembler-with-cpp``), are split into functions (a function starts at its
``.globl`` statement) and every function is assembled on its own by GNU as for TriCore, in
process, through PyPI ``nyxstone-tricore-gcc``. Its relocations become generic patch kinds
through the ``tricore`` table of copapy.arch.relocs, exactly as tools/build_stencils.py does for
ELF objects, and the table has the same format.

Needs (only to rebuild; users get the committed table):
    apt-get install libzstd-dev                       # nyxstone links libzstd when it builds
    pip install 'nyxstone-tricore-gcc==0.2.1' ziglang==0.17.1

nyxstone-tricore-gcc 0.2.1 links prebuilt binutils objects compiled against glibc >= 2.38; on
an older glibc (Debian 12 has 2.36) importing it fails with ``undefined symbol:
__isoc23_strtoul``. This script then compiles a three-function shim (``__isoc23_strtol``,
``__isoc23_strtoul``, ``__isoc23_sscanf`` mapped to the classic functions) with the host C
compiler (``cc``; the same compiler pip needed to build nyxstone) and loads it first.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tools"))

from build_stencils import (  # noqa: E402
    SLOT_RE,
    BuildError,
    Function,
    TableBuilder,
    clang_command,
)

from copapy.arch.patchkind import PCREL  # noqa: E402
from copapy.arch.relocs import TABLES, RelocSpec, branch  # noqa: E402
from copapy.arch.targets import by_name  # noqa: E402

NAME = "tricore"
#: the pinned assembler, as src/copapy/targets/tricore.toml names it (its `assembler` key)
ASSEMBLER, ASSEMBLER_VERSION = str(by_name(NAME).build["assembler"]).split("==")
SOURCES = ROOT / "stencils" / "tricore"
TABLE = ROOT / "src" / "copapy" / "_tables" / "tricore.cpst"
CPP_FLAGS = ["-E", "-P", "-x", "assembler-with-cpp", "-undef", "-nostdinc"]
INSTALL = (
    f"the TriCore stencil build needs the {ASSEMBLER} assembler: "
    f"apt-get install libzstd-dev && pip install '{ASSEMBLER}=={ASSEMBLER_VERSION}' "
    "ziglang==0.17.1 (see docs/tricore.md)"
)

SHIM_C = r"""
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
long __isoc23_strtol(const char *s, char **end, int base) { return strtol(s, end, base); }
unsigned long __isoc23_strtoul(const char *s, char **end, int base)
{
    return strtoul(s, end, base);
}
int __isoc23_sscanf(const char *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsscanf(s, fmt, ap);
    va_end(ap);
    return n;
}
"""


class AssemblerMissing(RuntimeError):
    """nyxstone-tricore-gcc cannot be imported; the message says how to install it."""


def _load_glibc_shim() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "shim.c", Path(tmp) / "libcp_isoc23_shim.so"
        src.write_text(SHIM_C)
        proc = subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise AssemblerMissing(f"{INSTALL}\ncompiling the glibc shim failed:\n{proc.stderr}")
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)  # stays mapped after the file is gone


def assembler() -> Any:
    """A NyxstoneTricoreGCC instance (loading the glibc < 2.38 shim when needed)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        installed = version(ASSEMBLER)
    except PackageNotFoundError:
        raise AssemblerMissing(INSTALL) from None
    if installed != ASSEMBLER_VERSION:
        raise AssemblerMissing(f"{ASSEMBLER} {installed} is installed, the table is built with "
                               f"{ASSEMBLER_VERSION}: {INSTALL}")
    try:
        import nyxstone_tricore_gcc as nyx
    except ImportError as exc:
        if "__isoc23_" not in str(exc):
            raise AssemblerMissing(f"{INSTALL}\nimport failed: {exc}") from exc
        _load_glibc_shim()
        import nyxstone_tricore_gcc as nyx
    return nyx.NyxstoneTricoreGCC()


def load_target() -> dict[str, Any]:
    """The build keys of the TriCore target (its top level, hashed into the table)."""
    return dict(by_name(NAME).build)


def sources() -> list[Path]:
    return sorted(SOURCES.glob("*.S"))


def source_hash(target: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for path in sources() + sorted(SOURCES.glob("*.h")):
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    h.update(json.dumps(target, sort_keys=True).encode())
    h.update(json.dumps([CPP_FLAGS, ASSEMBLER, ASSEMBLER_VERSION]).encode())
    return h.hexdigest()


def preprocess(path: Path) -> str:
    cmd = [*clang_command(), *CPP_FLAGS, f"-I{SOURCES}", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise BuildError(f"preprocessing {path.relative_to(ROOT)} failed:\n{proc.stderr}")
    return proc.stdout


_GLOBL = re.compile(r"^\.globl\s+([A-Za-z_][A-Za-z0-9_]*)$")


def split_functions(text: str, origin: str) -> list[tuple[str, str]]:
    """(name, source) of every function: statements from one `.globl` to the next."""
    functions: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        for stmt in line.split(";"):
            stmt = stmt.strip()
            if not stmt:
                continue
            m = _GLOBL.match(stmt)
            if m:
                functions.append((m.group(1), []))
            elif not functions:
                raise BuildError(f"{origin}: statement before the first .globl: {stmt!r}")
            else:
                functions[-1][1].append(stmt)
    return [(name, "\n".join(body) + "\n") for name, body in functions]


class TricoreTableBuilder(TableBuilder):
    """TableBuilder fed by the in-process assembler instead of ELF objects."""

    def add_function(self, nx: Any, name: str, source: str, origin: str) -> None:
        if name in self.functions:
            raise BuildError(f"function {name} defined twice ({origin})")
        try:
            code, relocs = nx.assemble_with_relocs(source, address=0)
        except Exception as exc:
            raise BuildError(f"{origin}: assembling {name} failed: {exc}\n{source}") from exc
        func = Function(name, bytes(code), False, int(self.target["code_align"]))
        table: dict[int, RelocSpec] = TABLES[self.target["reloc_table"]]
        next_jumps: list[tuple[int, RelocSpec]] = []
        for rel in sorted(relocs, key=lambda r: r.offset):
            spec = table.get(rel.relocation_type)
            if spec is None:
                raise BuildError(f"{name}: relocation type {rel.relocation_type} is not in the "
                                 f"{self.target['reloc_table']} table")
            sym = rel.symbol.name
            addend = rel.addend or 0
            if sym == "cp_next":
                target_type, target = "next", ""
                if branch(spec, bytes(code), rel.offset) != "jump":
                    raise BuildError(f"{name}: refers to cp_next other than by `j` "
                                     f"(opcode {code[rel.offset]:#04x}); a call would return "
                                     f"into the stencil")
                next_jumps.append((rel.offset, spec))
            elif (m := SLOT_RE.match(sym)) is not None:
                target_type, target = "slot", m.group(1)
            else:
                target_type, target = "func", sym
            for part in spec.parts:
                part_addend = addend + part.delta if part.kind.flags & PCREL else addend
                func.relocs.append([rel.offset + part.delta, self.kind_id(part.kind),
                                    target_type, target, part_addend])
        if next_jumps:
            offset, spec = max(next_jumps, key=lambda j: j[0])
            assert spec.jump is not None
            start, length = spec.jump
            if offset + start + length == len(code):
                func.strip = length
        self.functions[name] = func


def build_table() -> bytes:
    target = load_target()
    if target.get("builder") != "tricore-asm":
        raise SystemExit(f"targets/{NAME}.toml is not built by this tool")
    nx = assembler()
    builder = TricoreTableBuilder(target)
    for path in sources():
        origin = str(path.relative_to(ROOT))
        for name, source in split_functions(preprocess(path), origin):
            builder.add_function(nx, name, source, origin)
    builder.prune()
    builder.check_resolved()
    text = json.dumps(builder.to_json(source_hash(target)), sort_keys=True, separators=(",", ":"))
    return zlib.compress(text.encode(), 9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed table")
    args = parser.parse_args()
    try:
        data = build_table()
    except AssemblerMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.check:
        same = TABLE.exists() and TABLE.read_bytes() == data
        print(f"tricore: {'reproducible' if same else 'DIFFERS from ' + str(TABLE)}")
        return 0 if same else 1
    TABLE.write_bytes(data)
    table = json.loads(zlib.decompress(data))
    print(f"tricore: {len(table['functions'])} functions, {len(table['kinds'])} patch kinds, "
          f"{len(data)} bytes -> {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
