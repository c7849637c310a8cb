"""names= never renames an input (docs/decisions/2026-12-05-leftovers.md): a name given to a
value that is already a named input (``x * 1.0`` simplifies to ``x``) or that an earlier
entry named is a second port of the same slot, and both names read and write it, on a
LocalTarget and after cp.save / cp.load. Earlier ``names={"y": x * 1.0}`` renamed ``x``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.saved import build


def program() -> tuple[cp.Task, dict[str, object]]:
    x = cp.value(2.0, name="x")
    k = cp.value(3.0, name="k")
    return cp.Task(x * k, period=1e-3, name="t"), {"y": x * 1.0, "prod": x * k, "k2": k}


@given(a=st.floats(-1e3, 1e3, width=32), b=st.floats(-1e3, 1e3, width=32))
@settings(max_examples=20, deadline=None)
def test_an_output_name_for_an_input_is_an_alias(a: float, b: float) -> None:
    task, names = program()
    prog = build(task, names=names)
    assert {"x", "y", "k", "k2", "prod"} <= set(prog.names())
    assert prog.port("y").offset == prog.port("x").offset
    assert prog.port("y").role == prog.port("x").role == "input"
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(prog)
    tg.write("x", a)
    tg.step(1e-3)
    assert tg.read("y") == tg.read("x") == np.float32(a)
    assert tg.read("prod") == np.float32(a) * np.float32(3.0)
    tg.write("y", b)
    tg.write("k2", 2.0)
    tg.step(1e-3)
    assert tg.read("x") == np.float32(b) and tg.read("k") == 2.0
    assert tg.read("prod") == np.float32(b) * np.float32(2.0)


def test_aliases_survive_save_and_load(tmp_path: Path) -> None:
    task, names = program()
    path = tmp_path / "p.cpimg"
    saved = cp.save(path, task, names=names)
    loaded = cp.load(path)
    assert loaded.image == saved.image
    assert [(p.name, p.offset, p.role) for p in loaded.ports] == [
        (p.name, p.offset, p.role) for p in saved.ports]
    assert loaded.port("y").offset == loaded.port("x").offset


def test_an_array_named_twice_reads_whole_by_both_names() -> None:
    v = cp.value(np.array([1.0, 2.0, 3.0], dtype=np.float32), name="v")
    prog = build(cp.Task(v * 2.0, period=1e-3), names={"w": v * 1.0, "twice": v * 2.0})
    assert prog.arrays["w"].shape == prog.arrays["v"].shape == (3,)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(prog)
    tg.write("w", np.array([4.0, 5.0, 6.0]))
    tg.step(1e-3)
    np.testing.assert_array_equal(tg.read("v"), [4.0, 5.0, 6.0])
    np.testing.assert_array_equal(tg.read("twice"), [8.0, 10.0, 12.0])


def test_an_alias_that_takes_another_ports_name_is_refused() -> None:
    x = cp.value(1.0, name="x")
    k = cp.value(1.0, name="k")
    with pytest.raises(ValueError, match=r"names\['k'\]: the program has another port"):
        build(cp.Task(x + k, period=1e-3), names={"k": x * 1.0})


def test_a_sweep_sets_an_input_by_its_alias() -> None:
    task, names = program()
    r = cp.sweep([task], {"y": [1.0, -2.0]}, 0.002, record=["prod", "x"], names=names,
                 progress=False)
    assert r["prod"][:, -1].tolist() == [3.0, -6.0] and r["x"][:, -1].tolist() == [1.0, -2.0]
