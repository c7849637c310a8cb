"""The qemu bare-metal backend: the real runner core on Cortex-M7 (mps2-an500) and Cortex-M55
(mps3-an547). These tests fail, not skip, without arm-none-eabi-gcc and qemu-system-arm: they
are the only execution tests of Cortex-M55 (MVE) code and of Cortex-M7 FP64 code."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable

import pytest

import copapy as cp
from copapy._contract import DType
from copapy.arch.patchkind import THUMB32, PatchKind
from copapy.arch.targets import by_name, targets
from copapy.compiler import compile_program
from copapy.image import Image, ImagePatch, ImageTask
from copapy.runtime import qemu_backend as qb
from copapy.runtime.errors import ImageLoadError

from .support.checks import same_bits

ARCHES = [t.name for t in targets() if t.qemu is not None]

# Thumb-2 MOVW/MOVT imm16 = imm4:i:imm3:imm8 (docs/image.md THUMB32 word order)
_IMM16 = ((0, 8, 0), (8, 3, 12), (11, 1, 26), (12, 4, 16))
MOVW = PatchKind(32, THUMB32, 0, 0, 0, _IMM16)
MOVT = PatchKind(32, THUMB32, 16, 0, 0, _IMM16)

# assembled with arm-none-eabi-as -march=armv8.1-m.main+mve.fp+fp.dp
CODE = bytes.fromhex(
    # task 0 at 0x00
    "40f20000"  # movw   r0, #:lower16:data      (patched)
    "c0f20000"  # movt   r0, #:upper16:data      (patched)
    "0168"      # ldr    r1, [r0, #0]            x
    "4268"      # ldr    r2, [r0, #4]            counter
    "0132"      # adds   r2, #1
    "4260"      # str    r2, [r0, #4]
    "0323"      # movs   r3, #3
    "5943"      # muls   r1, r3
    "0731"      # adds   r1, #7
    "8160"      # str    r1, [r0, #8]            3x + 7
    "90ed030a"  # vldr   s0, [r0, #12]
    "b1eec00a"  # vsqrt.f32 s0, s0
    "80ed040a"  # vstr   s0, [r0, #16]           sqrtf
    "90ed060b"  # vldr   d0, [r0, #24]
    "20ee000b"  # vmul.f64 d0, d0, d0
    "80ed080b"  # vstr   d0, [r0, #32]           square (FP64)
    "7047"      # bx     lr
    # task 1 at 0x32
    "00de"      # udf    #0
    # task 2 at 0x34 (MVE: Cortex-M55 only)
    "40f20000"  # movw   r0, #:lower16:data      (patched)
    "c0f20000"  # movt   r0, #:upper16:data      (patched)
    "90ed0c1f"  # vldrw.u32 q0, [r0, #48]
    "20ef4008"  # vadd.i32 q0, q0, q0
    "80ed101f"  # vstrw.32 q0, [r0, #64]
    "7047"      # bx     lr
)
DATA_OFFSET = 96
DATA_INIT = struct.pack("<iiif8xd16x4i", 5, 0, 0, 2.0, 1.5, 1, 2, 3, 4)
X, COUNTER, OUT, F32_IN, F32_OUT, F64_IN, F64_OUT, VEC_IN, VEC_OUT = (
    0, 4, 8, 12, 16, 24, 32, 48, 64)
F32, F64, I32, BOOL, U8, I8 = (DType.F32, DType.F64, DType.I32, DType.BOOL, DType.U8,
                               DType.I8)

LOOP = bytes.fromhex("fee7")                       # b .
RECURSE = bytes.fromhex("00b5" "fff7fdff" "00bd")  # push {lr}; bl self; pop {pc}


def make_image(arch: str) -> bytes:
    """Three tasks patched through MOVW/MOVT runtime patches, as the compiler emits them."""
    patches = [ImagePatch(site, kind, DATA_OFFSET)
               for site, kind in ((0, 0), (4, 1), (0x34, 0), (0x38, 1))]
    return Image(by_name(arch).id, CODE, DATA_OFFSET, 80, 32, DATA_INIT,
                 [MOVW.pack(), MOVT.pack()], patches,
                 [ImageTask(0x00 | 1), ImageTask(0x32 | 1), ImageTask(0x34 | 1)]).to_bytes()




def tiny_image(arch: str, code: bytes) -> bytes:
    """One task at offset 0 with no data references."""
    return Image(by_name(arch).id, code, 64, 16, 32, b"", [], [], [ImageTask(1)]).to_bytes()


@pytest.fixture
def boots(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts qemu boots, to check laziness and batching."""
    count: list[int] = []
    real: Callable[[str, bytes, float], qb._Boot] = qb._boot

    def counting(arch: str, job_file: bytes, timeout: float) -> qb._Boot:
        count.append(len(job_file))
        return real(arch, job_file, timeout)

    monkeypatch.setattr(qb, "_boot", counting)
    return count


def test_tools_are_installed() -> None:
    missing = [t for t in ("arm-none-eabi-gcc", "qemu-system-arm", "make") if not shutil.which(t)]
    assert not missing, f"missing {missing}: {qb.INSTALL_HINT}"
    for arch in ARCHES:
        assert qb.harness_path(arch).is_file()


@pytest.mark.parametrize("arch", ARCHES)
def test_write_run_read(arch: str) -> None:
    p = qb.QemuProgram(make_image(arch), arch)
    assert (p.code_size, p.data_offset, p.data_size, p.task_count) == (len(CODE), 96, 80, 3)
    assert p.read(X, I32) == 5 and p.read(COUNTER, I32) == 0
    p.write(X, I32, -11)
    p.write(F32_IN, F32, 2.25)
    p.write(F64_IN, F64, -1.25)
    p.run()
    assert p.read(OUT, I32) == -26
    assert p.read(F32_OUT, F32) == 1.5
    assert p.read(F64_OUT, F64) == 1.5625
    assert p.read(COUNTER, I32) == 1


@pytest.mark.parametrize("arch", ARCHES)
def test_state_persists_across_many_sequences(arch: str, boots: list[int]) -> None:
    p = qb.QemuProgram(make_image(arch), arch)
    for i in range(1, 6):
        p.write(X, I32, i)
        p.run()
        p.write(X, I32, 100 + i)  # a write between runs is replayed in order
        p.run()
        assert p.read(OUT, I32) == 3 * (100 + i) + 7
        assert p.read(COUNTER, I32) == 2 * i
        assert p.read(X, I32) == 100 + i
    assert len(boots) == 6  # construction, then one boot per read after runs


@pytest.mark.parametrize("arch", ARCHES)
def test_reads_and_writes_without_runs_need_no_boot(arch: str, boots: list[int]) -> None:
    p = qb.QemuProgram(make_image(arch), arch)
    p.write_bytes(VEC_IN, struct.pack("<4i", 7, 8, 9, 10))
    p.write(X, BOOL, True)
    p.write(COUNTER, U8, 255)
    p.write(COUNTER + 1, I8, -2)
    assert p.read(X, BOOL) is True
    assert p.read_bytes(COUNTER, 2) == b"\xff\xfe"
    assert p.read(COUNTER + 1, I8) == -2
    assert struct.unpack("<4i", p.read_bytes(VEC_IN, 16)) == (7, 8, 9, 10)
    assert len(boots) == 1


@pytest.mark.parametrize("arch", ARCHES)
def test_bad_arguments(arch: str) -> None:
    p = qb.QemuProgram(make_image(arch), arch)
    with pytest.raises(IndexError):
        p.run(3)
    with pytest.raises(IndexError):
        p.write(80, I32, 1)
    with pytest.raises(IndexError):
        p.read(2, I32)  # misaligned
    with pytest.raises(IndexError):
        p.read_bytes(70, 11)
    with pytest.raises(ValueError, match="qemu runs"):
        qb.QemuProgram(make_image(arch), "rv32")


def test_mve_runs_on_cortex_m55() -> None:
    p = qb.QemuProgram(make_image("cortex-m55"), "cortex-m55")
    p.run(2)
    assert struct.unpack("<4i", p.read_bytes(VEC_OUT, 16)) == (2, 4, 6, 8)


def test_mve_faults_on_cortex_m7() -> None:
    p = qb.QemuProgram(make_image("cortex-m7"), "cortex-m7")
    p.run(2)
    with pytest.raises(qb.GuestFault, match=r"NOCP|UNDEFINSTR"):
        p.flush()


@pytest.mark.parametrize("arch", ARCHES)
def test_corrupted_image_gives_crc_error(arch: str) -> None:
    bad = bytearray(make_image(arch))
    bad[100] ^= 0x40
    with pytest.raises(ImageLoadError, match="CRC-32 mismatch") as info:
        qb.QemuProgram(bytes(bad), arch)
    assert info.value.name == "CRC"  # type: ignore[attr-defined]


@pytest.mark.parametrize("arch", ARCHES)
def test_image_for_the_other_board_is_rejected(arch: str) -> None:
    other = ARCHES[1 - ARCHES.index(arch)]
    with pytest.raises(ImageLoadError, match="ARCH: image is for architecture"):
        qb.QemuProgram(make_image(other), arch)


@pytest.mark.parametrize("arch", ARCHES)
def test_fault_raises_and_program_survives(arch: str) -> None:
    p = qb.QemuProgram(make_image(arch), arch)
    p.run(0)
    p.run(1)  # udf
    with pytest.raises(RuntimeError, match="UNDEFINSTR") as info:
        p.read(COUNTER, I32)
    fault = info.value
    assert isinstance(fault, qb.GuestFault)
    assert fault.code_offset == 0x32 and fault.cfsr & (1 << 16)
    assert "code offset 0x32" in str(fault)
    # the failed sequence is dropped; the program is at its last good state and still runs
    assert p.read(COUNTER, I32) == 0
    p.run()
    assert p.read(COUNTER, I32) == 1


@pytest.mark.parametrize("arch", ARCHES)
def test_stack_overflow_faults_instead_of_hanging(arch: str) -> None:
    p = qb.QemuProgram(tiny_image(arch, RECURSE), arch, timeout=10)
    p.run()
    with pytest.raises(qb.GuestFault, match=r"STKOF|MSTKERR"):
        p.flush()


def test_endless_loop_times_out() -> None:
    p = qb.QemuProgram(tiny_image("cortex-m7", LOOP), "cortex-m7", timeout=1.5)
    p.run()
    with pytest.raises(qb.QemuTimeout, match="did not finish"):
        p.flush()


@pytest.mark.parametrize("arch", ARCHES)
def test_batch_of_programs_in_one_boot(arch: str, boots: list[int]) -> None:
    image = make_image(arch)
    jobs = [qb.Job(image, (qb.Write(X, struct.pack("<i", i)), qb.Run(0), qb.Run(0)))
            for i in range(60)]
    results = qb.run_jobs(arch, jobs)
    assert len(boots) == 1
    assert [r.read(OUT, I32) for r in results] == [3 * i + 7 for i in range(60)]
    assert all(r.read(COUNTER, I32) == 2 for r in results)
    assert all(r.layout is not None and r.layout.data_size == 80 for r in results)


@pytest.mark.parametrize("arch", ARCHES)
def test_batch_continues_after_bad_jobs(arch: str, boots: list[int]) -> None:
    image = make_image(arch)
    corrupt = bytearray(image)
    corrupt[-1] ^= 1
    ok = qb.Job(image, (qb.Run(0),))
    jobs = [ok, qb.Job(bytes(corrupt), (qb.Run(0),)), ok, qb.Job(image, (qb.Run(1),)), ok,
            qb.Job(image, (qb.Write(80, b"x"),)), ok]
    results = qb.run_jobs(arch, jobs)
    assert len(boots) == 2  # the fault ends the first boot; the rest runs in a second one
    assert isinstance(results[1].error, ImageLoadError)
    assert isinstance(results[3].error, qb.GuestFault)
    assert isinstance(results[5].error, RuntimeError)
    assert "outside the 80-byte data region" in str(results[5].error)
    for i in (0, 2, 4, 6):
        assert results[i].read(OUT, I32) == 22


# ---- end to end: copapy programs compiled for the boards, against the native runner


def _expressions() -> tuple[cp.Value, cp.Value, cp.Value, cp.Value, cp.Value, cp.Value]:
    a = cp.value(1.5)
    b = cp.value(2.0)
    x = cp.value(2.0, cp.float64)
    y = cp.value(3.25, cp.float64)
    f32 = a * b + cp.sqrt(a) - a / b
    f64 = x * y + cp.sqrt(x) - x / y
    return a, b, x, y, f32, f64


@pytest.mark.parametrize("arch", ARCHES)
def test_compiled_program_matches_native(arch: str) -> None:
    a, b, x, y, f32, f64 = _expressions()
    native = cp.LocalTarget()
    native.compile(f32, f64)
    compiled = compile_program([f32.node, f64.node], arch)
    prog = qb.QemuProgram(compiled.image, arch)
    ports = compiled.ports
    for va, vb, vx, vy in ((1.5, 2.0, 2.0, 3.25), (7.0, -0.375, 1e-3, 12345.678)):
        for v, value in ((a, va), (b, vb), (x, vx), (y, vy)):
            native.write(v, value)
            prog.write(ports[v.node].offset, ports[v.node].dtype.code, value)
        native.run()
        prog.run()
        for out, dtype in ((f32, "float32"), (f64, "float64")):
            got = prog.read(ports[out.node].offset, ports[out.node].dtype.code)
            want = native.read(out)
            assert same_bits(got, want, dtype), f"{arch} {out!r}: {got!r} != native {want!r}"


@pytest.mark.parametrize("arch", ARCHES)
def test_compiled_program_batch_matches_native(arch: str, boots: list[int]) -> None:
    a, b, x, y, f32, f64 = _expressions()
    native = cp.LocalTarget()
    native.compile(f32, f64)
    compiled = compile_program([f32.node, f64.node], arch)
    ports = compiled.ports
    inputs = [(1.0 + i, 0.5 - i / 7, 3.0 * i + 0.1, -2.0 + i / 3) for i in range(50)]
    jobs = []
    for values in inputs:
        writes = tuple(
            qb.Write(ports[v.node].offset, struct.pack(
                "<f" if ports[v.node].dtype.code == F32 else "<d", value))
            for v, value in zip((a, b, x, y), values, strict=True))
        jobs.append(qb.Job(compiled.image, (*writes, qb.Run(0))))
    results = qb.run_jobs(arch, jobs)
    assert len(boots) == 1
    for values, result in zip(inputs, results, strict=True):
        for v, value in zip((a, b, x, y), values, strict=True):
            native.write(v, value)
        native.run()
        for out, dtype in ((f32, "float32"), (f64, "float64")):
            port = ports[out.node]
            got = result.read(port.offset, port.dtype.code)
            assert same_bits(got, native.read(out), dtype), f"{arch} {values}: {got!r}"
