"""The C call slot of jitted functions (copapy._dispatch): the fast plan of the most recent
signature answers first, and anything it does not take goes to the general path — results
always as the signature decides, hits counted either way."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import copapy as cp
from copapy._dispatch import Dispatcher


def test_result_forms_through_the_fast_plan() -> None:
    @cp.jit
    def one(x: float) -> object:
        return x * 2.0

    @cp.jit
    def pair(x: float, n: int) -> object:
        return x + 1.0, n * 3

    @cp.jit
    def arr(a: np.ndarray) -> object:
        return a * 2.0

    for _ in range(3):  # first call compiles, the others run through the C slot
        assert one(1.5) == 3.0
        assert pair(1.5, 4) == (2.5, 12)
        out = arr(np.arange(3, dtype=np.float32))
        assert isinstance(out, np.ndarray) and out.tolist() == [0.0, 2.0, 4.0]
    assert one.cache_info().hits == 2 and one.cache_info().misses == 1
    assert pair.cache_info().hits == 2


def test_another_signature_after_the_fast_one_is_right() -> None:
    @cp.jit
    def f(x: object) -> object:
        return x + 1

    assert f(1) == 2 and f(1) == 2          # int signature, fast plan
    assert f(1.5) == 2.5                     # float: the int plan rejects it, no wrong answer
    assert f(np.float64(2.0)) == 3.0         # converted by the general path
    assert f(x=4) == 5                       # keywords skip the fast plan
    info = f.cache_info()
    assert info.misses == 2 and info.currsize == 2


def test_cache_clear_forgets_the_fast_plan_and_the_hits() -> None:
    @cp.jit
    def f(x: float) -> object:
        return x - 1.0

    f(1.0), f(2.0), f(3.0)
    f.cache_clear()
    assert f.cache_info() == (0, 0, 32, 0)
    assert f(5.0) == 4.0 and f.cache_info().misses == 1


def test_errors_of_the_general_path_reach_the_caller() -> None:
    @cp.jit
    def f(x: float) -> object:
        return x * 2.0

    f(1.0)
    with pytest.raises(TypeError, match="f\\(\\)"):
        f(1.0, 2.0)
    with pytest.raises(TypeError):
        f("abc")


def test_threads_share_one_jitted_function() -> None:
    @cp.jit
    def f(x: float, y: float) -> object:
        return x * 10.0 + y

    errors: list[str] = []

    def worker(k: int) -> None:
        for i in range(300):
            x = float(k) if i % 2 else k  # alternate signatures: plans replaced concurrently
            got = f(x, float(i))
            if got != k * 10 + i:
                errors.append(f"{k} {i} {got}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_dispatcher_falls_back_to_dispatch_without_a_plan() -> None:
    class Probe(Dispatcher):
        def _dispatch(self, *args: object, **kwargs: object) -> object:
            return ("slow", args, kwargs)

    p = Probe()
    assert p(1, k=2) == ("slow", (1,), {"k": 2})
    p._set_fast(lambda args, i, o: (sum(args),), (), (), None, True)
    assert p(1, 2) == 3 and p._fast_hits == 1
    p._set_fast(lambda args, i, o: (_ for _ in ()).throw(TypeError("plan")), (), (), None, True)
    assert p(1) == ("slow", (1,), {})                # TypeError: another signature
    p._set_fast(lambda args, i, o: 1 / 0, (), (), None, True)
    with pytest.raises(ZeroDivisionError):           # any other error is the caller's
        p(1)
    with pytest.raises(TypeError, match="callable"):
        p._set_fast(1, (), (), None, True)


def test_invoke_parses_each_plan_it_is_given() -> None:
    """Program.invoke keeps the plan it parsed last (a signature passes the same tuples on
    every call); any other plan on the same program — an equal copy, another output plan, a
    bad one — is parsed anew, never answered from the kept one."""
    @cp.jit
    def f(x: float) -> object:
        return x * 2.0, x + 1.0

    assert f(1.5) == (3.0, 2.5)
    (compiled,) = f._cache.values()
    fast = compiled.fast
    program = fast.invoke.__self__
    if not hasattr(program, "invoke_copies"):
        pytest.skip("the jit runs on an emulator here (no native Program.invoke)")
    assert program.invoke((2.0,), fast.inputs, fast.outputs) == (4.0, 3.0)
    copies = (tuple(tuple(e) for e in fast.inputs), tuple(tuple(e) for e in fast.outputs))
    assert program.invoke((2.5,), *copies) == (5.0, 3.5)
    assert program.invoke((2.0,), fast.inputs, fast.outputs[1:]) == (3.0,)
    first = fast.outputs[0]
    bad = ((first[0], program.data_size, *first[2:]),)
    with pytest.raises(ValueError, match="outside the data region"):
        program.invoke((2.0,), fast.inputs, bad)
    with pytest.raises(TypeError, match="argument type differs"):
        program.invoke((2,), fast.inputs, fast.outputs)
    assert program.invoke((3.0,), fast.inputs, fast.outputs) == (6.0, 4.0)
    assert f(4.0) == (8.0, 5.0)
