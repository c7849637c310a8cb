"""The places a program runs give the same bits: random array programs (element-wise math,
reductions, views, products, sorting) on edge inputs (±0, subnormals, the float32 limits,
±inf, NaN) compiled for LocalTarget, called through ``@cp.jit``, saved with ``cp.save`` and
loaded back into a LocalTarget by port names, and deployed as a task on the host runner
(copapy-runner over a pty); and the errors a saved program's names give."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph.traverse import live_nodes
from copapy.serial_target import SerialTarget

from .support.runners import host_runner

UNARY: dict[str, Callable[[Any], Any]] = {
    "sin": np.sin, "exp": np.exp, "sqrt": np.sqrt, "abs": np.abs, "log": np.log,
    "tanh": np.tanh, "floor": np.floor, "arctan": np.arctan, "square": lambda a: a * a,
    "sum": np.sum, "max": np.max, "mean": np.mean, "cumsum": np.cumsum, "sort": np.sort,
    "transpose": np.transpose, "norm": np.linalg.norm, "clip": lambda a: np.clip(a, -1.0, 2.0),
    "reverse": lambda a: a[::-1] * 2.0,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
    "where": lambda a, b: np.where(a > b, a, b * 0.5), "arctan2": np.arctan2,
    "hypot": np.hypot, "mod": np.mod, "matmul": np.matmul, "dot": np.dot,
}
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1e-30, 1e30, np.inf, -np.inf, np.nan, 1e-45,
         3.4e38, 0.1]
SHAPES = [(4,), (3,), (2, 3), (3, 3), (1,), (2, 2, 2)]

Steps = list[tuple[str, int, int]]


def interpret(steps: Steps, args: list[Any]) -> list[Any]:
    """Each step appends op(values[i], values[j]); an op whose shapes do not fit is skipped
    (it appends its first operand), the same way for traced and NumPy operands."""
    values = list(args)
    for op, i, j in steps:
        a, b = values[i], values[j]
        try:
            values.append(UNARY[op](a) if op in UNARY else BINARY[op](a, b))
        except (ValueError, TypeError):  # shapes that do not fit: NumPy's and copapy's errors
            values.append(a)
    return values


@st.composite
def programs(draw: Any) -> tuple[str, list[tuple[int, ...]], Steps, list[int]]:
    dtype = draw(st.sampled_from(["float32", "float64"]))
    shapes = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
    steps: Steps = []
    for k in range(draw(st.integers(1, 6))):
        n = len(shapes) + k
        steps.append((draw(st.sampled_from(sorted(UNARY) + sorted(BINARY))),
                      draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))))
    outs = sorted(set(draw(st.lists(st.integers(len(shapes), len(shapes) + len(steps) - 1),
                                    min_size=1, max_size=2))))
    return dtype, shapes, steps, outs


def edge_arrays(draw: Any, dtype: str, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    elements = st.one_of(st.sampled_from(EDGES), st.floats(-3.0, 3.0))
    return [np.array(draw(st.lists(elements, min_size=int(np.prod(s)),
                                   max_size=int(np.prod(s)))), dtype=dtype).reshape(s)
            for s in shapes]


def same_bits(a: Any, b: Any) -> bool:
    """The same type, shape and bits; NaN equal to NaN (payloads are not part of copapy's
    contract, docs/semantics.md)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        return bool((nan == np.isnan(y)).all() and x[~nan].tobytes() == y[~nan].tobytes())
    return x.tobytes() == y.tobytes()


def traced(dtype: str, shapes: list[tuple[int, ...]], steps: Steps, outs: list[int]
           ) -> tuple[list[Any], list[Any]] | None:
    """(inputs, outputs) of the program traced, None if an output is an input itself or two
    outputs share a value."""
    kind = cp.float32 if dtype == "float32" else cp.float64
    inputs = [cp.value(np.zeros(s, dtype), kind, name=f"a{k}") for k, s in enumerate(shapes)]
    values = interpret(steps, inputs)
    outputs = [values[o] for o in outs]
    leaves = {n for x in inputs for n in x.nodes()}
    if any(n in leaves for o in outputs for n in o.nodes()):
        return None  # a task output may not be an input (CompileError), nor a saved name
    nodes = [n for o in outputs for n in o.nodes()]
    if len(set(nodes)) < len(nodes):
        return None  # one value under two names is an error of cp.save
    return inputs, outputs


def local(inputs: list[Any], outputs: list[Any], args: list[np.ndarray]) -> list[Any]:
    tg = cp.LocalTarget()
    tg.compile(*outputs)
    for x, a in zip(inputs, args, strict=True):
        tg.write(x, a)  # an input the program does not use is kept aside (docs/decisions)
    tg.run()
    return [tg.read(o) for o in outputs]


Program = tuple[str, list[tuple[int, ...]], Steps, list[int]]


def prepared(program: Program, data: st.DataObject
             ) -> tuple[list[Any], list[Any], list[np.ndarray], list[Any]] | None:
    """(inputs, outputs, edge arguments, LocalTarget's results), None if an output is an
    input itself."""
    dtype, shapes, steps, outs = program
    found = traced(dtype, shapes, steps, outs)
    if found is None:
        return None
    inputs, outputs = found
    args = edge_arrays(data.draw, dtype, shapes)
    return inputs, outputs, args, local(inputs, outputs, args)


def read_inputs(inputs: list[Any], outputs: list[Any]) -> list[int]:
    """The places of the inputs the program reads (a saved program has ports for those)."""
    live = set(live_nodes([n for o in outputs for n in o.nodes()]))
    return [k for k, x in enumerate(inputs) if all(n in live for n in x.nodes())]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs(), data=st.data())
def test_local_target_jit_and_saved_program_give_the_same_bits(
        program: Program, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory) -> None:
    case = prepared(program, data)
    if case is None:
        return
    inputs, outputs, args, want = case
    _, _, steps, outs = program

    def f(*xs: Any) -> Any:
        values = interpret(steps, list(xs))
        return tuple(values[o] for o in outs)

    got = cp.jit(f)(*args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert same_bits(g, w), (f"jit output {k}", g, w)

    path = tmp_path_factory.mktemp("saved") / "p.cpimg"
    used = {f"a{k}": inputs[k] for k in read_inputs(inputs, outputs)}
    cp.save(path, *outputs, names={**{f"out{k}": o for k, o in enumerate(outputs)}, **used})
    tg = cp.LocalTarget()
    tg.deploy(cp.load(path))
    for k, a in enumerate(args):
        if f"a{k}" in used:
            tg.write(f"a{k}", a)
    tg.run()
    for k, w in enumerate(want):
        g = tg.read(f"out{k}")
        assert same_bits(g, w), (f"saved output {k}", g, w)


@pytest.fixture(scope="module")
def runner() -> Iterator[SerialTarget]:
    with host_runner() as (pty, _proc), SerialTarget(pty, timeout=3.0) as tg:
        yield tg


@settings(max_examples=8, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(program=programs(), data=st.data())
def test_host_runner_gives_local_targets_bits(
        runner: SerialTarget, program: Program, data: st.DataObject) -> None:
    """A stateless task: whatever number of periods ran, its outputs are the function of the
    inputs written before the start."""
    case = prepared(program, data)
    if case is None:
        return
    inputs, outputs, args, want = case
    runner.deploy(cp.Task(*outputs, period=1e-3))
    runner.reset()
    for k in read_inputs(inputs, outputs):
        runner.write(inputs[k], args[k])
    runner.start()
    time.sleep(0.01)
    runner.stop()
    assert runner.stats()[0].runs > 0
    for k, (o, w) in enumerate(zip(outputs, want, strict=True)):
        g = runner.read(o)
        assert same_bits(g, w), (f"host runner output {k}", g, w)


def test_a_saved_array_that_is_partly_an_input_is_an_error(tmp_path: Path) -> None:
    """np.cumsum(v)[0] is v[0]: saving names={"c": np.cumsum(v)} renamed the input element
    v[0] to c[0], so neither "v" could be written nor "c" read in the loaded program (and
    c[0] was an input). Now save() says so; a value named twice has both names (an alias
    port of the same slot, docs/decisions/2026-12-05-leftovers.md; it was an error)."""
    v = cp.value(np.array([1.0, 2.0, 3.0]), name="v")
    c = np.cumsum(v)
    with pytest.raises(ValueError, match=r"names\['c'\]: element 0 is an input of the program"):
        cp.save(tmp_path / "c.cpimg", c, names={"c": c})
    cp.save(tmp_path / "ab.cpimg", c[1:], names={"a": c[1:], "b": c[1:]})
    tg = cp.LocalTarget()
    tg.deploy(cp.load(tmp_path / "ab.cpimg"))
    tg.write("v", np.array([1.0, 2.0, 4.0]))
    tg.run()
    assert tg.read("a").tolist() == tg.read("b").tolist() == [3.0, 7.0]
    # the computed elements by themselves save and load by name; the input keeps its name
    tail = c[1:]
    cp.save(tmp_path / "c.cpimg", tail, names={"tail": tail})
    tg = cp.LocalTarget()
    tg.deploy(cp.load(tmp_path / "c.cpimg"))
    tg.write("v", np.array([1.0, 2.0, 4.0]))
    tg.run()
    assert tg.read("tail").tolist() == [3.0, 7.0]


@pytest.mark.parametrize("packed", [False, True])
def test_a_saved_delay_of_an_array_keeps_its_name_and_shape(tmp_path: Path,
                                                            packed: bool) -> None:
    """A delay's output is its state leaf, which has an output port and a state port; the
    state's replaced the output's in save()'s description of the arrays, so names={"s": s}
    of a (2, 2) delay was not readable as "s" (unpacked) or read back flat (4,) (packed)."""
    u = cp.value(np.zeros((2, 2)), cp.float64, name="u", packed=packed)
    s = cp.delay(u * 1.5 + 1.0, init=np.full((2, 2), -1.0))
    f = cp.integrate(u)
    task = cp.Task(s, s * 2.0, f, period=1e-3)
    cp.save(tmp_path / "d.cpimg", task, names={"u": u, "s": s, "f": f})
    ref = cp.LocalTarget(tick=1e-3)
    ref.deploy(task)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.load(tmp_path / "d.cpimg"))
    value = np.array([[0.5, -2.0], [np.inf, 3.0]])
    for target, key in ((ref, u), (tg, "u")):
        target.write(key, value)  # type: ignore[arg-type]
        target.step(3e-3)
    for name, v in (("s", s), ("f", f)):
        assert same_bits(tg.read(name), ref.read(v)), name
    assert tg.read("s").shape == (2, 2)
