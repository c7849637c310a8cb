"""Finding copapy runners on USB and flashing the Teensy firmware (docs/zephyr.md).

The Zephyr firmware (zephyr_app/) enumerates as a USB CDC ACM serial port with Zephyr's
development vendor id 0x2FE3, product id 0x0100 and the product string "copapy runner"
(zephyr_app/Kconfig sets CONFIG_USB_DEVICE_PRODUCT, usb_next.conf
CONFIG_CDC_ACM_SERIAL_PRODUCT_STRING). Other Zephyr devices share those ids, so for them the
product string must be ours: a port whose product string pyserial does not know is skipped
(pass its port instead); firmware built with its own ids is found by passing them
(SerialTarget(usb_ids=[(vid, pid)])).

Soft reboot: running copapy firmware on a Teensy 4.x reboots into the HalfKay loader when the
host sets its port to 134 baud (zephyr_app/src/usb_shim.c, Teensyduino's convention).
teensy_loader_cli -s cannot ask for that: it only knows Teensyduino's 16C0:0483 ports, so
`reboot_to_loader` opens our port at 134 baud itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: (vendor id, product id) of copapy runner firmware
USB_IDS: tuple[tuple[int, int], ...] = ((0x2FE3, 0x0100),)
#: ids that other Zephyr devices use too: for these the product string must name copapy
SHARED_IDS = frozenset({(0x2FE3, 0x0100)})
PRODUCT = "copapy runner"  # the firmware's USB product string
TEENSY_LOADER = "teensy_loader_cli"
#: the baud rate that reboots copapy firmware on a Teensy into its loader
REBOOT_BAUD = 134
#: what teensy_loader_cli (without -w) says when no board is in loader mode
NO_BOARD = "Unable to open device"


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


def skip_reason(port: UsbPort, usb_ids: Sequence[tuple[int, int]] = USB_IDS) -> str | None:
    """Why `port` is no copapy runner (None: it is one)."""
    ids = (port.vid, port.pid)
    if ids not in usb_ids:
        return "other USB id"
    if ids not in SHARED_IDS or port.product == PRODUCT:
        return None
    if port.product is None:
        return "product string unknown"
    return f"product string {port.product!r}, not {PRODUCT!r}"


def find_runner(usb_ids: Sequence[tuple[int, int]] = USB_IDS) -> str:
    """The device of the one connected runner (RunnerNotFound if there is none or several)."""
    ports = usb_ports()
    reasons = [(p, skip_reason(p, usb_ids)) for p in ports]
    found = [p for p, why in reasons if why is None]
    if len(found) == 1:
        return found[0].device
    ids = ", ".join(f"{v:04x}:{p:04x}" for v, p in usb_ids)
    if not found:
        seen = "; ".join(f"{p}: {why}" for p, why in reasons) or "none"
        raise RunnerNotFound(f"no copapy runner on USB (USB id {ids}, product {PRODUCT!r}; "
                             f"USB serial ports seen: {seen}). Plug the board in (flashed with "
                             f"`copapy flash zephyr.hex`) or pass its port, e.g. "
                             f"SerialTarget('/dev/ttyACM0')")
    listed = "; ".join(str(p) for p in found)
    raise RunnerNotFound(f"{len(found)} copapy runners on USB ({listed}): pass the port of "
                         f"the one to use, e.g. SerialTarget({found[0].device!r})")


def reboot_to_loader(port: str) -> None:
    """Asks the copapy firmware on `port` to reboot into the Teensy loader (134 baud)."""
    import serial

    serial.Serial(port, baudrate=REBOOT_BAUD).close()


def flash_command(hex_file: Path, mcu: str = "TEENSY41", wait: bool = True) -> list[str]:
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
        argv.append("-w")  # wait for the board's loader (button press or soft reboot)
    return [*argv, str(hex_file)]


def run_loader_until_found(argv: Sequence[str], seconds: float) -> int:
    """Runs the loader (without -w) until a board in loader mode answers or `seconds` pass:
    a bounded wait for a board that is rebooting into its loader; the exit status."""
    deadline = time.monotonic() + seconds
    while True:
        done = subprocess.run(argv, capture_output=True, text=True)
        if (done.returncode == 0 or NO_BOARD not in done.stderr
                or time.monotonic() >= deadline):
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
            return done.returncode
        time.sleep(0.2)
