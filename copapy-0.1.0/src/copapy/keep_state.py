"""Online change: which signal states of a running program go on in the program replacing it
(``tg.deploy(..., keep_state=True)``; docs/decisions/2026-12-04-online-change-keep-state.md).

A state is matched by its port name (``name=`` of the signal operator, ``name[k]`` per
element of an unpacked array; an unnamed state is ``state<k>``, the k-th state of its task in
the compiler's order), its task index, its element type and its element count. The plan is a
list of (old offset, new offset, size) copies that a target applies between two ticks.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from .compiler.layout import ROLE_STATE
from .dtypes import slot_type
from .image import ImagePort
from .image import parse as parse_image
from .runtime.errors import TargetError


class StateNotCarried(UserWarning):
    """A state of the new program starts from its init after ``keep_state=True``, or one of
    the old program's states ends with it."""


@dataclass(frozen=True)
class KeptState:
    """What ``deploy(..., keep_state=True)`` carried: the states (port names) that go on with
    their old values, and those that did not, with the reason (a new state starts from its
    init; an old one the new program does not have ends)."""

    carried: tuple[str, ...]
    not_carried: dict[str, str]
    #: (old offset, new offset, size) in the data regions, adjacent runs merged
    copies: tuple[tuple[int, int, int], ...]


def _states(ports: Sequence[ImagePort]) -> dict[str, ImagePort | None]:
    """The state ports by name (None: a name two states share)."""
    found: dict[str, ImagePort | None] = {}
    for port in ports:
        if port.role == ROLE_STATE:
            found[port.name] = None if port.name in found else port
    return found


def plan(old_image: bytes, new_image: bytes) -> KeptState:
    """The states of ``old_image`` that ``new_image`` takes over, and the rest."""
    return plan_ports(parse_image(old_image).ports, parse_image(new_image).ports)


def plan_ports(old_ports: Sequence[ImagePort], new_ports: Sequence[ImagePort]) -> KeptState:
    """``plan`` from the two programs' port tables (a runner's GET_PORTS gives the old one)."""
    old, new = _states(old_ports), _states(new_ports)
    carried: list[str] = []
    not_carried: dict[str, str] = {}
    copies: list[tuple[int, int, int]] = []
    for name, port in new.items():
        was = old.get(name)
        if port is None or (name in old and was is None):
            not_carried[name] = "two states have this name: give each its own name="
        elif was is None:
            not_carried[name] = "new: starts from its init"
        elif (was.dtype, was.count) != (port.dtype, port.count):
            not_carried[name] = (f"type or size changed ({was.count} x type {was.dtype} -> "
                                 f"{port.count} x type {port.dtype}): starts from its init")
        else:
            carried.append(name)
            size = port.count * _size(port)
            last = copies[-1] if copies else None
            if last and last[0] + last[2] == was.offset and last[1] + last[2] == port.offset:
                copies[-1] = (last[0], last[1], last[2] + size)
            else:
                copies.append((was.offset, port.offset, size))
    for name in old:
        if name not in new:
            not_carried[name] = "dropped: the new program has no such state"
    return KeptState(tuple(carried), not_carried, tuple(copies))


def _size(port: ImagePort) -> int:
    return slot_type(port.dtype).size


def report(kept: KeptState) -> KeptState:
    """Warn (StateNotCarried) about what did not carry over, and return ``kept``."""
    if kept.not_carried:
        lines = "; ".join(f"{n}: {why}" for n, why in sorted(kept.not_carried.items()))
        warnings.warn(f"keep_state: {len(kept.not_carried)} state(s) not carried ({lines}); "
                      f"name the signals to carry with name= (docs/guide signals page)",
                      StateNotCarried, stacklevel=3)
    return kept


def needs_running(running: bool, where: str, error: type[Exception] = TargetError) -> None:
    """keep_state needs a program to take the states from."""
    if not running:
        raise error(f"deploy(keep_state=True) on {where}: no program is loaded to take "
                          f"the states from; deploy without keep_state first")
