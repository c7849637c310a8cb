"""Array shapes survive save and load: a named input or signal state of any shape (vector,
matrix, the four elements of a quaternion; packed or unpacked) and the outputs ``names=``
names are described with their shape, and a loaded program reads and writes them whole as
arrays of that shape (an unpacked (2, 3) input saved by ``tg.save`` once loaded back as (6,)).
Not yet: a periodic task's unpacked state (its elements are ``name[k]@taskN``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp

SHAPES = st.one_of(st.tuples(st.integers(1, 5)),
                   st.tuples(st.integers(1, 4), st.integers(1, 4)),
                   st.just((4,)))


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-4, 4, shape).astype(np.float32)


def _check_loaded(path: Path, shapes: dict[str, tuple[int, ...]], x: np.ndarray) -> None:
    """The loaded program describes each array with its shape and runs on it: x written
    whole, y = 2 x + 1 + s read whole (s = cp.delay(x) is 0 in the first run, then x; the
    reference computed here in float32)."""
    prog = cp.load(path)
    assert {n: prog.arrays[n].shape for n in shapes} == shapes
    tg = cp.LocalTarget()
    tg.deploy(prog)
    tg.write("x", x)
    tg.run()
    assert tg.read("x").shape == x.shape
    np.testing.assert_array_equal(tg.read("x"), x)
    if "y" in shapes:
        got = tg.read("y")
        assert got.shape == x.shape
        np.testing.assert_array_equal(got, x * np.float32(2) + np.float32(1))
    got = tg.read("s")
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, x)


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, packed=st.booleans(), seed=st.integers(0, 2**16))
def test_tg_save_keeps_the_shape_of_a_named_input(tmp_path_factory: object, shape: tuple[int, ...],
                                                  packed: bool, seed: int) -> None:
    path = tmp_path_factory.mktemp("tg") / "p.cpimg"  # type: ignore[attr-defined]
    x = cp.value(_data(shape, seed), name="x", packed=packed)
    tg = cp.LocalTarget()
    tg.compile(x * 2.0 + 1.0 + cp.delay(x, name="s"))
    tg.save(str(path))
    _check_loaded(path, {"x": shape, "s": shape}, _data(shape, seed + 1))


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, packed=st.booleans(), out_packed=st.booleans(), seed=st.integers(0, 2**16))
def test_cp_save_keeps_the_shapes_of_inputs_and_named_outputs(
        tmp_path_factory: object, shape: tuple[int, ...], packed: bool, out_packed: bool,
        seed: int) -> None:
    path = tmp_path_factory.mktemp("cp") / "p.cpimg"  # type: ignore[attr-defined]
    x = cp.value(_data(shape, seed), name="x", packed=packed)
    y = x * 2.0 + 1.0 + cp.delay(x, name="s")
    y = y.to_packed() if out_packed else y.to_unpacked()
    cp.save(path, y, names={"y": y})  # x and s by their own names, not through names=
    _check_loaded(path, {"x": shape, "s": shape, "y": shape}, _data(shape, seed + 1))


def test_an_unnamed_unpacked_input_is_not_an_array(tmp_path: Path) -> None:
    """Only named arrays are described: an unnamed one's elements are inputK ports."""
    x = cp.value(np.zeros((2, 3), np.float32), packed=False)
    tg = cp.LocalTarget()
    tg.compile(x * 2.0)
    prog = tg.save(str(tmp_path / "p.cpimg"))
    assert not any(a.role == "input" for a in prog.arrays.values())


def test_a_packed_task_state_keeps_its_shape(tmp_path: Path) -> None:
    """A periodic task's packed state ``name@taskN`` is one port: described with its shape."""
    x = cp.value(np.zeros((2, 3), np.float32), name="x", packed=True)
    prog = cp.save(tmp_path / "t.cpimg", cp.Task(x * 2.0 + cp.delay(x, name="s"), period=1e-3))
    loaded = cp.load(tmp_path / "t.cpimg")
    assert loaded.arrays["s@task0"].shape == (2, 3) == prog.arrays["s@task0"].shape
    assert loaded.arrays["s@task0"].role == "state"
