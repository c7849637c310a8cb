"""Write src/copapy/_contract.py from runner/include/copapy/contract.h (issue 28).

    python tools/gen_contract.py           # rewrite the module
    python tools/gen_contract.py --check   # exit 1 if the module is stale (run by the tests)

contract.h declares the codes the Python package and the C runners share as X-macro tables;
this reads the rows with a small strict parser (no C preprocessor: one ``X(...)`` row per
line of a ``#define CP_<NAME>_TABLE(X)`` block, each argument an integer, an identifier or a
string literal) and checks them (codes unique, and 1..N without a gap where C indexes by
code) before it writes IntEnums and counts.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "runner" / "include" / "copapy" / "contract.h"
MODULE = ROOT / "src" / "copapy" / "_contract.py"


@dataclass(frozen=True)
class Table:
    """How one table of contract.h becomes Python: its enum, the columns, where codes start."""

    macro: str
    enum: str
    const: str  # prefix of the module's constants (<const>_COUNT, <const>_<COLUMN>)
    columns: tuple[str, ...]  # names of the arguments; "name" and "code" are required
    first: int | None  # codes are first..first+n-1 without a gap (None: only unique)
    doc: str


TABLES = (
    Table("CP_DTYPE_TABLE", "DType", "DTYPE", ("name", "code", "bytes", "io", "python"), 1,
          "element types of ports, I/O binding slots and Program.read/write"),
    Table("CP_IO_DIRECTION_TABLE", "IoDirection", "IO_DIRECTION", ("name", "code"), 1,
          "directions of an I/O binding"),
    Table("CP_IO_KIND_TABLE", "IoKind", "IO_KIND", ("name", "code", "directions", "dt_property"), 1,
          "I/O channel kinds (cp.io)"),
    Table("CP_PORT_ROLE_TABLE", "PortRole", "PORT_ROLE", ("name", "code"), 1,
          "roles of image ports"),
    Table("CP_COMMAND_TABLE", "Command", "COMMAND",
          ("name", "handler", "code", "effect", "access"), 1,
          "protocol commands (docs/protocol.md)"),
    Table("CP_PROTOCOL_ERROR_TABLE", "ErrorCode", "ERROR_CODE", ("name", "code"), 1,
          "error codes of an ERROR response"),
    Table("CP_LOAD_ERROR_TABLE", "LoadError", "LOAD_ERROR", ("name", "code"), 1,
          "the runner core's load errors (cp_status; 0 is OK)"),
    Table("CP_FAULT_TABLE", "FaultKind", "FAULT_KIND", ("name", "code", "display"), 1,
          "fault kinds (0 is none)"),
    Table("CP_SECTION_TABLE", "Section", "SECTION", ("name", "code", "v1_entry_size"), 1,
          "image section types (docs/image.md)"),
    Table("CP_PLAN_KIND_TABLE", "PlanKind", "PLAN_KIND", ("name", "code"), 0,
          "kinds of the entries of a @cp.jit invoke plan"),
)

_DEFINE = re.compile(r"^#define\s+(CP_[A-Z0-9_]+_TABLE)\(X\)\s*\\$")
_ROW = re.compile(r"^\s*X\((?P<args>[^()]*)\)\s*(?:/\*.*?\*/\s*)?(?P<more>\\)?$")
_ARG = re.compile(r'\s*(?:(?P<int>-?\d+)|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)|"(?P<str>[^"\\]*)")\s*')

Value = int | str


class ContractError(ValueError):
    """contract.h has a row the generator cannot read or a table breaks its rules."""


def _args(text: str, where: str) -> list[Value]:
    out: list[Value] = []
    for piece in text.split(","):
        m = _ARG.fullmatch(piece)
        if m is None:
            raise ContractError(f"{where}: argument {piece.strip()!r} is not an integer, an "
                                f"identifier or a string literal without commas")
        if m["int"] is not None:
            out.append(int(m["int"]))
        else:
            out.append(m["ident"] if m["ident"] is not None else m["str"])
    return out


def parse(text: str) -> dict[str, list[list[Value]]]:
    """Every ``#define CP_*_TABLE(X)`` block of the header: its rows' arguments."""
    tables: dict[str, list[list[Value]]] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _DEFINE.match(lines[i])
        i += 1
        if m is None:
            continue
        rows: list[list[Value]] = []
        more = True
        while more:
            if i >= len(lines):
                raise ContractError(f"{m[1]}: the table runs past the end of the file")
            row = _ROW.match(lines[i])
            if row is None:
                raise ContractError(f"contract.h line {i + 1}: {lines[i].strip()!r} is not one "
                                    f"X(...) row (optionally a /* comment */, then \\)")
            rows.append(_args(row["args"], f"contract.h line {i + 1}"))
            more = row["more"] is not None
            i += 1
        tables[m[1]] = rows
    return tables


def check(table: Table, rows: list[list[Value]]) -> list[dict[str, Value]]:
    """The rows as dicts by column, after the table's rules."""
    out = []
    for row in rows:
        if len(row) != len(table.columns):
            raise ContractError(f"{table.macro}: row {row} has {len(row)} arguments, the table "
                                f"has the columns {', '.join(table.columns)}")
        d = dict(zip(table.columns, row, strict=True))
        if not isinstance(d["name"], str) or not isinstance(d["code"], int):
            raise ContractError(f"{table.macro}: row {row} needs a NAME and an integer code")
        out.append(d)
    codes = [d["code"] for d in out]
    names = [d["name"] for d in out]
    for what, seq in (("code", codes), ("name", names)):
        dup = sorted({str(v) for v in seq if seq.count(v) > 1})
        if dup:
            raise ContractError(f"{table.macro}: {what} {', '.join(dup)} appears twice")
    if table.first is not None and codes != list(range(table.first, table.first + len(codes))):
        raise ContractError(f"{table.macro}: the codes {codes} must be {table.first}, "
                            f"{table.first + 1}, ... in row order, without a gap (C indexes "
                            f"by code and range-checks with the count)")
    return out


def render(tables: dict[str, list[list[Value]]]) -> str:
    lines = ['"""The codes the Python package and the C runners share: GENERATED from',
             "runner/include/copapy/contract.h by tools/gen_contract.py; do not edit (edit the",
             'header, then run ``python tools/gen_contract.py``)."""', "",
             "# generated, do not edit", "",
             "from __future__ import annotations", "", "from enum import IntEnum"]
    for table in TABLES:
        if table.macro not in tables:
            raise ContractError(f"contract.h has no table {table.macro}")
        rows = check(table, tables[table.macro])
        lines += ["", "", f"class {table.enum}(IntEnum):",
                  f'    """{table.doc[0].upper()}{table.doc[1:]} ({table.macro})."""', ""]
        lines += [f"    {d['name']} = {d['code']}" for d in rows]
        lines += ["", "", f"{table.const}_COUNT = {len(rows)}"]
        for col in table.columns:
            if col in ("name", "code"):
                continue
            lines.append(f"{table.const}_{col.upper()} = {{")
            lines += [f"    {table.enum}.{d['name']}: {d[col]!r}," for d in rows]
            lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the module is stale")
    args = parser.parse_args(argv)
    try:
        text = render(parse(HEADER.read_text()))
    except ContractError as exc:
        print(f"gen_contract: {exc}", file=sys.stderr)
        return 2
    current = MODULE.read_text() if MODULE.exists() else ""
    if args.check:
        if current != text:
            print(f"{MODULE.relative_to(ROOT)} is stale: run python tools/gen_contract.py",
                  file=sys.stderr)
            return 1
        return 0
    if current != text:
        MODULE.write_text(text)
        print(f"wrote {MODULE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
