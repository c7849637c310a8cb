"""copapy.kits: copapy programs in C++ loops, without the GIL (extra ``kits`` = cppyy).

* :mod:`copapy.kits.abi` — the runner as a shared library (libcopapy, ``copapy/copapy.h``)
  through ctypes; ``python -m copapy.kits paths`` prints where the library and header are for
  a C/C++ build;
* :mod:`copapy.kits.cppyy_tools` — the cppyy primitives: load the runner library into cppyy,
  the compile cache, warm-up, nogil;
* :mod:`copapy.kits.control_loop` — :class:`ControlLoop`, a periodic C++ loop on its own
  thread, with simulated plants (DC motor, planar arm) and NumPy-buffer hardware;
* :mod:`copapy.kits.ros2_control` — a copapy controller for ros2_control's controller_manager.

Each has a README.md beside it (docs/kits.md links them). Importing this package imports
neither cppyy nor NumPy.
"""

from __future__ import annotations

from typing import Any

from .errors import (
    BadImageError,
    CompilerNotFoundError,
    CppyyMissingError,
    KitCompileError,
    KitError,
    LoopStateError,
    PortNotFoundError,
    ProgramFaultError,
    RunnerLibraryError,
)
from .paths import include_dir, kit_include_dir, library_path

__all__ = ["BadImageError", "CompilerNotFoundError", "ControlLoop", "CppyyMissingError",
           "KitCompileError", "KitError", "LoopStateError", "PortNotFoundError",
           "ProgramFaultError", "RunnerLibraryError", "include_dir", "kit_include_dir",
           "library_path"]


def __getattr__(name: str) -> Any:
    if name == "ControlLoop":
        from .control_loop import ControlLoop

        return ControlLoop
    raise AttributeError(f"module 'copapy.kits' has no attribute {name!r}")
