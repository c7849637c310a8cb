"""Runtimes: execute program images (native runner extension, or an emulated CPU)."""

from .errors import max_memory, set_max_memory

__all__ = ["max_memory", "set_max_memory"]
