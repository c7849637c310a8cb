"""Named errors of copapy.kits: each says what is wrong and what to do."""

from __future__ import annotations


class KitError(RuntimeError):
    """Base class of the kits' errors."""


class CppyyMissingError(KitError, ImportError):
    """cppyy is not installed: ``pip install 'copapy[kits]'``."""


class CompilerNotFoundError(KitError):
    """No C++ compiler to build a kit's C++ source (``CXX`` or c++/g++/clang++ on PATH)."""


class KitCompileError(KitError):
    """The C++ compiler rejected a kit's source; the message holds its output."""


class RunnerLibraryError(KitError):
    """libcopapy.so cannot be found or built."""


class BadImageError(KitError, ValueError):
    """The runner library rejected a program image; ``code``/``name`` are the load error of
    docs/image.md (e.g. 4 / "IMAGE/CRC")."""

    def __init__(self, message: str, code: int = 0, name: str = "IMAGE") -> None:
        super().__init__(message)
        self.code = code
        self.name = name


class PortNotFoundError(KitError, KeyError):
    """A port name the program does not have; the message lists the ones it has."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class LoopStateError(KitError):
    """A ControlLoop operation that its state does not allow (start while running, ...)."""


class ProgramFaultError(KitError):
    """The program faulted inside the loop (the runner core's guard caught it; the process
    goes on); from that cycle on the loop commanded the safe values. ``fault`` is the
    copapy.kits.abi.FaultInfo (kind, task, pc, address, tick), ``stats`` the loop's
    statistics."""

    def __init__(self, message: str, fault: object = None, stats: object = None) -> None:
        super().__init__(message)
        self.fault = fault
        self.stats = stats
