"""Bad images are rejected with distinct errors, and the loaded program keeps running."""

from __future__ import annotations

import struct
import zlib

import pytest

import copapy as cp
from copapy import _runner
from copapy.arch.targets import by_name
from copapy.runtime.load import host_architecture


def compiled() -> tuple[cp.LocalTarget, cp.Value, cp.Value, bytes]:
    x = cp.value(3.0)
    y = x * x + 1.0
    tg = cp.LocalTarget()
    tg.compile(y)
    return tg, x, y, tg.image


def recrc(blob: bytearray) -> bytes:
    blob[-4:] = struct.pack("<I", zlib.crc32(bytes(blob[:-4])))
    return bytes(blob)


def still_runs(tg: cp.LocalTarget, x: cp.Value, y: cp.Value) -> None:
    tg.write(x, 4.0)
    tg.run()
    assert tg.read(y) == 17.0


def test_truncated_images_are_rejected() -> None:
    tg, x, y, image = compiled()
    for n in range(0, len(image), 7):
        with pytest.raises(_runner.ImageError) as info:
            _runner.load(image[:n])
        assert info.value.name in ("TRUNCATED", "LAYOUT")
    still_runs(tg, x, y)


def test_bit_flips_are_rejected() -> None:
    tg, x, y, image = compiled()
    names = set()
    for pos in range(len(image)):
        for bit in (0, 5):
            bad = bytearray(image)
            bad[pos] ^= 1 << bit
            with pytest.raises(_runner.ImageError) as info:
                _runner.load(bytes(bad))
            names.add(info.value.name)
    assert "CRC" in names
    still_runs(tg, x, y)


def test_wrong_version_and_arch_have_their_own_errors() -> None:
    tg, x, y, image = compiled()
    bad = bytearray(image)
    bad[4:6] = struct.pack("<H", 3)  # formats 1 and 2 exist
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(recrc(bad))
    assert info.value.name == "VERSION"
    other = "x86_64" if host_architecture() == "aarch64" else "aarch64"  # (the aarch64 wheel)
    bad = bytearray(image)
    bad[8:10] = struct.pack("<H", by_name(other).id)
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(recrc(bad))
    assert info.value.name == "ARCH"
    assert other in str(info.value)
    with pytest.raises(_runner.ImageError) as info:
        _runner.load(b"not an image at all, but long enough to have a header......")
    assert info.value.name == "MAGIC"
    still_runs(tg, x, y)


def test_image_is_reproducible() -> None:
    def build() -> bytes:
        a = cp.value(1.5)
        b = cp.value(2, cp.int32)
        tg = cp.LocalTarget()
        tg.compile(cp.sin(a) * b + cp.where(a > 1.0, a, -a), b // 3)
        return tg.image

    assert build() == build()


def test_failed_compile_keeps_previous_program() -> None:
    tg, x, y, _ = compiled()
    with pytest.raises(TypeError):
        tg.compile("not a value")  # type: ignore[arg-type]
    still_runs(tg, x, y)
