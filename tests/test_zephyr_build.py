"""The Zephyr firmware builds (zephyr_app/, docs/zephyr.md): teensy41 with the USB CDC ACM
link (the product; warnings are errors, CONFIG_COMPILER_WARNINGS_AS_ERRORS), code in ITCM,
the same FPU flags as the cortex-m7 stencils, the watchdog and the wrapped fault entries
linked in; its sizes printed for the docs. Skipped without ZEPHYR_BASE. Nothing built goes
into git: the build directories are ignored."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from copapy.arch.targets import by_name

from . import zephyr_runners as zr
from .runners import ROOT


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
