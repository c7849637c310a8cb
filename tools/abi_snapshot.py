"""The ABI layout of runner/include/copapy/copapy.h (libcopapy, the kits ABI): offset and size of
every field of every copapy_* struct and the value of every enum constant, measured by a C
program compiled from the preprocessed header (so X-macro tables count too). tests/
test_abi_snapshot.py compares it with the committed tests/abi_copapy.json; a reorder, a
removal or a changed value fails there. After an intended change:

    python tools/abi_snapshot.py --update
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "copapy/copapy.h"
INCLUDE = ROOT / "runner" / "include"
SNAPSHOT = ROOT / "tests" / "abi_copapy.json"

STRUCT = re.compile(r"typedef\s+struct\s+(copapy_\w+)\s*\{(.*?)\}\s*\1\s*;", re.S)
ENUM = re.compile(r"\benum\b[^{;]*\{(.*?)\}", re.S)
FUNC_PTR = re.compile(r"\(\s*\*\s*(\w+)\s*\)")
FIELD = re.compile(r"(\w+)\s*(?:\[[^\]]*\])?\s*$")


class AbiSnapshotError(RuntimeError):
    """The header does not preprocess or the layout program does not build; says which."""


def compiler() -> str:
    for cc in ("cc", "gcc", "clang-19", "clang"):
        if shutil.which(cc):
            return cc
    raise AbiSnapshotError("no C compiler for the ABI snapshot: apt-get install gcc")


def preprocessed(cc: str) -> str:
    out = subprocess.run([cc, "-E", "-P", f"-I{INCLUDE}", str(INCLUDE / HEADER)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise AbiSnapshotError(f"{HEADER} does not preprocess:\n{out.stderr}")
    return out.stdout


def fields(body: str) -> list[str]:
    """The field names of a struct body, in order (one declarator per line, as copapy.h has)."""
    names = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        ptr = FUNC_PTR.search(decl)
        m = ptr if ptr else FIELD.search(decl)
        if m is None:
            raise AbiSnapshotError(f"cannot read the field declaration '{decl}'")
        names.append(m.group(1))
    return names


def enum_names(text: str) -> list[str]:
    names = []
    for body in ENUM.findall(text):
        for item in body.split(","):
            name = item.split("=")[0].strip()
            if name.startswith(("COPAPY_", "CP_")):
                names.append(name)
    return names


def layout_program(text: str) -> str:
    lines = ["#include <stddef.h>", "#include <stdio.h>", f'#include "{HEADER}"',
             "int main(void)", "{"]
    for name, body in STRUCT.findall(text):
        lines.append(f'    printf("S {name} %zu %zu\\n", sizeof({name}), _Alignof({name}));')
        for f in fields(body):
            lines.append(f'    printf("F {name} {f} %zu %zu\\n", offsetof({name}, {f}), '
                         f"sizeof((({name} *)0)->{f}));")
    for e in enum_names(text):
        lines.append(f'    printf("E {e} %lld\\n", (long long)({e}));')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def measure() -> dict[str, object]:
    """The layout on this machine (its C ABI: the snapshot is of x86_64 Linux)."""
    cc = compiler()
    source = layout_program(preprocessed(cc))
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = Path(tmp) / "layout.c", Path(tmp) / "layout"
        c.write_text(source)
        built = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", f"-I{INCLUDE}", str(c),
                                "-o", str(exe)], capture_output=True, text=True)
        if built.returncode != 0:
            raise AbiSnapshotError(f"the layout program does not build:\n{built.stderr}")
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    structs: dict[str, dict[str, object]] = {}
    enums: dict[str, int] = {}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "S":
            structs[rest[0]] = {"size": int(rest[1]), "align": int(rest[2]), "fields": []}
        elif kind == "F":
            entry = structs[rest[0]]["fields"]
            assert isinstance(entry, list)
            entry.append([rest[1], int(rest[2]), int(rest[3])])  # name, offset, size
        else:
            enums[rest[0]] = int(rest[1])
    return {"header": HEADER, "structs": structs, "enums": enums}


def dumps(snapshot: dict[str, object]) -> str:
    """JSON with one field or enum constant a line (a diff names what moved)."""
    text = json.dumps(snapshot, indent=1)
    return re.sub(r"\[\s*(\"\w+\"),\s*(\d+),\s*(\d+)\s*\]", r"[\1, \2, \3]", text) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help=f"write {SNAPSHOT.name}")
    args = parser.parse_args()
    now = measure()
    text = dumps(now)
    if args.update:
        SNAPSHOT.write_text(text)
        print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
