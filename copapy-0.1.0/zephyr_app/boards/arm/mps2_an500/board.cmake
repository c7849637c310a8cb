# SPDX-License-Identifier: Apache-2.0
# QEMU 7.2: machine mps2-an500 = Cortex-M7 with FPv5-D16.
set(SUPPORTED_EMU_PLATFORMS qemu)

set(QEMU_CPU_TYPE_${ARCH} cortex-m7)
set(QEMU_FLAGS_${ARCH}
  -cpu ${QEMU_CPU_TYPE_${ARCH}}
  -machine mps2-an500
  -nographic
  -vga none
  )

# Zephyr's kernel.cmake appends "-net none" to every QEMU target after this file;
# don't pass it on an500: `-t run` goes through a wrapper that removes it.
# (find_program(QEMU ...) in cmake/emu/qemu.cmake keeps an already cached value.)
set(QEMU ${CMAKE_CURRENT_LIST_DIR}/qemu-no-net-none.sh CACHE FILEPATH "QEMU (an500 wrapper)")

board_set_debugger_ifnset(qemu)
