"""The qemu backend (Cortex-M7/M55) from an installed copapy: it builds its bare-metal harness
from the firmware sources the wheel ships in copapy/_firmware (setup.py's FIRMWARE), not only
from a source checkout. One lookup, copapy._files.firmware_root, serves it and
`copapy firmware export`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import copapy as cp
from copapy import _files, cli_tools
from copapy.runtime import qemu_backend as qb
from copapy.runtime.errors import EmulatorMissingError

from .support.checks import same_bits

CHECKOUT = Path(__file__).resolve().parents[1]
#: what the harness build reads (a subset of setup.py's FIRMWARE)
HARNESS_SOURCES = ("runner/src", "runner/include", "runner/baremetal", "runner/cortexm")
TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm", "make")


def fake_install(site: Path) -> Path:
    """site/copapy with the harness sources under _firmware, as a wheel installs them."""
    package = site / "copapy"
    for item in HARNESS_SOURCES:
        shutil.copytree(CHECKOUT / item, package / "_firmware" / item,
                        ignore=shutil.ignore_patterns("build", "build-*"))
    return package


@pytest.fixture
def fresh_harness() -> Iterator[None]:
    """harness_path caches its answer per process: forget it before and after."""
    qb.harness_path.cache_clear()
    yield
    qb.harness_path.cache_clear()


def test_lookup_finds_the_wheels_copy_then_a_checkout(tmp_path: Path) -> None:
    package = fake_install(tmp_path / "site")
    assert _files.firmware_root(str(package)) == str(package / "_firmware")
    assert _files.firmware_root(str(tmp_path / "empty" / "copapy")) is None
    # a source checkout: the package in src/copapy, runner/ two levels up
    (tmp_path / "tree" / "runner" / "src").mkdir(parents=True)
    assert _files.firmware_root(str(tmp_path / "tree" / "src" / "copapy")) == \
        str(tmp_path / "tree")


def test_no_sources_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  fresh_harness: None) -> None:
    monkeypatch.setattr(qb, "PACKAGE_DIR", str(tmp_path / "site" / "copapy"))
    with pytest.raises(EmulatorMissingError, match=r"harness sources are in neither "
                                                   r".*_firmware nor a source checkout: "
                                                   r"reinstall copapy from its wheel"):
        qb.harness_dirs()


def _add_mul(tg: cp.LocalTarget) -> list[float]:
    """A float32 program with an input, on `tg`; its outputs for three inputs."""
    x = cp.value(0.0)
    y = x * 1.25 + cp.sqrt(x) - x / 3.0
    tg.compile(y)
    out = []
    for v in (0.5, 2.0, 1e3):
        tg.write(x, v)
        tg.run()
        out.append(tg.read(y))
    return out


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS), reason="needs " + ", ".join(TOOLS))
def test_cortex_m55_from_an_installed_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             fresh_harness: None) -> None:
    """A copapy installed elsewhere (no checkout around it) builds the harness from its
    _firmware into the user's cache and runs a Cortex-M55 program like the native target."""
    package = fake_install(tmp_path / "site")
    monkeypatch.setattr(qb, "PACKAGE_DIR", str(package))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    dirs = qb.harness_dirs()
    assert dirs.source == package / "_firmware" / "runner" / "baremetal"
    assert dirs.build.parent == tmp_path / "cache" / "copapy"
    got = _add_mul(cp.LocalTarget(arch="cortex-m55"))
    assert (dirs.build / "harness-cortex-m55.elf").is_file()
    assert not (package / "_firmware" / "runner" / "baremetal" / "build").exists()
    want = _add_mul(cp.LocalTarget())
    assert all(same_bits(g, w, "float32") for g, w in zip(got, want, strict=True)), (got, want)


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS), reason="needs " + ", ".join(TOOLS))
def test_cortex_m55_from_this_installation(fresh_harness: None) -> None:
    """The copapy under test, a checkout or an installed wheel (tools/wheel_tests.txt runs
    this against the wheel), runs Cortex-M55 programs; its firmware sources are the ones
    `copapy firmware export` writes."""
    dirs = qb.harness_dirs()
    assert dirs.source == cli_tools.firmware_root() / "runner" / "baremetal"
    got = _add_mul(cp.LocalTarget(arch="cortex-m55"))
    want = _add_mul(cp.LocalTarget())
    assert all(same_bits(g, w, "float32") for g, w in zip(got, want, strict=True)), (got, want)
