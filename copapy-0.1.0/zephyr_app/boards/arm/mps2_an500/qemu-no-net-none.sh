#!/bin/bash
# Wrapper used by `west build -t run` for mps2_an500 (see board.cmake): Zephyr's
# cmake/modules/kernel.cmake always appends "-net none" for QEMU targets; on QEMU 7.2's
# mps2-an500 that made host->guest serial bytes get lost (bare-metal runs), so drop it.
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "-net" ] && [ "${2:-}" = "none" ]; then shift 2; continue; fi
  args+=("$1"); shift
done
exec "${QEMU_REAL:-qemu-system-arm}" "${args[@]}"
