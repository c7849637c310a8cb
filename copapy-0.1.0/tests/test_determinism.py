"""The same graph gives the same image bytes, whatever else the process traced before and
whatever the hash seed (SerialTarget.attach() recognises a running program by its CRC)."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from typing import Any

import copapy as cp
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
