"""Errors of the runtimes that execute program images."""

from __future__ import annotations

from types import ModuleType


class ImageLoadError(ValueError):
    """An image was rejected at load time; the previously loaded program keeps running."""


class EmulatorMissingError(RuntimeError):
    """Running foreign machine code needs the unicorn emulator."""


def require_unicorn() -> ModuleType:
    try:
        import unicorn
    except ImportError as exc:
        raise EmulatorMissingError(
            "running code for another architecture needs the unicorn emulator: "
            "pip install 'copapy[emu]' (or pip install unicorn==2.1.4)"
        ) from exc
    return unicorn


class TargetError(RuntimeError):
    """A target was used in a way that cannot work (nothing compiled, wrong value, ...)."""
