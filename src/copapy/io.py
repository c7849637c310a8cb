"""I/O channels a value can be bound to (``tg.bind(value, cp.io.PWM(0))``).

The same descriptors are used by LocalTarget (simulated channels, recorded and drivable) and
by SerialTarget (the runner's hardware channels).

Every output channel has a **safe value** (``cp.io.PWM(0, safe=0.0)``; default 0, GPIO low),
stored in the program image. A runner drives it whenever the program does not: on STOP, on a
fault, on unload, when another program replaces it, and when the host link is silent longer
than a task's ``link_timeout`` (docs/realtime.md, "Faults and the safe state").
"""

from __future__ import annotations

from dataclasses import dataclass

GPIO_KIND, PWM_KIND, ENCODER_KIND, ADC_KIND = 1, 2, 3, 4


@dataclass(frozen=True)
class Channel:
    kind: int
    channel: int
    safe: float = 0.0  # outputs: the value in the safe state

    @property
    def kind_name(self) -> str:
        return {GPIO_KIND: "GPIO", PWM_KIND: "PWM", ENCODER_KIND: "Encoder", ADC_KIND: "ADC"}[
            self.kind]

    def __repr__(self) -> str:
        extra = f", safe={self.safe!r}" if self.safe else ""
        return f"cp.io.{self.kind_name}({self.channel}{extra})"


def _check(channel: int) -> int:
    if not isinstance(channel, int) or not 0 <= channel < 256:
        raise ValueError(f"channel must be an int in 0..255, got {channel!r}")
    return channel


def GPIO(pin: int, direction: str = "in", safe: bool | int = False) -> Channel:
    """A digital pin (0/1); direction "in" or "out" (checked when bound). ``safe``: the level
    of an output pin in the safe state (default low)."""
    if direction not in ("in", "out"):
        raise ValueError(f"GPIO direction must be 'in' or 'out', not {direction!r}")
    if safe not in (0, 1):
        raise ValueError(f"a GPIO's safe level is 0/False or 1/True, not {safe!r}")
    if safe and direction != "out":
        raise ValueError("only an output pin (direction='out') has a safe level")
    return Channel(GPIO_KIND, _check(pin), float(bool(safe)))


def PWM(channel: int, safe: float = 0.0) -> Channel:
    """A PWM output; the value is the duty cycle 0..1. ``safe``: the duty cycle in the safe
    state (default 0)."""
    if not isinstance(safe, int | float) or not 0.0 <= safe <= 1.0:
        raise ValueError(f"a PWM's safe duty cycle must be in 0..1, not {safe!r}")
    return Channel(PWM_KIND, _check(channel), float(safe))


def Encoder(channel: int) -> Channel:
    """A quadrature encoder input, in counts."""
    return Channel(ENCODER_KIND, _check(channel))


def ADC(channel: int) -> Channel:
    """An analog input."""
    return Channel(ADC_KIND, _check(channel))
