"""The tests' one view of this CPU's features: copapy's own (``usable_flags``: /proc/cpuinfo
minus COPAPY_CPU_FEATURES_MASK), taken with the mask the run started with. So
``COPAPY_CPU_FEATURES_MASK=avx512f,avx512bw,avx512cd,avx512dq,avx512vl pytest`` runs the tests
as on a CPU without AVX-512 (docs/architectures.md, 'Testing on another CPU'), and a test that
hides more features adds them to that mask instead of replacing it."""

from __future__ import annotations

import os

import pytest

from copapy.arch.cpu import MASK_ENV
from copapy.arch.targets import Target, targets, usable_flags

#: the features the run hides (empty: none), read before any test sets the variable
RUN_MASK = os.environ.get(MASK_ENV, "")
#: this CPU as the tests see it
CPU = usable_flags()


def lacks(target: Target, hidden: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The features of ``target`` this CPU lacks once ``hidden`` is hidden too, in the toml's
    order (the order every error message names them in)."""
    have = CPU - hidden
    return tuple(f for f in target.cpu_features if f not in have)


def runs(target: Target) -> bool:
    """True if this CPU runs ``target``'s code (a base target: always)."""
    return not lacks(target)


def hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Hide ``names`` from copapy and the runners on top of what the run hides."""
    monkeypatch.setenv(MASK_ENV, ",".join(filter(None, (RUN_MASK, *names))))


def unhide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Back to the CPU of the run (a test's own hiding undone)."""
    if RUN_MASK:
        monkeypatch.setenv(MASK_ENV, RUN_MASK)
    else:
        monkeypatch.delenv(MASK_ENV, raising=False)


def needs(target: Target) -> None:
    """Skip a test that runs ``target``'s code on this CPU when the CPU lacks its features,
    naming them (the refusal of such code is tested on every CPU)."""
    missing = lacks(target)
    if missing:
        pytest.skip(f"{target.name} code runs only on a CPU with {', '.join(missing)}, which "
                    f"this one lacks (or COPAPY_CPU_FEATURES_MASK hides)")


def widest(base: Target) -> Target:
    """The last variant of ``base`` (id order, as the tomls sort them) this CPU runs, else
    ``base``: the table copapy should pick by default here."""
    variants = [t for t in targets() if t.variant_of == base.name and runs(t)]
    return variants[-1] if variants else base
