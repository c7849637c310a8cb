"""benchmarks/bench_elementwise.py: a size whose unfused program exceeds the in-process
memory cap is skipped with the reason printed, not a crash of the whole run (1e7 elements
against the default 64 MiB)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import copapy.runtime as rt
from copapy.arch.targets import host_variants

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as the script runs: its folder first
    yield importlib.import_module("bench_elementwise")
    rt.set_max_memory(None)


def test_unfused_over_the_memory_cap_is_skipped_with_its_reason(
        bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    arch = ["x86_64", *host_variants()][-1]
    args = bench.inputs("expr", 4096)
    rt.set_max_memory(64 * 1024)  # the unfused program of 4096 elements needs more
    assert bench.unfused_fn("expr", arch, args) is None
    out = capsys.readouterr().out
    assert "cp unfused expr n=4e+03: skipped" in out and "TOO_LARGE" in out
    rt.set_max_memory(None)  # under the cap: the variant, computing the expression
    f = bench.unfused_fn("expr", arch, args)
    assert f is not None
    x, y = args
    ref = np.sqrt(x.astype(np.float64) ** 2 + y.astype(np.float64) ** 2) * 0.5 + np.sin(x)
    np.testing.assert_allclose(np.array(f(*args)), ref, rtol=1e-5, atol=1e-5)
