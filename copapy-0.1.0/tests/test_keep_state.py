"""Online change (issue 30, item 5): deploy(keep_state=True) carries the signal states whose
name, task, type and size match into the new program between two ticks, so a PID's gain
change does not bump its plant; without it the plant restarts (it does bump). On LocalTarget
and on the host runner, with the runner's KEEP list checked before the swap."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.image import PORT, ImageFormatError, parse_ports_block
from copapy.image import parse as parse_image
from copapy.keep_state import StateNotCarried, plan
from copapy.saved import build
from copapy.serial import protocol as p
from copapy.serial_target import SerialTarget

from .support.runners import host_runner

PERIOD = 1e-3


def pid_loop(kp: float, ki: float, low: bool = False) -> tuple[cp.Task, dict[str, Any]]:
    """A PI controller (the integrator holds ki·∫e, so a gain change at e = 0 is bumpless)
    on a first-order plant y' = -y + u, setpoint 1; ``low``: also the lowest y since this
    program started (an unnamed state only the new program has)."""
    v: dict[str, Any] = {}

    def plant(y: Any) -> Any:
        e = 1.0 - y
        v["integral"] = cp.integrate(ki * e, name="integral")
        v["u"] = kp * e + v["integral"]
        return y + (v["u"] - y) * 0.01

    v["y"] = cp.feedback(plant, init=0.0, name="plant")
    outputs = [v["y"], v["integral"], v["u"]]
    if low:
        v["low"] = cp.feedback(lambda m: cp.min(m, v["y"]), init=10.0)
        outputs.append(v["low"])
    return cp.Task(*outputs, period=PERIOD), v


def test_plan_matches_names_types_and_sizes() -> None:
    """The plan carries same-named states of the same type and size, merges adjacent
    ranges, and names every other state with the reason."""
    def image(*signals: Any) -> bytes:
        return build(cp.Task(*signals, period=PERIOD)).image

    x = cp.value(1.0)
    old = image(cp.integrate(x, name="a"), cp.integrate(cp.vector([x, x]), name="v"),
                cp.delay(x, name="gone"), cp.integrate(x, name="n"))
    new = image(cp.integrate(2 * x, name="a"), cp.integrate(cp.vector([x, x]), name="v"),
                cp.integrate(cp.vector([x, x], packed=True), name="n"),
                cp.delay(x, name="fresh"))
    kept = plan(old, new)
    assert set(kept.carried) == {"a@task0", "v[0]@task0", "v[1]@task0"}
    assert kept.not_carried["gone@task0"].startswith("dropped")
    assert kept.not_carried["fresh@task0"].startswith("new")
    assert kept.not_carried["n@task0"].startswith("type or size changed (1 x")
    assert sum(size for _, _, size in kept.copies) == 12


NAMES = ("a", "b", "c", "d")


@settings(max_examples=25, deadline=None)
@given(old=st.dictionaries(st.sampled_from(NAMES), st.sampled_from((1, 2, 3)), min_size=1),
       new=st.dictionaries(st.sampled_from(NAMES), st.sampled_from((1, 2, 3)), min_size=1))
def test_plan_is_the_matching_rule(old: dict[str, int], new: dict[str, int]) -> None:
    """For any two programs of named packed states (name -> element count): exactly the
    names both have with the same count are carried, with their bytes; every other state of
    either program is listed."""
    def image(states: dict[str, int]) -> bytes:
        x = cp.value(1.0)
        signals = [cp.integrate(cp.vector([x] * n, packed=True), name=k)
                   for k, n in states.items()]
        return build(cp.Task(*signals, period=PERIOD)).image

    kept = plan(image(old), image(new))
    same = {k for k in old.keys() & new.keys() if old[k] == new[k]}
    assert set(kept.carried) == {f"{k}@task0" for k in same}
    assert sum(size for _, _, size in kept.copies) == 4 * sum(new[k] for k in same)
    assert set(kept.not_carried) == {f"{k}@task0" for k in (old.keys() | new.keys()) - same}


def test_pid_gain_change_on_local_target() -> None:
    """keep_state=True: the plant and the integrator go on (no step in y, the new gains act
    from the next tick); keep_state=False: every state restarts from its init (y steps to 0)."""
    for keep in (True, False):
        tg = cp.LocalTarget(tick=PERIOD)
        task, v = pid_loop(2.0, 20.0)
        tg.deploy(task)
        tg.step(2.0)
        y_before = tg.read(v["y"])
        assert abs(y_before - 1.0) < 1e-3
        task2, v2 = pid_loop(4.0, 40.0, low=True)
        if keep:
            with pytest.warns(StateNotCarried, match=r"new: starts from its init"):
                kept = tg.deploy(task2, keep_state=True)
            assert kept is not None and set(kept.carried) == {"plant@task0", "integral@task0"}
        else:
            assert tg.deploy(task2) is None
        tg.step(0.5)
        low = tg.read(v2["low"])
        if keep:
            assert abs(low - y_before) < 1e-4  # bumpless: never left the setpoint
            assert abs(tg.read(v2["y"]) - 1.0) < 1e-4
        else:
            assert low < 0.05  # restarted from y = 0


def test_keep_state_needs_a_program() -> None:
    tg = cp.LocalTarget(tick=PERIOD)
    with pytest.raises(cp.local_target.TargetError, match="no program is loaded"):
        tg.deploy(pid_loop(1.0, 1.0)[0], keep_state=True)


def gain_change(tg: SerialTarget, keep: bool, settle: float = 30.0) -> None:
    """On a runner: settle the loop, change its gains with an atomic replace, and check the
    lowest y since the swap: at the setpoint with keep_state, near 0 without."""
    task, v = pid_loop(2.0, 20.0)
    tg.deploy(task, start=True, check=False)
    tg.reset()
    tg.start()
    deadline = time.monotonic() + settle
    while abs(tg.read(v["y"]) - 1.0) > 1e-4:  # wait for the loop to settle
        assert time.monotonic() < deadline, tg.read(v["y"])
        time.sleep(0.1)
    y_before = tg.read(v["y"])
    task2, v2 = pid_loop(4.0, 40.0, low=True)
    if keep:
        with pytest.warns(StateNotCarried):
            kept = tg.deploy(task2, start=True, check=False, keep_state=True)
        assert kept is not None and set(kept.carried) == {"plant@task0", "integral@task0"}
    else:
        tg.deploy(task2, start=True, check=False)
    assert tg.info().state == "running"
    time.sleep(0.1)
    low = tg.read(v2["low"])
    if keep:
        assert abs(low - y_before) < 1e-4
    else:
        assert low < 0.05
    tg.stop()


def test_pid_gain_change_on_the_host_runner() -> None:
    """The same on the host runner: the runner copies the states at the swap (LOAD_COMMIT
    KEEP); without keep_state the plant restarts. (tests/test_runner_suite.py runs it on the
    firmware runners too.)"""
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=2.0) as tg:
        for keep in (True, False):
            gain_change(tg, keep)


def test_keep_state_from_another_session() -> None:
    """A second SerialTarget (another process, say) changes the gains of the program the first
    one deployed: it takes the running program's states from the runner (GET_PORTS)."""
    with host_runner() as (pty, _proc):
        task, v = pid_loop(2.0, 20.0)
        with SerialTarget(pty, timeout=2.0) as first:
            first.deploy(task, start=True, check=False)
            deadline = time.monotonic() + 30
            while abs(first.read(v["y"]) - 1.0) > 1e-4:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        task2, v2 = pid_loop(4.0, 40.0, low=True)
        with SerialTarget(pty, timeout=2.0) as second, pytest.warns(StateNotCarried):
            kept = second.deploy(task2, start=True, check=False, keep_state=True)
            assert kept is not None and set(kept.carried) == {"plant@task0", "integral@task0"}
            assert kept.not_carried == {"state2@task0": "new: starts from its init"}
            time.sleep(0.05)
            assert abs(second.read(v2["low"]) - 1.0) < 1e-4
            second.stop()


def test_port_blocks_parse_as_images_do() -> None:
    """parse_ports_block reads GET_PORTS's block as parse reads an image's ports; a block of
    another length or a name outside the strings is an ImageFormatError."""
    image = build(pid_loop(1.0, 2.0, low=True)[0]).image
    img = parse_image(image)
    names = b"".join(p.name.encode() + b"\0" for p in img.ports)
    entries, at = [], 0
    for port in img.ports:
        entries.append(PORT.pack(at, port.offset, port.dtype, port.role, port.task, port.count))
        at += len(port.name) + 1
    block = struct.pack("<II", len(img.ports), len(names)) + b"".join(entries) + names
    assert parse_ports_block(block) == img.ports
    for bad, match in ((block[:-1], "got"), (block[:4], "at least 8"),
                       (struct.pack("<II", 1, 2) + PORT.pack(5, 0, 1, 3, 0, 1) + b"x\0",
                        "outside the strings")):
        with pytest.raises(ImageFormatError, match=match):
            parse_ports_block(bad)


def test_runner_refuses_bad_keep_lists_and_keeps_the_old_program() -> None:
    """A KEEP entry outside either data region, of size 0, a list whose length disagrees
    with its count, or KEEP without START: refused before the swap, the old program runs on."""
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=2.0) as tg:
        counter = cp.feedback(lambda n: n + 1, init=0, name="n")
        tg.deploy(cp.Task(counter, period=PERIOD), start=True, check=False)
        old_crc = tg.info().image_crc
        other = cp.feedback(lambda n: n + 2, init=0, name="n")
        image = build(cp.Task(other, period=PERIOD)).image
        crc = p.image_crc(image)
        for keep, match in (([(1 << 20, 0, 4)], "KEEP entry 0"),
                            ([(0, 1 << 20, 4)], "KEEP entry 0"),
                            ([(0, 0, 4), (0, 0, 0)], "KEEP entry 1")):
            with pytest.raises(p.ProtocolError, match=match) as err:
                tg._upload(image, crc, True, keep)
            assert err.value.name == "OUT_OF_RANGE"
            assert tg.info().image_crc == old_crc and tg.info().state == "running"
        for payload, name in ((bytes([3]) + struct.pack("<H", 2) + bytes(12), "BAD_PAYLOAD"),
                              (bytes([2]) + struct.pack("<H", 0), "BAD_STATE"),
                              (bytes([4]), "BAD_PAYLOAD")):
            tg._link.request(p.LOAD_BEGIN, struct.pack("<II", len(image), crc))
            tg._link.request(p.LOAD_CHUNK, struct.pack("<I", 0) + image)
            with pytest.raises(p.ProtocolError) as err:
                tg._link.request(p.LOAD_COMMIT, payload)
            assert err.value.name == name
            assert tg.info().image_crc == old_crc and tg.info().state == "running"
        before = tg.read(counter)
        time.sleep(0.05)
        assert tg.read(counter) > before  # still ticking
        with pytest.raises(cp.SerialTargetError, match="start=True"):
            tg.deploy(cp.Task(other, period=PERIOD), keep_state=True, check=False)
        tg.stop()
