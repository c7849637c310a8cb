"""Where libcopapy (the runner as a shared library) and its header are.

In a source checkout the library is kept up to date with ``make -C runner lib``
(runner/build/libcopapy.so, headers in runner/include); an installed copapy ships both in
``copapy/_lib`` (``python -m copapy.kits paths`` prints them for a C/C++ build).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

from .errors import RunnerLibraryError

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parents[1]
#: the kits' own C++ sources (control loop, plants, ros2_control emulation)
KIT_SOURCES = Path(__file__).resolve().parent

#: libcopapy's file in a wheel's copapy/_lib (tools/cross_wheel.py: Windows and macOS)
PACKAGED_LIBRARY = {"win32": "copapy.dll", "darwin": "libcopapy.dylib"}.get(sys.platform,
                                                                            "libcopapy.so")

_lock = threading.Lock()
_built: Path | None = None


def _checkout() -> bool:
    return (ROOT / "runner" / "Makefile").is_file() and (ROOT / "runner" / "lib").is_dir()


def library_path(rebuild: bool = False) -> Path:
    """libcopapy.so: built from the checkout's runner sources (a no-op when up to date), else
    the one shipped in the package."""
    global _built
    with _lock:
        if _built is not None and not rebuild:
            return _built
        packaged = PACKAGE / "_lib" / PACKAGED_LIBRARY
        if _checkout() and shutil.which("make") and shutil.which("cc"):
            argv = ["make", "-C", str(ROOT / "runner"), *(["-B"] if rebuild else []),
                    "build/libcopapy.so"]
            proc = subprocess.run(argv, capture_output=True, text=True)
            lib = ROOT / "runner" / "build" / "libcopapy.so"
            if proc.returncode or not lib.is_file():
                raise RunnerLibraryError(f"building libcopapy.so failed:\n{proc.stdout}\n"
                                         f"{proc.stderr}")
            _built = lib
        elif packaged.is_file():
            _built = packaged
        else:
            raise RunnerLibraryError(
                "libcopapy.so is neither in this copapy installation (copapy/_lib) nor "
                "buildable here (a source checkout with make and cc): reinstall copapy, or "
                "install build-essential in a checkout")
        return _built


def include_dir() -> Path:
    """The directory holding ``copapy/copapy.h`` (add it with -I)."""
    if _checkout():
        return ROOT / "runner" / "include"
    packaged = PACKAGE / "_lib" / "include"
    if (packaged / "copapy" / "copapy.h").is_file():
        return packaged
    raise RunnerLibraryError("copapy/copapy.h is not in this copapy installation (copapy/_lib)")


def kit_include_dir() -> Path:
    """The directory holding the kits' C++ headers (``copapy_kit/control_loop.hpp``, ...)."""
    return KIT_SOURCES / "cpp"
