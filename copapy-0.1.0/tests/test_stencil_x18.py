"""No AArch64 stencil touches x18, the platform register that macOS and Windows reserve (the
kernel or the loader may change it at any time): every aarch64 target compiles with
-ffixed-x18, and the committed tables' code, disassembled, names neither x18 nor w18. So one
aarch64 table serves Linux and macOS (docs/platforms.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import capstone  # type: ignore[import-untyped]

from copapy.compiler import tablefile

SRC = Path(__file__).resolve().parents[1] / "src" / "copapy"
X18 = re.compile(r"\b[xw]18\b")


def aarch64_targets() -> dict[str, dict[str, Any]]:
    """name -> declaration of every target compiled for AArch64."""
    found = {}
    for path in sorted((SRC / "targets").glob("*.toml")):
        decl = tomllib.loads(path.read_text())
        if decl.get("elf_machine") == "aarch64":
            found[str(decl["name"])] = decl
    return found


def test_every_aarch64_target_reserves_x18() -> None:
    found = aarch64_targets()
    assert found, "no aarch64 target found"
    for name, decl in found.items():
        assert "-ffixed-x18" in decl["cflags"], f"{name}: add -ffixed-x18 to its cflags"


def test_no_aarch64_stencil_uses_x18() -> None:
    md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    for name in aarch64_targets():
        table = tablefile.decode((SRC / "_tables" / f"{name}.cpst").read_bytes())
        users: dict[str, list[str]] = {}
        undecoded = []
        for fn, entry in table["functions"].items():
            code = bytes.fromhex(entry["code"])
            decoded = 0
            for ins in md.disasm(code, 0):
                decoded += ins.size
                if X18.search(ins.op_str):
                    users.setdefault(fn, []).append(f"{ins.mnemonic} {ins.op_str}")
            if decoded != len(code):
                undecoded.append(fn)  # data in the code would hide instructions after it
        assert not undecoded, f"{name}: not all code decodes: {undecoded[:5]}"
        assert not users, f"{name}: stencils use x18: {dict(list(users.items())[:5])}"
