"""Finding copapy runners on USB and flashing the Teensy firmware (docs/zephyr.md).

The Zephyr firmware (zephyr_app/) enumerates as a USB CDC ACM serial port with Zephyr's
development vendor id 0x2FE3, product id 0x0100 and the product string "copapy runner"
(CONFIG_USB_DEVICE_VID/PID/PRODUCT). Other Zephyr devices share those ids, so for them a
known product string must also name copapy; firmware built with its own ids is found by
passing them (SerialTarget(usb_ids=[(vid, pid)])).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: (vendor id, product id) of copapy runner firmware
USB_IDS: tuple[tuple[int, int], ...] = ((0x2FE3, 0x0100),)
#: ids that other Zephyr devices use too: for these the product string must name copapy
SHARED_IDS = frozenset({(0x2FE3, 0x0100)})
PRODUCT = "copapy"  # contained in the USB product string ("copapy runner")
TEENSY_LOADER = "teensy_loader_cli"


class RunnerNotFound(RuntimeError):
    """No runner, or more than one, where exactly one was expected (the message lists them)."""


@dataclass(frozen=True)
class UsbPort:
    device: str
    vid: int
    pid: int
    product: str | None
    serial_number: str | None

    def __str__(self) -> str:
        what = f" {self.product!r}" if self.product else ""
        sn = f" serial {self.serial_number}" if self.serial_number else ""
        return f"{self.device} ({self.vid:04x}:{self.pid:04x}{what}{sn})"


def usb_ports() -> list[UsbPort]:
    """Every USB serial port pyserial lists (pip install 'copapy[serial]')."""
    from serial.tools import list_ports

    return [UsbPort(p.device, p.vid, p.pid, p.product, p.serial_number)
            for p in list_ports.comports() if p.vid is not None and p.pid is not None]


def is_runner(port: UsbPort, usb_ids: Sequence[tuple[int, int]] = USB_IDS) -> bool:
    ids = (port.vid, port.pid)
    if ids not in usb_ids:
        return False
    return ids not in SHARED_IDS or port.product is None or PRODUCT in port.product.lower()


def find_runner(usb_ids: Sequence[tuple[int, int]] = USB_IDS) -> str:
    """The device of the one connected runner (RunnerNotFound if there is none or several)."""
    ports = usb_ports()
    found = [p for p in ports if is_runner(p, usb_ids)]
    if len(found) == 1:
        return found[0].device
    ids = ", ".join(f"{v:04x}:{p:04x}" for v, p in usb_ids)
    if not found:
        seen = "; ".join(str(p) for p in ports) or "none"
        raise RunnerNotFound(f"no copapy runner on USB (USB id {ids}, product '{PRODUCT}...'; "
                             f"USB serial ports seen: {seen}). Plug the board in (flashed with "
                             f"`copapy flash zephyr.hex`) or pass its port, e.g. "
                             f"SerialTarget('/dev/ttyACM0')")
    listed = "; ".join(str(p) for p in found)
    raise RunnerNotFound(f"{len(found)} copapy runners on USB ({listed}): pass the port of "
                         f"the one to use, e.g. SerialTarget({found[0].device!r})")


def flash_command(hex_file: Path, mcu: str = "TEENSY41", wait: bool = True,
                  soft_reboot: bool = False) -> list[str]:
    """The teensy_loader_cli command that writes `hex_file` (ValueError: not an Intel hex
    file; FileNotFoundError: the file or teensy_loader_cli is missing)."""
    if not hex_file.is_file():
        raise FileNotFoundError(f"{hex_file} does not exist (west build writes "
                                f"build/zephyr/zephyr.hex)")
    if hex_file.suffix.lower() != ".hex":
        raise ValueError(f"{hex_file} is no Intel hex file: flash build/zephyr/zephyr.hex "
                         f"(teensy_loader_cli reads .hex only)")
    loader = shutil.which(TEENSY_LOADER)
    if loader is None:
        raise FileNotFoundError(f"{TEENSY_LOADER} is not installed: apt-get install "
                                f"teensy-loader-cli (Debian, Ubuntu), or build it from "
                                f"https://github.com/PaulStoffregen/teensy_loader_cli")
    argv = [loader, f"--mcu={mcu}", "-v"]  # -v: progress while it writes
    if wait:
        argv.append("-w")  # wait for the board (press its button)
    if soft_reboot:
        argv.append("-s")  # ask running copapy firmware to reboot into the loader (134 baud)
    return [*argv, str(hex_file)]


def flash(hex_file: Path, mcu: str = "TEENSY41", wait: bool = True,
          soft_reboot: bool = False) -> int:
    """Runs teensy_loader_cli (its progress goes to the terminal); its exit status."""
    return subprocess.run(flash_command(hex_file, mcu, wait, soft_reboot)).returncode
