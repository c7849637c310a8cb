"""The same graph gives the same image bytes, whatever else the process traced before and
whatever the hash seed (SerialTarget.attach() recognises a running program by its CRC)."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.compiler.program import compile_program
from copapy.graph.ops import REGISTRY

CONSTANTS = [0.5, 2.0, 3.0, 5.0, 0.1, -1.25]
BINARY = sorted(n for n, s in REGISTRY.items()
                if s.arity == 2 and s.commutative and s.operands in ("num", "float"))


def pid_image() -> bytes:
    setpoint, position = cp.value(1.0, name="setpoint"), cp.value(0.0, name="position")
    error = setpoint - position
    control = 2.0 * error + 5.0 * cp.integrate(error) + 0.1 * cp.rate(error)
    control = control + position * 3.0 + 3.0 * setpoint
    smoothed = cp.feedback(lambda prev: prev + 0.2 * (control - prev), init=0.0)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(smoothed, period=1e-3), cp.Task(position * 0.5 + 2.0 * setpoint, period=2e-3))
    return tg.image


def random_image(seed: int) -> bytes:
    """A random graph of commutative operations over fresh inputs and shared constants."""
    rnd = random.Random(seed)
    pool: list[Any] = [cp.value(float(k)) for k in range(3)]
    for _ in range(30):
        a = rnd.choice(pool)
        b = rnd.choice(pool) if rnd.random() < 0.6 else rnd.choice(CONSTANTS)
        if rnd.random() < 0.5:
            a, b = b, a
        if not isinstance(a, cp.Value) and not isinstance(b, cp.Value):
            continue
        pool.append(_apply(rnd.choice(BINARY), a, b))
    tg = cp.LocalTarget()
    tg.compile(*pool[-4:])
    return tg.image


def _apply(name: str, a: Any, b: Any) -> Any:
    from copapy.value import _op

    return _op(name, a, b)


def pollute() -> list[Any]:
    """Nodes kept alive that an earlier trace left behind: the same constants, products and
    sums over other inputs, in the opposite creation order."""
    kept: list[Any] = []
    for c in reversed(CONSTANTS):
        x = cp.value(c)
        kept += [x, c * x, x + c, cp.sin(x) * c, cp.constant(c)]
    return kept


def test_same_graph_same_image_after_other_traces() -> None:
    first_pid, first_random = pid_image(), [random_image(s) for s in range(8)]
    kept = pollute()
    assert pid_image() == first_pid
    assert [random_image(s) for s in range(8)] == first_random
    assert kept  # the polluting nodes stayed alive throughout


SCRIPT = """
import hashlib, sys
sys.path.insert(0, {tests!r})
import test_determinism as t
kept = t.pollute() if {pollute} else []
print(hashlib.sha256(t.pid_image() + b"".join(t.random_image(s) for s in range(4))).hexdigest())
"""


def test_same_image_in_every_process() -> None:
    tests = os.path.dirname(os.path.abspath(__file__))
    digests = set()
    for seed, polluted in [("1", False), ("2", True), ("12345", True), ("random", False)]:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=tests, pollute=polluted)],
                             capture_output=True, text=True, env=env, check=True, timeout=120)
        digests.add(out.stdout.strip())
    here = hashlib.sha256(pid_image() + b"".join(random_image(s) for s in range(4))).hexdigest()
    assert digests == {here}


# ---- property: no program's bytes depend on what was traced before -----------------------

#: float operations whose operands' order a rewrite may change (add, mul, max, min commute)
FLOAT_OPS = ("add", "sub", "mul", "max", "min", "hypot")
Steps = list[tuple[str, int, int]]


@st.composite
def steps_over(draw: st.DrawFn, pool: int, count: tuple[int, int]) -> Steps:
    """Operations, each over two of the values so far (pool values to start with)."""
    steps = []
    for k in range(draw(st.integers(*count))):
        steps.append((draw(st.sampled_from(FLOAT_OPS)), draw(st.integers(0, pool + k - 1)),
                      draw(st.integers(0, pool + k - 1))))
    return steps


@st.composite
def programs(draw: st.DrawFn) -> dict[str, Any]:
    """A small random graph, with a cp.fori_loop (a random body over two carries and two
    captures, optionally cp.grad inside it and a gradient through it) or without."""
    program: dict[str, Any] = {"outer": draw(steps_over(5, (1, 8)))}
    if draw(st.booleans()):
        program["loop"] = {"n": draw(st.integers(1, 5)), "body": draw(steps_over(4, (2, 8))),
                           "grad_in_body": draw(st.booleans()), "index": draw(st.booleans()),
                           "grad_through": draw(st.booleans())}
    return program


def _run_steps(steps: Steps, pool: list[Any]) -> list[Any]:
    values = list(pool)
    for name, i, j in steps:
        values.append(_apply(name, values[i], values[j]))
    return values


def program_image(program: dict[str, Any]) -> bytes:
    """The program traced anew (fresh inputs) and compiled for x86_64: its image bytes."""
    inputs = [cp.value(0.5 + k) for k in range(3)]
    values = _run_steps(program["outer"], [*inputs, cp.constant(2.0), cp.constant(0.25)])
    outs = values[-2:]
    spec = program.get("loop")
    if spec is not None:
        captures = values[-3:-1]

        def body(i: Any, s: tuple[Any, Any]) -> tuple[Any, Any]:
            last = _run_steps(spec["body"], [*s, *captures])[-2:]
            if spec["grad_in_body"]:
                g = cp.grad(last[0] * last[1], list(s))
                last = [s[0] - 0.125 * g[0], s[1] - 0.125 * g[1]]
            if spec["index"]:
                last[0] = last[0] + cp.cast(i, cp.float32)
            return cp.clamp(last[0], -4.0, 4.0), cp.clamp(last[1], -4.0, 4.0)

        result = cp.fori_loop(spec["n"], body, (inputs[0], values[-1]), index=True)
        outs = [*outs, *result]
        if spec["grad_through"]:
            outs += cp.grad(result[0] * result[1] + result[1], [inputs[0], inputs[1]])
    return compile_program([o.node for o in outs], "x86_64").image


def _junk(kind: str, count: int) -> list[Any]:
    """Unrelated nodes an earlier trace leaves alive: products and sums with constants, a
    loop, gradients."""
    x = cp.value(0.75)
    if kind == "products":
        return [x * (0.5 + k) + k * 0.25 for k in range(count)]
    if kind == "loop":
        return [cp.fori_loop(1 + count % 4, lambda s: s * 0.5 + x, x + float(count))]
    return [cp.grad(cp.sin(x * float(k)) * x, x) for k in range(count)]


@settings(max_examples=40, deadline=None)
@given(program=programs(), kind=st.sampled_from(["products", "loop", "grad"]),
       count=st.integers(1, 40))
def test_image_bytes_do_not_depend_on_earlier_traces(program: dict[str, Any], kind: str,
                                                     count: int) -> None:
    first = program_image(program)
    kept = _junk(kind, count)
    assert program_image(program) == first
    assert kept
