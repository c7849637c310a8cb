"""The Zephyr firmware builds (zephyr_app/, docs/zephyr.md): teensy41 with the USB CDC ACM
link (the product; warnings are errors, CONFIG_COMPILER_WARNINGS_AS_ERRORS), code in ITCM,
the same FPU flags as the cortex-m7 stencils, the watchdog and the wrapped fault entries
linked in; its sizes printed for the docs. Skipped without ZEPHYR_BASE. Nothing built goes
into git: the build directories are ignored."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from copapy.arch.targets import by_name

from .support import zephyr_runners as zr
from .support.runners import ROOT, free_port


def symbols(build_dir: Path) -> dict[str, int]:
    proc = subprocess.run(["arm-none-eabi-nm", str(zr.elf(build_dir))], capture_output=True,
                          text=True, check=True)
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[parts[2]] = int(parts[0], 16)
    return out


def test_teensy41_usb_build() -> None:
    out = zr.build("teensy41")
    config = (out / "zephyr" / ".config").read_text()
    for option in ("CONFIG_COPAPY_TRANSPORT_USB=y", "CONFIG_USB_CDC_ACM=y",
                   "CONFIG_COPAPY_CODE_AREA_ITCM=y", "CONFIG_COMPILER_WARNINGS_AS_ERRORS=y",
                   "CONFIG_WDT_MCUX_IMX_WDOG=y", "CONFIG_COPAPY_WATCHDOG=y"):
        assert option in config, option
    # the app's files are compiled with the stencils' FPU flags
    commands = json.loads((out / "compile_commands.json").read_text())
    main_c = next(c["command"] for c in commands if c["file"].endswith("zephyr_app/src/main.c"))
    for flag in by_name("cortex-m7").build["cflags"]:
        assert flag in main_c.split(), flag
    syms = symbols(out)
    for name in ("__wrap_z_arm_fault", "__wrap_z_do_kernel_oops", "cpz_guard",
                 "cp_server_init", "cp_sched_tick"):
        assert name in syms, name
    sizes = zr.sizes(out)
    print(f"teensy41 (USB): flash {sizes['flash']} B, static RAM {sizes['ram']} B")
    assert 0 < sizes["flash"] < 8 * 1024 * 1024


def test_mps2_an500_build() -> None:
    out = zr.build("mps2_an500")
    config = (out / "zephyr" / ".config").read_text()
    for option in ("CONFIG_COPAPY_BUDGET_DTIMER=y", "CONFIG_ZERO_LATENCY_IRQS=y",
                   "CONFIG_WDOG_CMSDK_APB=y", "CONFIG_RUNTIME_NMI=y"):
        assert option in config, option
    sizes = zr.sizes(out)
    print(f"mps2_an500: flash {sizes['flash']} B, static RAM {sizes['ram']} B")


def test_build_directories_are_ignored() -> None:
    """`west build` output (zephyr_app/build/<variant>, or build/ wherever west runs) is
    git-ignored, and nothing under zephyr_app/ that git tracks was built."""
    for path in ("zephyr_app/build/teensy41/zephyr/zephyr.hex", "zephyr_app/build-usb/x",
                 "build/zephyr/zephyr.elf"):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert ignored.returncode == 0, f"{path} is not ignored"
    tracked = subprocess.run(["git", "ls-files", "zephyr_app"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    built = [f for f in tracked if f.endswith((".elf", ".hex", ".bin", ".obj", ".o", ".a"))
             or "/build" in f]
    assert built == [], built


def repl_entries(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """A Renode platform description's entries: name -> (what follows the colon, attributes)."""
    entries: dict[str, tuple[str, dict[str, str]]] = {}
    current: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split(" //")[0].rstrip()
        if not line or line.startswith(("//", "using ")):
            continue
        name, _, rest = line.strip().partition(":")
        if line.startswith("    "):
            current[name] = rest.strip()
        else:
            current = {}
            entries[name] = (rest.strip(), current)
    return entries


def dts_reg(dts: str, label: str) -> list[int]:
    """The ``reg`` cells of a labelled node in a build's zephyr.dts."""
    node = re.search(rf"^\s*{label}: [^{{]*{{(.*?)}};", dts, re.S | re.M)
    assert node is not None, label
    reg = re.search(r"^\s*reg = (.*?);", node.group(1), re.M)
    assert reg is not None, label
    return [int(x, 16) for x in re.findall(r"0x[0-9a-f]+", reg.group(1))]


def test_renode_repl_default_is_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without COPAPY_RENODE_REPL the Renode runs load the repository's own description;
    with it, the given file."""
    monkeypatch.delenv("COPAPY_RENODE_REPL", raising=False)
    monkeypatch.setenv("COPAPY_RENODE", "/nonexistent/renode/bin/renode")
    assert zr.renode_repl() == ROOT / "zephyr_app" / "renode" / "teensy41.repl"
    assert zr.renode_repl().is_file()
    monkeypatch.setenv("COPAPY_RENODE_REPL", "/elsewhere/board.repl")
    assert zr.renode_repl() == Path("/elsewhere/board.repl")
    monkeypatch.setenv("COPAPY_RENODE", "/bin/true")
    missing = zr.renode_missing()
    assert missing is not None and "/elsewhere/board.repl" in missing, missing
    assert "COPAPY_RENODE_REPL" in missing and zr.DOC in missing, missing


def test_renode_repl_matches_teensy41_build() -> None:
    """The shipped platform description has the memory and clock the teensy41 build was
    linked for (its devicetree, .config and vector table), and the MPU regions Zephyr programs."""
    out = zr.build("teensy41")
    dts = (out / "zephyr" / "zephyr.dts").read_text()
    config = (out / "zephyr" / ".config").read_text()
    repl = repl_entries(zr.RENODE_REPL.read_text())
    ocram_base, ocram_size = dts_reg(dts, "ocram")
    assert ocram_base == 0x20200000  # imxrt1064.repl's ocram2, which the description resizes
    assert int(repl["ocram2"][1]["size"], 16) == ocram_size
    _, _, flash_base, flash_size = dts_reg(dts, "flexspi")
    header, attrs = repl["flexspi_flash"]
    assert header == f"Memory.MappedMemory @ sysbus {flash_base:#x}"
    assert int(attrs["size"], 16) == flash_size
    assert repl["flex_spi"][0] == "@ sysbus 0x402A8000"  # registers only: no FlexSPI AHB window
    hz = re.search(r"^CONFIG_SYS_CLOCK_HW_CYCLES_PER_SEC=(\d+)$", config, re.M)
    assert hz is not None
    assert int(repl["nvic"][1]["systickFrequency"]) == int(hz.group(1))
    assert symbols(out)["_vector_table"] == zr.RENODE_VECTOR_TABLE
    # Zephyr's i.MX RT MPU table programs more regions than Renode's default 8
    assert "CONFIG_ARM_MPU=y" in config
    assert int(repl["cpu"][1]["numberOfMPURegions"]) == 16


def test_docs_qemu_command_is_the_tests() -> None:
    """docs/zephyr.md's qemu command is the one the tests start (instruction counting
    included), and its commands name no machine's own paths."""
    doc = (ROOT / "docs" / "zephyr.md").read_text()
    joined = doc.replace("\\\n", " ")
    line = next(x for x in joined.splitlines() if x.startswith("qemu-system-arm "))
    kernel = "zephyr_app/build/mps2_an500/zephyr/zephyr.elf"
    assert shlex.split(line) == zr.qemu_command("mps2_an500", kernel, 45123, "stdio")
    for path in ("/opt/", "/home/", "/work/", "/root/"):
        assert path not in doc, path


def test_docs_renode_command_is_the_tests() -> None:
    """docs/zephyr.md's Renode command is the one the tests start (the watchdog model and the
    reset macro included)."""
    doc = (ROOT / "docs" / "zephyr.md").read_text()
    start = doc.index("$COPAPY_RENODE --disable-xwt --console --plain -e 'include")
    block = doc[start:doc.index("start'", start) + len("start'")]
    shown = shlex.split(block)
    tests = zr.renode_command("$COPAPY_RENODE", "zephyr_app/build/teensy41_lpuart/zephyr/"
                              "zephyr.elf", 45124, "zephyr_app/renode/teensy41.repl",
                              "zephyr_app/renode/IMXRT_WDOG.cs")
    assert shown[:-1] == tests[:-1]
    assert " ".join(shown[-1].split()) == " ".join(tests[-1].split())
    assert "IMXRT_WDOG" in (ROOT / "zephyr_app" / "renode" / "teensy41.repl").read_text()


def test_emulator_that_exits_fails_with_its_log(tmp_path: Path) -> None:
    """An emulator that dies before it listens (Renode missing a library, qemu refusing an
    option) fails the start at once with the end of its log, not after the boot timeout."""
    log = tmp_path / "emulator.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["sh", "-c", "echo 'FATAL: no such assembly' >&2; exit 3"],
                                stdout=out, stderr=subprocess.STDOUT)
    proc.wait(timeout=10)
    with pytest.raises(RuntimeError) as err:
        zr._wait_ready(free_port(), time.monotonic() + 3600, proc, log)
    assert "exited (3)" in str(err.value) and "FATAL: no such assembly" in str(err.value)
