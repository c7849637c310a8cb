"""Hand-assembled Thumb-2 attack tasks for the Cortex-M7 runners (issue 29): machine code a
crafted image may carry in place of a task's chain. Encodings from GNU as 2.40
(``arm-none-eabi-as -mthumb -march=armv7e-m -mfpu=fpv5-d16``), halfwords in program order.
Each sequence that does not trap returns (``bx lr``), so what it leaves behind is visible."""

from __future__ import annotations

import struct

BX_LR = 0x4770


def thumb(*halfwords: int) -> bytes:
    """Thumb code from its halfwords (a 32-bit instruction is two, first halfword first)."""
    return struct.pack(f"<{len(halfwords)}H", *halfwords)


def movw_movt(reg: int, value: int) -> tuple[int, ...]:
    """movw reg, #lo16; movt reg, #hi16 (T3 encodings): reg = value."""
    def enc(top: int, imm16: int) -> tuple[int, int]:
        imm4, i, imm3, imm8 = imm16 >> 12, (imm16 >> 11) & 1, (imm16 >> 8) & 7, imm16 & 0xFF
        return (top | (i << 10) | imm4, (imm3 << 12) | (reg << 8) | imm8)
    return (*enc(0xF240, value & 0xFFFF), *enc(0xF2C0, value >> 16))


def store_to(address: int) -> bytes:
    """movw/movt r0, address; mvn r1, #0; str r1, [r0]; bx lr: one word written at address."""
    return thumb(*movw_movt(0, address), 0xF06F, 0x0100, 0x6001, BX_LR)


def load_from(address: int) -> bytes:
    """movw/movt r0, address; ldr r0, [r0]; bx lr."""
    return thumb(*movw_movt(0, address), 0x6800, BX_LR)


SYST_CSR = 0xE000E010  # SysTick control: 0 stops the kernel's tick
VTOR = 0xE000ED08      # vector table offset
NVIC_ICER0 = 0xE000E180  # writing ones disables interrupts 0-31
AIRCR = 0xE000ED0C     # (VECTKEY | SYSRESETREQ) resets the chip

#: name -> code; the privileged-state attacks of issue 29 and more, each a complete task
ATTACKS: dict[str, bytes] = {
    "systick_off": store_to(SYST_CSR),
    "vtor_garbage": store_to(VTOR),
    "nvic_disable_all": store_to(NVIC_ICER0),
    "system_reset": thumb(*movw_movt(0, AIRCR), *movw_movt(1, 0x05FA0004), 0x6001, BX_LR),
    "cpsid_i": thumb(0xB672, BX_LR),
    "basepri_mask": thumb(0x2020, 0xF380, 0x8811, BX_LR),     # movs r0, #32; msr basepri, r0
    "control_write": thumb(0x2000, 0xF380, 0x8814, BX_LR),    # movs r0, #0; msr control, r0
    "fpscr_round_to_zero": thumb(0xF44F, 0x0040, 0xEEE1, 0x0A10, BX_LR),  # round toward zero
    "svc_0": thumb(0xDF00, BX_LR),
    "svc_bad_syscall": thumb(0xF64F, 0x76FF, 0xDF03, BX_LR),  # movw r6, #0xffff; svc #3
    "udf": thumb(0xDE00),
    "bkpt": thumb(0xBE00, BX_LR),
    "write_own_code": thumb(0xF2AF, 0x0002, 0x6000, BX_LR),   # adr r0, .; str r0, [r0]
    "endless_loop": thumb(0xE7FE),
}
