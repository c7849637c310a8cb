"""``copapy doctor`` (what is installed for each feature, and how to add what is missing) and
``copapy firmware export DIR`` (the runner sources a board build needs)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__, _files
from .host_runner import runner_status

__all__ = ["Check", "checks", "firmware_sources", "register"]

#: what `copapy firmware export` writes (relative paths; globbed, so missing ones are skipped);
#: the same list as setup.py's FIRMWARE (tests/test_cli.py holds them equal). runner/tables: the
#: stencil tables a verifying runner links (the Cortex-M7 firmware since verified loading)
FIRMWARE = ("runner/src", "runner/include", "runner/tables", "runner/baremetal",
            "runner/cortexm", "runner/host", "zephyr_app",
            "runner/Makefile", "docs/protocol.md", "docs/image.md")
SKIP = shutil.ignore_patterns("build", "build-*", "*.o", "*.elf", "*.bin", "__pycache__")


def register(sub: Any) -> None:
    doc = sub.add_parser("doctor", help="what is installed for each feature")
    doc.set_defaults(fn=cmd_doctor)
    fw = sub.add_parser("firmware", help="firmware sources for building a runner for a board")
    fw_sub = fw.add_subparsers(dest="firmware_command", required=True)
    exp = fw_sub.add_parser("export", help="write the runner and firmware sources to DIR")
    exp.add_argument("dir", help="directory to create (must not exist or be empty)")
    exp.set_defaults(fn=cmd_firmware_export)


# ---- firmware export


def firmware_root() -> Path:
    """Where the firmware sources are: the wheel's copy (copapy/_firmware) or a checkout."""
    root = _files.firmware_root()
    if root is not None:
        return Path(root)
    raise SystemExit("copapy: this installation has no firmware sources (copapy/_firmware); "
                     "reinstall copapy from its wheel or a source checkout")


def firmware_sources() -> list[str]:
    """The relative paths ``copapy firmware export`` writes."""
    root = firmware_root()
    return [item for item in FIRMWARE if (root / item).exists()]


def cmd_firmware_export(args: argparse.Namespace) -> int:
    dest = Path(args.dir)
    if dest.exists() and not dest.is_dir():
        raise SystemExit(f"copapy firmware export: {dest} is a file; give a new or empty "
                         f"directory")
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"copapy firmware export: {dest} exists and is not empty")
    root = firmware_root()
    try:
        for item in firmware_sources():
            src = root / item
            if src.is_dir():
                shutil.copytree(src, dest / item, ignore=SKIP, dirs_exist_ok=True)
            else:
                (dest / item).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / item)
    except OSError as exc:
        raise SystemExit(f"copapy firmware export: cannot write {dest}: "
                         f"{exc.strerror or exc}") from None
    print(f"wrote {', '.join(firmware_sources())} to {dest}")
    print(f"  host runner:  make -C {dest / 'runner'} host")
    print(f"  Cortex-M7:    make -C {dest / 'runner' / 'baremetal'}   (gcc-arm-none-eabi)")
    if (dest / "zephyr_app").is_dir():
        print(f"  Zephyr:       west build -b teensy41 {dest / 'zephyr_app'}")
    return 0


# ---- doctor


@dataclass(frozen=True)
class Check:
    """One feature: whether it is usable here, what was found, and how to add it."""

    feature: str
    ok: bool
    found: str
    fix: str = ""


def _module(name: str) -> str | None:
    """The version of an importable module (without importing it where possible)."""
    if importlib.util.find_spec(name) is None:
        return None
    from importlib import metadata

    dist = {"serial": "pyserial", "cppyy": "cppyy", "unicorn": "unicorn",
            "matplotlib": "matplotlib", "tqdm": "tqdm", "mkdocs": "mkdocs"}.get(name, name)
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "installed"


def _program(name: str) -> str | None:
    return shutil.which(name)


def _core() -> Check:
    try:
        from . import _kernels, _runner  # noqa: F401
        from .arch.targets import host_arch
    except ImportError as exc:
        return Check("compiler-free core", False, f"extension modules missing ({exc})",
                     "pip install --force-reinstall copapy")
    arch = host_arch() or f"unknown id {_runner.ARCH}"
    return Check("compiler-free core", True, f"native runner for {arch} (LocalTarget, @cp.jit)")


def _host_runner() -> Check:
    exe, note = runner_status()  # building it here made doctor take 15 s on a fresh checkout
    if exe is not None:
        return Check("host runner", True, f"{exe} (copapy runner --pty)"
                     + (f"; {note}" if note else ""))
    if note.startswith("not built yet"):
        return Check("host runner", True, note)
    return Check("host runner", False, note, "pip install --force-reinstall copapy, or in a "
                 "checkout apt-get install build-essential")


def _realtime() -> Check:
    if not sys.platform.startswith("linux"):
        return Check("real-time scheduling", False, "not Linux", "")
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_RTPRIO)
    except (ImportError, OSError, AttributeError):
        soft = 0
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if root or soft == resource.RLIM_INFINITY or soft >= 80:
        return Check("real-time scheduling", True, "SCHED_FIFO 80 permitted")
    return Check("real-time scheduling", False, f"RLIMIT_RTPRIO {soft} (the runner warns and "
                 "runs at normal priority)",
                 "add '@realtime - rtprio 99' and '@realtime - memlock unlimited' to "
                 "/etc/security/limits.d/ and join group realtime, or run as root")


def _emulators() -> Check:
    unicorn = _module("unicorn")
    qemu = _program("qemu-system-arm")
    found = [f"unicorn {unicorn}" if unicorn else "", "qemu-system-arm" if qemu else ""]
    found = [f for f in found if f]
    fix = []
    if not unicorn:
        fix.append("pip install 'copapy[emu]'")
    if not qemu:
        fix.append("apt-get install qemu-system-arm gcc-arm-none-eabi libnewlib-arm-none-eabi "
                   "(Cortex-M55 and Cortex-M7 float64, from a source checkout)")
    return Check("emulators (LocalTarget(arch=...))", bool(unicorn),
                 ", ".join(found) or "none", "; ".join(fix))


def _python_feature(feature: str, module: str, extra: str, what: str) -> Callable[[], Check]:
    def check() -> Check:
        version = _module(module)
        return Check(feature, version is not None,
                     f"{module} {version} ({what})" if version else f"no {module}",
                     "" if version else f"pip install 'copapy[{extra}]'")
    return check


def _zephyr() -> Check:
    west = _program("west")
    base = os.environ.get("ZEPHYR_BASE")
    default = Path.home() / "zephyrproject" / "zephyr"
    workspace = base or (str(default) if default.is_dir() else None)
    if west and workspace:
        return Check("Zephyr workspace (Teensy firmware)", True, f"west, {workspace}")
    missing = ", ".join(x for x, ok in (("west", west), ("a Zephyr workspace", workspace))
                        if not ok)
    return Check("Zephyr workspace (Teensy firmware)", False, f"no {missing}",
                 "pip install west && west init ~/zephyrproject && cd ~/zephyrproject && "
                 "west update && west zephyr-export (then export ZEPHYR_BASE)")


def _teensy() -> Check:
    loader = _program("teensy_loader_cli")
    return Check("teensy loader", loader is not None, loader or "no teensy_loader_cli",
                 "" if loader else "apt-get install teensy-loader-cli")


def _cross() -> Check:
    gcc = _program("arm-none-eabi-gcc")
    return Check("Cortex-M cross compiler (runner/baremetal)", gcc is not None,
                 gcc or "no arm-none-eabi-gcc",
                 "" if gcc else "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi")


def _c_compiler() -> Check:
    cc = _program("cc") or _program("gcc")
    return Check("C compiler (rebuilding the runner, not needed by the wheel)", cc is not None,
                 cc or "none", "" if cc else "apt-get install build-essential")


def checks() -> list[Check]:
    """Every feature's check, in the order ``copapy doctor`` prints them."""
    return [f() for f in (
        _core, _host_runner, _realtime, _emulators,
        _python_feature("serial (SerialTarget)", "serial", "serial", "pyserial"),
        _python_feature("plotting (tg.plot)", "matplotlib", "plot", "matplotlib"),
        _python_feature("live scope (tg.scope)", "bokeh", "scope", "bokeh"),
        _python_feature("kits (cppyy loops)", "cppyy", "kits", "cppyy"),
        _zephyr, _teensy, _cross, _c_compiler)]


def cmd_doctor(args: argparse.Namespace) -> int:
    print(f"copapy {__version__} on Python {sys.version.split()[0]} ({sys.executable})")
    for c in checks():
        mark = "ok " if c.ok else "-- "
        print(f"{mark} {c.feature}: {c.found}")
        if c.fix:
            print(f"      to add: {c.fix}")
    return 0

