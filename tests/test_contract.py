"""contract.h declares the codes Python and the C runners share once (issue 28): the generated
src/copapy/_contract.py is current, the generator refuses a malformed or inconsistent table, the
C compiler's view of every table (its enums and derived counts) equals the generated module, and
the Python modules that name codes take them from it."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from copapy import _contract as c
from copapy import dtypes, image
from copapy.runtime import errors
from copapy.serial import protocol

from .support.tools import load_tool

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "gen_contract.py"


def _tool() -> ModuleType:
    return load_tool("gen_contract")


def test_generated_module_is_current() -> None:
    proc = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


TABLE = "#define CP_PORT_ROLE_TABLE(X) \\\n{rows}\n"


@pytest.mark.parametrize(("rows", "message"), [
    ("    X(INPUT, 1) \\\n    X(OUTPUT, 3)", "without a gap"),
    ("    X(INPUT, 1) \\\n    X(OUTPUT, 1)", "code 1 appears twice"),
    ("    X(INPUT, 1) \\\n    X(INPUT, 2)", "name INPUT appears twice"),
    ("    X(INPUT, 1, 2)", "has 3 arguments"),
    ("    X(INPUT, 1.5)", "is not an integer"),
    ("    X(INPUT, 1) \\\n    Y(OUTPUT, 2)", "is not one X(...) row"),
    ("    X(INPUT, 1) \\", "runs past the end"),
])
def test_generator_refuses_bad_tables(rows: str, message: str) -> None:
    gen = _tool()
    role = next(t for t in gen.TABLES if t.macro == "CP_PORT_ROLE_TABLE")
    with pytest.raises(gen.ContractError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parsed = gen.parse(TABLE.format(rows=rows))
        gen.check(role, parsed["CP_PORT_ROLE_TABLE"])


def test_generator_reads_every_table_of_the_header() -> None:
    gen = _tool()
    parsed = gen.parse((ROOT / "runner" / "include" / "copapy" / "contract.h").read_text())
    assert sorted(parsed) == sorted(t.macro for t in gen.TABLES)


ENUMS = ((c.DType, "CP_DT_"), (c.IoKind, "CP_IO_"), (c.IoDirection, "CP_DIR_"),
         (c.PortRole, "CP_ROLE_"), (c.Command, "CP_CMD_"), (c.ErrorCode, "CP_PERR_"),
         (c.LoadError, "CP_ERR_"), (c.FaultKind, "CP_FAULT_"), (c.Section, "CP_SEC_"),
         (c.PlanKind, "CP_PLAN_"))
COUNTS = ("CP_IO_KIND_COUNT", "CP_DTYPE_COUNT", "CP_COMMAND_COUNT", "CP_PERR_COUNT",
          "CP_STATUS_COUNT", "CP_FAULT_KIND_COUNT", "CP_SEC_KNOWN_MAX", "CP_PLAN_KIND_COUNT",
          "CP_ROLE_COUNT", "COPAPY_ADC", "COPAPY_I8", "COPAPY_FAULT_TIMEOUT")


def _c_program() -> str:
    """Prints every table's C enum constants and derived counts, as the runner code names
    them (through runner.h, proto.h and the public copapy.h)."""
    prints = [f'printf("{enum.__name__}.{m.name} %d\\n", (int){prefix}{m.name});'
              for enum, prefix in ENUMS for m in enum]
    prints += [f'printf("{name} %d\\n", (int){name});' for name in COUNTS]
    return ('#include <stdio.h>\n#include "copapy/runner.h"\n#include "copapy/proto.h"\n'
            '#include "copapy/copapy.h"\nint main(void)\n{\n' + "\n".join(prints) +
            "\nreturn 0;\n}\n")


def test_c_and_python_agree(tmp_path: Path) -> None:
    assert shutil.which("cc"), "the contract test needs a C compiler (cc)"
    (tmp_path / "agree.c").write_text(_c_program())
    exe = tmp_path / "agree"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror",
                    f"-I{ROOT / 'runner' / 'include'}", str(tmp_path / "agree.c"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    seen = dict(line.rsplit(" ", 1) for line in subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.splitlines())
    for enum, _prefix in ENUMS:
        for m in enum:
            assert int(seen[f"{enum.__name__}.{m.name}"]) == m.value, (enum, m)
    assert int(seen["CP_IO_KIND_COUNT"]) == c.IO_KIND_COUNT == len(c.IoKind)
    assert int(seen["CP_DTYPE_COUNT"]) == c.DTYPE_COUNT
    assert int(seen["CP_COMMAND_COUNT"]) == c.COMMAND_COUNT
    assert int(seen["CP_PERR_COUNT"]) == c.ERROR_CODE_COUNT
    assert int(seen["CP_STATUS_COUNT"]) == c.LOAD_ERROR_COUNT + 1
    assert int(seen["CP_FAULT_KIND_COUNT"]) == c.FAULT_KIND_COUNT + 1
    assert int(seen["CP_SEC_KNOWN_MAX"]) == c.SECTION_COUNT
    assert int(seen["CP_PLAN_KIND_COUNT"]) == c.PLAN_KIND_COUNT
    assert int(seen["CP_ROLE_COUNT"]) == c.PORT_ROLE_COUNT
    assert int(seen["COPAPY_ADC"]) == c.IoKind.ADC and int(seen["COPAPY_I8"]) == c.DType.I8
    assert int(seen["COPAPY_FAULT_TIMEOUT"]) == c.FaultKind.TIMEOUT


def test_python_modules_take_their_codes_from_the_contract() -> None:
    assert protocol.ERROR_NAMES == {int(e): e.name for e in c.ErrorCode}
    assert (protocol.HELLO, protocol.FAULT, protocol.GAP) == (
        c.Command.HELLO, c.Command.FAULT, c.ErrorCode.GAP)
    assert protocol.FAULT_KINDS[0] == "none"
    assert {k: v for k, v in protocol.FAULT_KINDS.items() if k} == {
        int(k): v for k, v in c.FAULT_KIND_DISPLAY.items()}
    assert errors.LOAD_ERROR_NAMES == {int(e): e.name for e in c.LoadError}
    assert image.V1_ENTRY_SIZES == {int(s): n for s, n in c.SECTION_V1_ENTRY_SIZE.items()}
    assert {t.code: t.name for t in dtypes.SLOT_TYPES.values()} == {
        int(d): n for d, n in c.DTYPE_PYTHON.items()}
    assert {t.code: t.size for t in dtypes.SLOT_TYPES.values()} == {
        int(d): n for d, n in c.DTYPE_BYTES.items()}
    with pytest.raises(ValueError, match="dtype 7 is unknown: use 1 float32, 2 float64"):
        dtypes.slot_type(7)


# ---- nothing else spells a code: the scan below finds bare I/O kinds, dtype codes, port roles,
# I/O directions, command numbers, plan kinds and kind counts outside contract.h / _contract.py

CODE_NAME = re.compile(r"^(GPIO|PWM|ENCODER|ADC|DAC)(_KIND)?$|^(F32|F64|I32|BOOL|U8|I8)$"
                       r"|^(ROLE|CMD|PLAN|DIR|DT|IO)_[A-Z_]+$|^(INPUT|OUTPUT)$")
CODE_FIELDS = {"dtype", "kind", "direction", "role", "command"}
HISTORICAL = "# contract: historical"
IO_CALLS = {"io_read", "io_write", "io_get", "io_set"}  # (kind, channel, ...) of the runners
C_PATTERNS = (
    (re.compile(r"#define\s+CP_(CMD|DT|IO|ROLE|PERR|SEC|PLAN|DIR)_[A-Z_]+\s+\(?\d"),
     "a contract code defined outside contract.h"),
    (re.compile(r"\b(kind|dtype|command|cmd|role|direction)\s*[!=]=\s*[1-9]\d?\b"),
     "a code compared with a bare number"),
    (re.compile(r"\b(kind|dtype|command|cmd|role|direction)\s*[<>]=?\s*([2-9]|[1-9]\d)\b"),
     "a code range with a bare bound"),
    (re.compile(r"\bchannels\s*\[\s*\d+\s*\]"), "an I/O kind count as a bare array size"),
)


def _int(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int)
            and not isinstance(node.value, bool))


def _code_field(node: ast.AST) -> bool:
    """A field that holds a code (``b.dtype``; a bare name ``kind`` is often a local)."""
    return isinstance(node, ast.Attribute) and node.attr in CODE_FIELDS


def python_bare_codes(source: str, where: str) -> list[str]:
    """Bare contract codes in Python source: a code name bound to a number, a code field
    compared with one, a dict keyed 1..n, a plan entry or an I/O-kind count spelled out. A line
    marked ``# contract: historical`` is a past version's wire format, spelled as it was."""
    found: list[str] = []
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        lineno = getattr(node, "lineno", 0)
        if lineno and HISTORICAL in lines[lineno - 1]:
            continue
        line = f"{where}:{lineno}"
        if isinstance(node, ast.Assign):
            names = [n.id for t in node.targets
                     for n in (t.elts if isinstance(t, ast.Tuple) else [t])
                     if isinstance(n, ast.Name)]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if any(CODE_NAME.match(n) for n in names) and any(_int(v) for v in values):
                found.append(f"{line}: {', '.join(names)} bound to a number")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_code_field(s) for s in sides) and any(
                    _int(s) and s.value != 0 for s in sides):  # type: ignore[attr-defined]
                found.append(f"{line}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if _int(k)]  # type: ignore[union-attr]
            if len(keys) >= 3 and len(keys) == len(node.keys) and sorted(keys) == list(
                    range(1, len(keys) + 1)):
                found.append(f"{line}: a dict keyed 1..{len(keys)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in IO_CALLS and node.args and _int(node.args[0])):
            found.append(f"{line}: {node.func.attr}() of a bare I/O kind")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "append" and isinstance(node.func.value, ast.Name)
              and node.func.value.id.endswith("plan") and node.args
              and isinstance(node.args[0], ast.Tuple) and _int(node.args[0].elts[0])):
            found.append(f"{line}: a plan entry with a bare kind")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and re.fullmatch(r"[<>=!@]?[0-9A-Za-z?]+", node.value)
              and f"{c.IO_KIND_COUNT}H" in node.value):
            found.append(f"{line}: {node.value!r} spells the I/O kind count")
    return found


def c_bare_codes(source: str, where: str) -> list[str]:
    return [f"{where}:{k}: {what}: {text.strip()}"
            for k, text in enumerate(source.splitlines(), 1)
            for pattern, what in C_PATTERNS if pattern.search(text.split("//")[0])]


def _sources(*globs: str) -> list[Path]:
    skip = {ROOT / "src" / "copapy" / "_contract.py",
            ROOT / "runner" / "include" / "copapy" / "contract.h"}
    return sorted(p for g in globs for p in ROOT.glob(g)
                  if p not in skip and "_lib" not in p.parts and "build" not in p.parts)


def test_no_bare_codes_outside_the_contract() -> None:
    found = [hit for p in _sources("src/copapy/**/*.py", "tests/*.py", "tools/*.py")
             for hit in python_bare_codes(p.read_text(), str(p.relative_to(ROOT)))]
    found += [hit for p in _sources("runner/**/*.[ch]", "runner/**/*.cpp", "zephyr_app/**/*.[ch]")
              for hit in c_bare_codes(p.read_text(errors="replace"), str(p.relative_to(ROOT)))]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("source", [
    "GPIO_KIND, PWM_KIND, ENCODER_KIND, ADC_KIND = 1, 2, 3, 4",
    "ROLE_INPUT = 1",
    "F32, F64 = 1, 2",
    "python_type = {1: float, 2: float, 3: int, 4: bool}",
    "ok = b.dtype == 4",
    "in_plan.append((2, 0, 0, 0))",
    "sched.io_write(5, 0, 1.0)",
    f"HELLO_FIXED = struct.Struct('<HHHHHHIII{c.IO_KIND_COUNT}HBBIQ')",
])
def test_the_scan_finds_bare_python_codes(source: str) -> None:
    assert python_bare_codes(source, "x.py"), source


@pytest.mark.parametrize("source", [
    "#define CP_CMD_HELLO 1", "if (kind == 2) {", "if (kind > 4) {", "uint16_t channels[4];"])
def test_the_scan_finds_bare_c_codes(source: str) -> None:
    assert c_bare_codes(source, "x.c"), source
