"""I/O channels a value can be bound to (``tg.bind(value, cp.io.PWM(0))``).

The same descriptors are used by LocalTarget (simulated channels, recorded and drivable) and
by SerialTarget (the runner's hardware channels).
"""

from __future__ import annotations

from dataclasses import dataclass

GPIO_KIND, PWM_KIND, ENCODER_KIND, ADC_KIND = 1, 2, 3, 4


@dataclass(frozen=True)
class Channel:
    kind: int
    channel: int

    @property
    def kind_name(self) -> str:
        return {GPIO_KIND: "GPIO", PWM_KIND: "PWM", ENCODER_KIND: "Encoder", ADC_KIND: "ADC"}[
            self.kind]

    def __repr__(self) -> str:
        return f"cp.io.{self.kind_name}({self.channel})"


def _check(channel: int) -> int:
    if not isinstance(channel, int) or not 0 <= channel < 256:
        raise ValueError(f"channel must be an int in 0..255, got {channel!r}")
    return channel


def GPIO(pin: int, direction: str = "in") -> Channel:
    """A digital pin (0/1); direction "in" or "out" (checked when bound)."""
    if direction not in ("in", "out"):
        raise ValueError(f"GPIO direction must be 'in' or 'out', not {direction!r}")
    return Channel(GPIO_KIND, _check(pin))


def PWM(channel: int) -> Channel:
    """A PWM output; the value is the duty cycle 0..1."""
    return Channel(PWM_KIND, _check(channel))


def Encoder(channel: int) -> Channel:
    """A quadrature encoder input, in counts."""
    return Channel(ENCODER_KIND, _check(channel))


def ADC(channel: int) -> Channel:
    """An analog input."""
    return Channel(ADC_KIND, _check(channel))
