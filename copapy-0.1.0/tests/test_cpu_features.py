"""Images compiled with a variant stencil table (x86_64-v3: AVX2, x86_64-v4: AVX-512) say so in
their CPU_FEATURES section (docs/image.md), and every loader refuses them with a named error
before anything runs on a CPU without the features: the in-process loader, the host runner
over the wire (SerialTarget) and ``copapy-runner --image``. COPAPY_CPU_FEATURES_MASK hides this
machine's features, so the refusals are tested on any x86_64 CPU; what each test expects
follows the CPU as tests/support/cpu.py sees it (the run's own mask included), and only running a
variant's code skips, naming the features, on a CPU without them."""

from __future__ import annotations

import functools
import platform
import re
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import _runner
from copapy import image as im
from copapy.arch.cpu import MASK_ENV, masked
from copapy.arch.features import feature_mask, feature_names, mask_of, variant_name
from copapy.arch.targets import Target, best_host_arch, by_name, targets
from copapy.kits import BadImageError
from copapy.kits.abi import CProgram
from copapy.runtime import load as runtime_load
from copapy.runtime.errors import CpuFeatureError, ImageLoadError
from copapy.saved import ProgramFileError
from tests.support.cpu import hide, lacks, needs, unhide, widest
from tests.support.runners import build, host_runner, runner_process
from tests.test_cli import copapy

#: these check an x86_64 CPU's features (CPUID, the mask, the x86_64 runners); on another host
#: an x86_64 image is refused by its architecture first (tests/test_image_errors.py)
X86_64_HOST = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                 reason="x86_64 CPU features need an x86_64 host")

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "runner" / "build" / "copapy-runner"
V3, V4 = by_name("x86_64-v3"), by_name("x86_64-v4")
BASE = by_name("x86_64")


def _periodic_program(path: Path, arch: str) -> cp.Program:
    x = cp.value(2.0, name="x")
    counter = cp.feedback(lambda n: n + 1, init=0)
    return cp.save(path, cp.Task(x * 3.0 + 1.0, counter, period=1e-3), arch=arch,
                   names={"y": x * 3.0 + 1.0, "count": counter})


def _with_features(image: bytes, mask: int) -> bytes:
    """The image with its CPU_FEATURES entry set to ``mask`` and the CRC made right again (a
    marker changed on purpose, so the check after the CRC is reached)."""
    blob = bytearray(image)
    (header_size,) = struct.unpack_from("<H", blob, 6)
    (count,) = struct.unpack_from("<I", blob, 32)
    for k in range(count):
        stype, _esize, _n, off, _size = im.SECTION.unpack_from(blob, header_size + 16 * k)
        if stype == im.CPU_FEATURES:
            struct.pack_into("<Q", blob, off, mask)
            struct.pack_into("<I", blob, len(blob) - 4, zlib.crc32(bytes(blob[:-4])))
            return bytes(blob)
    raise AssertionError("the image has no CPU_FEATURES section")


# ---------------------------------------------------------------- the marker


def test_feature_bits_are_declared_once_in_the_base_toml() -> None:
    bits = BASE.feature_bits
    assert bits[:3] == ("avx", "avx2", "fma") and len(set(bits)) == len(bits)
    for t in targets():
        if t.variant_of:
            assert set(t.cpu_features) <= set(bits), t.name
            assert feature_names(BASE, feature_mask(t)) == tuple(
                b for b in bits if b in t.cpu_features)
        else:
            assert feature_mask(t) == 0
    assert variant_name(BASE.id, feature_mask(V3)) == "x86_64-v3"
    assert variant_name(BASE.id, 0) == "x86_64" and variant_name(BASE.id, 1) == "x86_64"


def test_runner_feature_tables_follow_the_toml() -> None:
    """runner.h's CP_X86_64_* bit numbers and cpu_features.c's names are the toml's list."""
    header = (ROOT / "runner" / "include" / "copapy" / "runner.h").read_text()
    enum = dict(re.findall(r"\bCP_X86_64_([A-Z0-9]+)\s*=\s*(\d+)", header))
    assert {name.lower(): int(v) for name, v in enum.items()} == {
        name: k for k, name in enumerate(BASE.feature_bits)}
    source = (ROOT / "runner" / "src" / "cpu_features.c").read_text()
    rows = re.findall(r"\[CP_X86_64_([A-Z0-9]+)\]\s*=\s*\{\"([a-z0-9]+)\"", source)
    assert [(a.lower(), b) for a, b in rows] == [(b, b) for b in BASE.feature_bits]


def test_variant_images_carry_the_marker_and_baseline_images_do_not(tmp_path: Path) -> None:
    for target in (BASE, V3, V4):
        prog = _periodic_program(tmp_path / f"{target.name}.cpimg", target.name)
        parsed = im.parse(prog.image)
        assert parsed.cpu_features == feature_mask(target)
        assert im.required_features(prog.image, BASE.id) == feature_mask(target)
        assert prog.arch == "x86_64" and prog.variant == target.name
        assert prog.cpu_features == tuple(b for b in BASE.feature_bits
                                          if b in target.cpu_features)
        loaded = cp.load(tmp_path / f"{target.name}.cpimg")
        assert loaded.cpu_features == prog.cpu_features and loaded.variant == target.name
    baseline = im.parse(cp.load(tmp_path / "x86_64.cpimg").image)
    assert baseline.cpu_features == 0
    # a baseline image is exactly what the format wrote before: no CPU_FEATURES section
    blob = cp.load(tmp_path / "x86_64.cpimg").image
    types = [im.SECTION.unpack_from(blob, 48 + 16 * k)[0]
             for k in range(struct.unpack_from("<I", blob, 32)[0])]
    assert im.CPU_FEATURES not in types


@X86_64_HOST
@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 64) - 1)))
def test_any_mask_round_trips_or_is_refused_by_both_readers(mask: int) -> None:
    """Python's reader and the runner core agree on every u64: the known bits round-trip and
    load-check, any other bit is refused (naming the lowest), by both."""
    parsed = im.parse(_baseline_image())
    parsed.cpu_features = mask
    blob = parsed.to_bytes()
    known = mask < 1 << len(BASE.feature_bits)
    assert im.parse(blob).cpu_features == mask and im.required_features(blob, BASE.id) == mask
    if known:
        _runner.validate(blob)
        assert mask_of(BASE, frozenset(feature_names(BASE, mask))) == mask
        return
    lowest = next(k for k in range(len(BASE.feature_bits), 64) if mask >> k & 1)
    with pytest.raises(_runner.ImageError) as core:
        _runner.validate(blob)
    assert core.value.name == "UNSUPPORTED" and core.value.detail == lowest
    with pytest.raises(ProgramFileError, match=f"bit {lowest} of x86_64"):
        cp.Program(blob)


@functools.cache
def _baseline_image() -> bytes:
    tg = cp.LocalTarget(arch="x86_64")
    tg.compile(cp.value(1.0, name="x") * 2.0)
    return tg.image


@X86_64_HOST
def test_the_mask_hides_features_from_copapy(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = frozenset({"sse2", "avx", "avx2", "fma"})
    monkeypatch.setenv(MASK_ENV, "avx2, fma")
    assert masked(flags) == {"sse2", "avx"}
    monkeypatch.setenv(MASK_ENV, "all")
    assert masked(flags) == frozenset()
    assert best_host_arch() == "x86_64"  # jit and LocalTarget defaults follow the mask
    unhide(monkeypatch)
    assert best_host_arch() == widest(BASE).name
    hide(monkeypatch, "avx512vl")
    assert best_host_arch() == ("x86_64-v3" if widest(BASE) is V4 else widest(BASE).name)
    hide(monkeypatch, "xsave")  # every variant needs it
    assert best_host_arch() == "x86_64"


# ---------------------------------------------------------------- in-process


@X86_64_HOST
def test_in_process_load_refuses_code_the_cpu_cannot_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    best = widest(BASE)  # the widest code this CPU runs (the base table on an SSE-only CPU)
    tg = cp.LocalTarget()
    tg.deploy(_periodic_program(tmp_path / "best.cpimg", best.name))
    tg.step(3e-3)
    assert tg.read("count") == 3 and tg.read("y") == 7.0

    prog = _periodic_program(tmp_path / "v3.cpimg", "x86_64-v3")
    hide(monkeypatch, "avx2")
    missing = lacks(V3, frozenset({"avx2"}))  # ("avx2",) on a CPU with every other one
    fresh = cp.LocalTarget()
    with pytest.raises(CpuFeatureError) as info:
        fresh.deploy(cp.load(tmp_path / "v3.cpimg"))
    err = info.value
    assert err.missing == missing and err.variant == "x86_64-v3" and err.base == "x86_64"
    assert err.name == "CPU_FEATURES" and err.code == 12 and isinstance(err, ImageLoadError)
    assert f"lacks {', '.join(missing)}." in str(err) and "arch='x86_64'" in str(err)
    with pytest.raises(cp.local_target.TargetError):
        fresh.step(1e-3)  # nothing was loaded, nothing runs
    # the runner core's own check (the platform hook: CPUID minus the mask), below Python's
    with pytest.raises(_runner.ImageError) as core:
        _runner.load(prog.image)
    assert core.value.name == "CPU_FEATURES"
    assert core.value.detail == mask_of(BASE, frozenset(missing))
    assert f"this CPU lacks {missing[0]}" in str(core.value)
    assert 'that the image needs: compile with arch="x86_64"' in str(core.value)
    # the same code compiled for the baseline runs with every feature hidden
    hide(monkeypatch, "all")
    base = _periodic_program(tmp_path / "base.cpimg", "x86_64")
    fresh.deploy(base)
    fresh.step(2e-3)
    assert fresh.read("count") == 2 and fresh.read("y") == 7.0
    assert cp.jit(lambda a: a * 2.0)(1.5) == 3.0  # jit compiles for the unmasked table


@X86_64_HOST
@pytest.mark.parametrize("target", [V3, V4], ids=lambda t: t.name)
def test_a_variant_target_deploys_a_saved_program_of_its_variant(
        tmp_path: Path, target: Target) -> None:
    """A regression: LocalTarget(arch="x86_64-v4") compared the saved program's base
    architecture with its own variant name and refused the program it had just saved."""
    _periodic_program(tmp_path / "saved.cpimg", target.name)  # saving needs no CPU feature
    with pytest.raises(cp.local_target.TargetError, match=r"holds x86_64 code.*aarch64"):
        cp.LocalTarget(arch="aarch64").deploy(cp.load(tmp_path / "saved.cpimg"))
    needs(target)
    tg = cp.LocalTarget(arch=target.name, tick=1e-3)
    x = cp.value(2.0, name="x")
    tg.deploy(cp.Task(x * 3.0 + 1.0, period=1e-3))
    saved = tg.save(str(tmp_path / f"{target.name}.cpimg"))
    assert saved.variant == target.name  # an explicit arch is saved as it is
    again = cp.LocalTarget(arch=target.name)
    again.deploy(cp.load(tmp_path / f"{target.name}.cpimg"))
    again.step(2e-3)
    assert again.read("x") == 2.0


@X86_64_HOST
def test_the_default_target_runs_the_widest_table_and_saves_the_base_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LocalTarget() simulates with the widest table this CPU runs; save() writes the base
    table's build of the same program (the same results), which every x86_64 CPU loads."""
    best = widest(BASE).name
    tg = cp.LocalTarget(tick=1e-3)
    assert tg.arch == best_host_arch() == best
    a = cp.vector([float(k) * 0.25 for k in range(37)])
    y = cp.dot(cp.sqrt(a * a + 1.0) * 0.5, a)
    tg.deploy(cp.Task(y, period=1e-3))
    tg.step(1e-3)
    running = cp.Program(tg.image, "running")
    assert running.variant == best
    saved = tg.save(str(tmp_path / "default.cpimg"))
    assert saved.variant == "x86_64" and im.parse(saved.image).cpu_features == 0
    hide(monkeypatch, "all")  # a CPU with no extension at all loads it
    base = cp.LocalTarget()
    assert base.arch == "x86_64"
    base.deploy(cp.load(tmp_path / "default.cpimg"))
    base.step(1e-3)
    assert base.read("task0.out0") == tg.read(y)
    # a loaded program is saved as it was loaded
    assert base.save(str(tmp_path / "again.cpimg")).image == saved.image


@X86_64_HOST
@pytest.mark.parametrize("hidden", ["avx512vl", "avx2", "all"])
def test_compiling_for_a_variant_the_cpu_lacks_names_the_features(
        monkeypatch: pytest.MonkeyPatch, hidden: str) -> None:
    hide(monkeypatch, hidden)
    missing = V4.cpu_features if hidden == "all" else lacks(V4, frozenset({hidden}))
    tg = cp.LocalTarget(arch="x86_64-v4")
    x = cp.value(1.0)
    with pytest.raises(CpuFeatureError,
                       match=rf"x86_64-v4 code.*this CPU lacks {', '.join(missing)}\.") as info:
        tg.compile(x + 1.0)
    assert info.value.missing == missing and (hidden == "all" or hidden in missing)


def test_an_emulator_counts_as_a_cpu_without_features(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off an x86_64 host, x86_64 code runs on unicorn, which has no AVX: refused, named."""
    prog = cp.save(tmp_path / "v3.cpimg", cp.value(1.0, name="x") * 2.0, arch="x86_64-v3")
    monkeypatch.setattr(runtime_load, "host_arch", lambda: "aarch64")
    with pytest.raises(CpuFeatureError, match="the unicorn emulator that runs x86_64") as info:
        runtime_load.load(prog.image, "x86_64")
    assert info.value.missing == V3.cpu_features


@X86_64_HOST
def test_a_corrupted_marker_is_refused(tmp_path: Path) -> None:
    prog = _periodic_program(tmp_path / "v3.cpimg", "x86_64-v3")
    bad = _with_features(prog.image, feature_mask(V3) | 1 << 40)
    (tmp_path / "bad.cpimg").write_bytes(bad)
    with pytest.raises(ProgramFileError, match=r"bad\.cpimg: .*bit 40 of x86_64"):
        cp.load(tmp_path / "bad.cpimg")
    with pytest.raises(ImageLoadError, match=r"UNSUPPORTED: .*bit 40") as py:
        runtime_load.load(bad, "x86_64")
    assert py.value.name == "UNSUPPORTED"  # type: ignore[attr-defined]
    with pytest.raises(_runner.ImageError) as core:
        _runner.validate(bad)
    assert core.value.name == "UNSUPPORTED" and core.value.detail == 40
    with pytest.raises(_runner.ImageError, match="bit 40"):
        _runner.load(bad)
    build("host")
    out = subprocess.run([str(RUNNER), "--stdio", "--no-rt", "--image",
                          str(tmp_path / "bad.cpimg")], capture_output=True, text=True,
                         timeout=10, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "bad.cpimg: UNSUPPORTED: CPU feature bit 40" in out.stderr


@X86_64_HOST
def test_libcopapy_refuses_with_the_named_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner as a shared library (kits, cppyy loops): the same platform hook."""
    CProgram(_periodic_program(tmp_path / "best.cpimg", widest(BASE).name).image).close()
    v3 = _periodic_program(tmp_path / "v3.cpimg", "x86_64-v3")
    hide(monkeypatch, "bmi2")
    missing = lacks(V3, frozenset({"bmi2"}))
    with pytest.raises(BadImageError, match=f"lacks {missing[0]}") as info:
        CProgram(v3.image)
    assert info.value.name == "IMAGE/CPU_FEATURES" and info.value.code == 12
    CProgram(_periodic_program(tmp_path / "base.cpimg", "x86_64").image).close()


# ---------------------------------------------------------------- the host runner


@X86_64_HOST
def test_host_runner_refuses_over_the_wire_and_stays_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v3 = _periodic_program(tmp_path / "v3.cpimg", "x86_64-v3")
    base = _periodic_program(tmp_path / "base.cpimg", "x86_64")
    hide(monkeypatch, "avx2", "fma")  # the runner process inherits it
    with host_runner() as (pty, proc), cp.SerialTarget(pty) as tg:
        with pytest.raises(CpuFeatureError) as info:
            tg.deploy(v3)
        err = info.value
        assert err.missing == lacks(V3, frozenset({"avx2", "fma"}))
        assert err.variant == "x86_64-v3"
        assert "the runner on" in str(err) and "arch='x86_64'" in str(err)
        assert isinstance(err.__cause__, cp.serial_target.p.ProtocolError)
        assert err.__cause__.name == "IMAGE_INVALID" and err.__cause__.status == 12
        assert tg.info().state == "empty"  # nothing was loaded
        tg.deploy(base, start=True)  # the runner is up and takes the baseline program
        deadline = time.monotonic() + 10
        while tg.read("count") < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert tg.read("count") >= 3 and tg.read("y") == 7.0 and proc.poll() is None


@X86_64_HOST
def test_runner_image_flag_refuses_with_the_named_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _periodic_program(tmp_path / "v4.cpimg", "x86_64-v4")
    _periodic_program(tmp_path / "base.cpimg", "x86_64")
    build("host")
    hide(monkeypatch, "all")
    out = subprocess.run([str(RUNNER), "--stdio", "--no-rt", "--image",
                          str(tmp_path / "v4.cpimg")], capture_output=True, text=True,
                         timeout=10, stdin=subprocess.DEVNULL)
    errors = [line for line in out.stderr.splitlines() if "warning:" not in line]
    assert out.returncode == 2 and len(errors) == 1, out.stderr
    assert "v4.cpimg: CPU_FEATURES: this CPU lacks avx, avx2" in errors[0]
    assert 'arch="x86_64"' in errors[0]
    with runner_process("--pty", "--no-rt", "--image", str(tmp_path / "base.cpimg"),
                        "--start") as (pty, proc), cp.SerialTarget(pty) as tg:
        assert tg.info().state == "running" and proc.poll() is None  # the baseline runs


@X86_64_HOST
def test_cli_info_prints_the_required_features(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _periodic_program(tmp_path / "v3.cpimg", "x86_64-v3")
    _periodic_program(tmp_path / "base.cpimg", "x86_64")
    out = copapy("info", str(tmp_path / "v3.cpimg"))
    assert out.returncode == 0, out.stderr
    assert ("cpu features   avx, avx2, fma, bmi1, bmi2, f16c, movbe, abm, xsave (x86_64-v3 "
            "code") in out.stdout
    out = copapy("info", str(tmp_path / "base.cpimg"))
    assert "cpu features   none (baseline: runs on every x86_64 CPU)" in out.stdout
    hide(monkeypatch, "fma")
    out = copapy("run", str(tmp_path / "v3.cpimg"), "--steps", "2")
    assert out.returncode == 1 and out.stderr.startswith("copapy run: CPU_FEATURES: "), out.stderr
    missing = ", ".join(lacks(V3, frozenset({"fma"})))
    assert f"lacks {missing}." in out.stderr and "arch='x86_64'" in out.stderr
    out = copapy("run", str(tmp_path / "base.cpimg"), "--steps", "2", "--print", "count")
    assert out.returncode == 0 and out.stdout.split() == ["count", "2"], out.stderr
