"""contract.h declares the codes Python and the C runners share once (issue 28): the generated
src/copapy/_contract.py is current, the generator refuses a malformed or inconsistent table, the
C compiler's view of every table (its enums and derived counts) equals the generated module, and
the Python modules that name codes take them from it."""

from __future__ import annotations

import importlib.util
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

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "gen_contract.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_contract", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_contract"] = mod
    spec.loader.exec_module(mod)
    return mod


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
