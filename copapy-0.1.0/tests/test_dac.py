"""The DAC channel kind (issue 28): one contract.h row, a cp.io factory, the runners' simulated
channels and the Zephyr driver. Here LocalTarget's simulation and a saved image; the serial
runners run tests/test_runner_suite.py's test_dac_output."""

from __future__ import annotations

from pathlib import Path

import pytest

import copapy as cp
from copapy._contract import IO_KIND_DIRECTIONS, IoDirection, IoKind
from copapy.io import KIND_NAMES, BindingError


def test_the_dac_is_a_contract_row_with_a_factory() -> None:
    assert IoKind.DAC == 5 and IO_KIND_DIRECTIONS[IoKind.DAC] == IoDirection.OUTPUT
    assert set(KIND_NAMES) == set(IoKind)  # every kind of contract.h has its cp.io factory
    for kind, name in KIND_NAMES.items():
        assert getattr(cp.io, name)(0).kind == kind
    dac = cp.io.DAC(3, safe=0.25)
    assert (dac.kind, dac.channel, dac.direction, dac.safe) == (IoKind.DAC, 3, "out", 0.25)
    assert repr(dac) == "cp.io.DAC(3, safe=0.25)" and repr(cp.io.DAC(0)) == "cp.io.DAC(0)"


@pytest.mark.parametrize("safe", [-0.1, 1.5, float("nan"), "0.5"])
def test_a_dac_safe_level_outside_full_scale_is_refused(safe: object) -> None:
    with pytest.raises(ValueError, match=r"a DAC's safe level must be in 0\.\.1"):
        cp.io.DAC(0, safe=safe)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"channel must be an int in 0\.\.255"):
        cp.io.DAC(256)


def test_local_target_simulates_a_dac_output() -> None:
    level = cp.value(0.0, name="level")
    out = level * 0.5
    tg = cp.LocalTarget(tick=1e-3)
    with pytest.raises(BindingError, match=r"cp\.io\.DAC\(1\) is an output channel, but the "
                                           r"value is an input"):
        tg.bind(level, cp.io.DAC(1))
    tg.bind(out, cp.io.DAC(1, safe=0.25))
    with pytest.raises(BindingError, match=r"DAC\(1\) is already driven .*DAC\(1, safe=0.25\)"):
        tg.bind(out + 1.0, cp.io.DAC(1))
    echo = cp.value(0.0, name="echo")  # a simulated plant reads the DAC
    seen = echo * 3.0
    tg.bind(echo, cp.io.plant(cp.io.DAC(1)))
    tg.deploy(cp.Task(out, period=1e-3), cp.Task(seen, period=1e-3, name="plant"))
    assert tg.io_value(cp.io.DAC(1)) == 0.0
    for x in (0.6, 1.4, 0.1):
        tg.write(level, x)
        tg.step(0.002)
        assert tg.io_value(cp.io.DAC(1)) == pytest.approx(x * 0.5)
    tg.step(0.002)
    assert tg.read(seen) == pytest.approx(0.15)  # the plant read what the controller drove
    with pytest.raises(cp.TargetError, match=r"driven by the program.*tg\.io_value"):
        tg.set_io(cp.io.DAC(1), 0.3)
    with pytest.raises(cp.TargetError, match=r"DAC\(2\): no value .* is bound to it"):
        tg.io_value(cp.io.DAC(2))


def test_a_saved_program_keeps_its_dac_binding(tmp_path: Path) -> None:
    level = cp.value(0.0, name="level")
    path = tmp_path / "dac.cpim"
    out = level * 2.0
    cp.save(path, cp.Task(out, period=1e-3), bindings=[(out, cp.io.DAC(7, safe=0.5))],
            arch="cortex-m7")
    (binding,) = cp.load(path).bindings
    assert binding.direction == "output" and binding.channel == cp.io.DAC(7, safe=0.5)
