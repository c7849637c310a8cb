"""I/O channels a value can be bound to (``tg.bind(value, cp.io.PWM(0))``).

The same descriptors are used by LocalTarget (simulated channels, recorded and drivable) and
by SerialTarget (the runner's hardware channels).

Every output channel has a **safe value** (``cp.io.PWM(0, safe=0.0)``; default 0, GPIO low),
stored in the program image. A runner drives it whenever the program does not: on STOP, on a
fault, on unload, when another program replaces it, and when the host link is silent longer
than a task's ``link_timeout`` (docs/realtime.md, "Faults and the safe state").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ._contract import IoDirection, IoKind

#: each kind's factory (``cp.io.<name>``); the kinds and their codes are contract.h's
KIND_NAMES: dict[int, str] = {IoKind.GPIO: "GPIO", IoKind.PWM: "PWM", IoKind.ENCODER: "Encoder",
                              IoKind.ADC: "ADC", IoKind.DAC: "DAC"}


@dataclass(frozen=True)
class Channel:
    kind: int
    channel: int
    #: "in": the runner reads it into a cp.value input; "out": a task output drives it
    direction: str = "in"
    #: the simulated plant's side of the channel (cp.io.plant): in LocalTarget only
    plant: bool = False
    #: outputs: the value in the safe state
    safe: float = 0.0
    #: the values the channel delivers, when declared (ADC, Encoder; checks.channel_range)
    span: tuple[float, float] | None = None

    @property
    def kind_name(self) -> str:
        return KIND_NAMES[self.kind]

    @property
    def is_output(self) -> bool:
        return self.direction == "out"

    def __repr__(self) -> str:
        if self.plant:
            return f"cp.io.plant({replace(self, plant=False, direction=_FLIP[self.direction])!r})"
        extra = f", safe={self.safe!r}" if self.safe else ""
        extra += f", span={self.span!r}" if self.span is not None else ""
        if self.kind == IoKind.GPIO:
            return f"cp.io.GPIO({self.channel}, {self.direction!r}{extra})"
        return f"cp.io.{self.kind_name}({self.channel}{extra})"


_FLIP = {"in": "out", "out": "in"}


def _check(channel: int) -> int:
    if not isinstance(channel, int) or not 0 <= channel < 256:
        raise ValueError(f"channel must be an int in 0..255, got {channel!r}")
    return channel


def GPIO(pin: int, direction: str = "in", safe: bool | int = False) -> Channel:
    """A digital pin (0/1); direction "in" (read into an input) or "out" (driven by a task
    output), checked when bound. ``safe``: the level of an output pin in the safe state
    (default low)."""
    if direction not in ("in", "out"):
        raise ValueError(f"GPIO direction must be 'in' or 'out', not {direction!r}")
    if safe not in (0, 1):
        raise ValueError(f"a GPIO's safe level is 0/False or 1/True, not {safe!r}")
    if safe and direction != "out":
        raise ValueError("only an output pin (direction='out') has a safe level")
    return Channel(IoKind.GPIO, _check(pin), direction, safe=float(bool(safe)))


def _unit(safe: float, what: str) -> float:
    if not isinstance(safe, int | float) or not 0.0 <= safe <= 1.0:
        raise ValueError(f"{what} must be in 0..1, not {safe!r}")
    return float(safe)


def PWM(channel: int, safe: float = 0.0) -> Channel:
    """A PWM output; the value is the duty cycle 0..1. ``safe``: the duty cycle in the safe
    state (default 0)."""
    return Channel(IoKind.PWM, _check(channel), "out",
                   safe=_unit(safe, "a PWM's safe duty cycle"))


def DAC(channel: int, safe: float = 0.0) -> Channel:
    """An analog output; the value is the level 0..1 of full scale (as an ADC reads it).
    ``safe``: the level in the safe state (default 0)."""
    return Channel(IoKind.DAC, _check(channel), "out", safe=_unit(safe, "a DAC's safe level"))


def _span(span: tuple[float, float] | None) -> tuple[float, float] | None:
    if span is None:
        return None
    try:
        lo, hi = (float(v) for v in span)
    except (TypeError, ValueError):
        raise TypeError(f"span is (lo, hi), two numbers, got {span!r}") from None
    if not lo <= hi:
        raise ValueError(f"span=({lo}, {hi}): lo must be <= hi")
    return lo, hi


def Encoder(channel: int, span: tuple[float, float] | None = None) -> Channel:
    """A quadrature encoder input, in counts; ``span=(lo, hi)``: the counts the mechanism
    can reach (the range analysis, cp.check, takes it; default any int32)."""
    return Channel(IoKind.ENCODER, _check(channel), "in", span=_span(span))


def ADC(channel: int, span: tuple[float, float] | None = None) -> Channel:
    """An analog input, 0..1 of full scale; ``span=(lo, hi)``: the part of it the signal
    reaches (the range analysis, cp.check, takes it)."""
    return Channel(IoKind.ADC, _check(channel), "in", span=_span(span))


def plant(channel: Channel) -> Channel:
    """The simulated plant's side of a channel: a plant model reads what the controller
    drives (``plant(cp.io.PWM(0))`` is an input of the plant) and drives what the controller
    reads (``plant(cp.io.Encoder(0))`` is an output of the plant). For simulations
    (LocalTarget, the host runner's simulated channels); hardware rejects it at load."""
    if not isinstance(channel, Channel) or channel.plant:
        raise TypeError(f"cp.io.plant() takes a controller's channel (cp.io.PWM(0), ...), got "
                        f"{channel!r}")
    return replace(channel, direction=_FLIP[channel.direction], plant=True)


def image_channel(kind: int, channel: int, direction: int, safe: float) -> Channel:
    """The channel of an image's I/O binding (an IoDirection), or ValueError naming the field
    that no channel has (a file another writer made)."""
    if kind not in KIND_NAMES:
        raise ValueError(f"kind {kind} is not a channel kind ("
                         f"{', '.join(f'{k} {n}' for k, n in KIND_NAMES.items())})")
    if direction not in (IoDirection.INPUT, IoDirection.OUTPUT):
        raise ValueError(f"direction {direction} is neither {IoDirection.INPUT} (input) nor "
                         f"{IoDirection.OUTPUT} (output)")
    if not math.isfinite(safe):
        raise ValueError(f"the safe value {safe} is not a finite number")
    return Channel(kind, channel, "in" if direction == IoDirection.INPUT else "out",
                   safe=safe)


def checked_channel(channel: Any, what: str) -> Channel:
    """``channel`` if it is a cp.io channel, else TypeError naming ``what`` took it."""
    if not isinstance(channel, Channel):
        raise TypeError(f"{what}() takes a cp.io channel (cp.io.Encoder(0), ...), got "
                        f"{type(channel).__name__}")
    return channel


class BindingError(ValueError):
    """A value cannot be bound to a channel (wrong direction, channel already driven)."""


def check_binding(bindings: Mapping[Any, Channel], node: Any, is_input: bool,
                  channel: Channel) -> None:
    """BindingError unless ``channel`` may be bound to the value of ``node`` next to the
    existing ``bindings`` (node -> channel): inputs read "in" channels, computed values drive
    "out" channels, and each channel has one driver."""
    if not isinstance(channel, Channel):
        raise TypeError(f"bind() takes a cp.io channel (cp.io.PWM(0), ...), got "
                        f"{type(channel).__name__}")
    if is_input and channel.is_output:
        raise BindingError(f"{channel!r} is an output channel, but the value is an input "
                           f"(cp.value): inputs read channels such as cp.io.GPIO(pin, 'in'), "
                           f"cp.io.Encoder or cp.io.ADC; bind a computed value to drive "
                           f"{channel!r}")
    if not is_input and not channel.is_output:
        hint = (f"cp.io.GPIO({channel.channel}, 'out')" if channel.kind == IoKind.GPIO
                else "an output channel (cp.io.PWM, cp.io.DAC, cp.io.GPIO(pin, 'out'))")
        raise BindingError(f"{channel!r} is an input channel, but the value is computed by the "
                           f"program: a computed value drives {hint}")
    for other, existing in bindings.items():
        if other is node:
            continue
        if (channel.is_output and existing.is_output
                and (existing.kind, existing.channel) == (channel.kind, channel.channel)):
            raise BindingError(f"{channel!r} is already driven by another value ({existing!r}): "
                               f"a channel has one driver (tg.unbind(value) removes a binding, "
                               f"tg.unbind() all of them; or compute one value)")
