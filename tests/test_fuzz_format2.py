"""The libFuzzer harness of verified loading (runner/tests/fuzz_format2.c; issue 29): built
with clang-19 under ASan/UBSan with the x86_64 stencil tables, it loads its seed corpus
(tests/support/fuzz_seeds.py) with the verdict the Python side expects for each image: the
honest programs load, each crafted image is refused by the rule its corpus entry names. Then a
short fuzzing run with a fixed seed and number of runs must end without a finding (the long,
timed runs and their numbers: docs/decisions/2026-12-04-verified-loading.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from .support import fuzz_seeds
from .support.runners import ROOT, build

BUILD = "build/libfuzzer"


@pytest.fixture(scope="module")
def harness() -> Path:
    assert shutil.which("clang-19"), ("the format-2 libFuzzer harness needs clang-19: "
                                      "apt-get install clang-19")
    build(f"{BUILD}/fuzz_format2", "CC=clang-19", f"BUILD={BUILD}")
    return ROOT / "runner" / BUILD / "fuzz_format2"


def run(harness: Path, *args: str, trace: bool = False) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, FUZZ_FORMAT2_TRACE="1") if trace else dict(os.environ)
    return subprocess.run([str(harness), *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_seeds_get_the_expected_verdicts(harness: Path, tmp_path: Path) -> None:
    verdicts: Counter[str] = Counter()
    for k, (name, expected, image) in enumerate(fuzz_seeds.seeds()):
        path = tmp_path / f"seed{k}"
        path.write_bytes(image)
        proc = run(harness, "-runs=0", str(path), trace=True)
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
        line = next(x for x in proc.stdout.splitlines()
                    if x.startswith(f"fuzz_format2: {len(image)} bytes"))
        assert line.endswith(f"load {expected}"), (name, line)
        verdicts[expected] += 1
    assert verdicts["OK"] >= 13 and sum(verdicts.values()) >= 60, verdicts
    assert {"STENCIL", "SLOTS", "DATA_RANGE", "FROZEN", "STRUCTURE", "TABLE"} <= set(verdicts)


def test_short_fuzzing_run_finds_nothing(harness: Path, tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    fuzz_seeds.write(seeds)
    work = tmp_path / "corpus"
    work.mkdir()
    proc = run(harness, "-seed=1", "-runs=20000", "-max_len=65536", str(work), str(seeds))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Done 20000 runs" in proc.stderr, proc.stderr[-2000:]
