"""SerialTarget() finds the runner on USB by its ids; `copapy flash` wraps teensy_loader_cli."""

from __future__ import annotations

import os
import stat
import termios
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serial.tools import list_ports_common

from copapy import cli
from copapy.serial import usb
from copapy.serial_target import SerialTarget, SerialTargetError


def fake_port(device: str, vid: int | None, pid: int | None,
              product: str | None) -> list_ports_common.ListPortInfo:
    info = list_ports_common.ListPortInfo(device)
    info.vid, info.pid, info.product, info.serial_number = vid, pid, product, "1234"
    return info


def use_ports(monkeypatch: pytest.MonkeyPatch, ports: list[Any]) -> None:
    monkeypatch.setattr("serial.tools.list_ports.comports", lambda *a, **k: ports)


def test_finds_the_one_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    use_ports(monkeypatch, [
        fake_port("/dev/ttyS0", None, None, None),                 # no USB
        fake_port("/dev/ttyACM0", 0x16C0, 0x0483, "USB Serial"),   # a Teensyduino sketch
        fake_port("/dev/ttyACM1", 0x2FE3, 0x0100, "Zephyr shell"),  # another Zephyr device
        fake_port("/dev/ttyACM2", 0x2FE3, 0x0100, "copapy runner"),
    ])
    assert usb.find_runner() == "/dev/ttyACM2"
    # firmware built with its own ids: the ids decide, the product string may be anything
    use_ports(monkeypatch, [fake_port("/dev/ttyACM5", 0x1209, 0x0001, "my board")])
    assert usb.find_runner([(0x1209, 0x0001)]) == "/dev/ttyACM5"


def test_none_or_several_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    use_ports(monkeypatch, [fake_port("/dev/ttyACM0", 0x16C0, 0x0483, "USB Serial")])
    with pytest.raises(SerialTargetError, match=r"no copapy runner on USB .*2fe3:0100.*"
                                                r"/dev/ttyACM0 \(16c0:0483"):
        SerialTarget()
    use_ports(monkeypatch, [fake_port("/dev/ttyACM0", 0x2FE3, 0x0100, "copapy runner"),
                            fake_port("/dev/ttyACM1", 0x2FE3, 0x0100, "copapy runner")])
    with pytest.raises(SerialTargetError, match=r"2 copapy runners on USB.*pass the port"):
        SerialTarget()


def test_shared_ids_need_our_product_string(monkeypatch: pytest.MonkeyPatch) -> None:
    """Zephyr's 2FE3:0100 is every Zephyr sample's id: a port with it is ours only when its
    product string is the firmware's (zephyr_app/Kconfig USB_DEVICE_PRODUCT)."""
    assert usb.PRODUCT in (Path(__file__).parents[1] / "zephyr_app" / "Kconfig").read_text()
    use_ports(monkeypatch, [
        fake_port("COM7", 0x2FE3, 0x0100, None),                      # product unknown
        fake_port("/dev/ttyACM1", 0x2FE3, 0x0100, "copapy sniffer"),  # not the runner
        fake_port("/dev/ttyACM2", 0x16C0, 0x0483, "copapy runner"),   # other ids
    ])
    with pytest.raises(usb.RunnerNotFound) as err:
        usb.find_runner()
    msg = str(err.value)
    assert "COM7 (2fe3:0100 serial 1234): product string unknown" in msg
    assert ("/dev/ttyACM1 (2fe3:0100 'copapy sniffer' serial 1234): product string "
            "'copapy sniffer', not 'copapy runner'") in msg
    assert "/dev/ttyACM2 (16c0:0483 'copapy runner' serial 1234): other USB id" in msg
    assert "pass its port, e.g. SerialTarget('/dev/ttyACM0')" in msg


def test_connects_to_the_port_it_found(monkeypatch: pytest.MonkeyPatch) -> None:
    from .support.runners import host_runner

    with host_runner() as (pty, _proc):
        use_ports(monkeypatch, [fake_port(pty, 0x2FE3, 0x0100, "copapy runner")])
        with SerialTarget() as tg:
            assert tg.info().arch == "x86_64"


def fake_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int = 0) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv"
    exe = bindir / usb.TEENSY_LOADER
    exe.write_text(f"#!/bin/sh\necho \"$@\" > {log}\necho 'Programming.....'\nexit {status}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_flash_runs_teensy_loader_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capfd: pytest.CaptureFixture[str]) -> None:
    log = fake_loader(tmp_path, monkeypatch)
    hex_file = tmp_path / "zephyr.hex"
    hex_file.write_text(":00000001FF\n")
    assert cli.main(["flash", str(hex_file)]) == 0
    assert log.read_text().split() == ["--mcu=TEENSY41", "-v", "-w", str(hex_file)]
    assert "Programming" in capfd.readouterr().out  # its progress reaches the terminal
    assert cli.main(["flash", "--no-wait", str(hex_file)]) == 0
    assert log.read_text().split() == ["--mcu=TEENSY41", "-v", str(hex_file)]


def counting_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, absent: int) -> Path:
    """A teensy_loader_cli that finds no board the first `absent` times it runs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv"
    exe = bindir / usb.TEENSY_LOADER
    exe.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                   f"if [ $(wc -l < {log}) -le {absent} ]; then\n"
                   f"  echo 'Unable to open device (hint: try -w)' >&2; exit 1\nfi\n"
                   f"echo 'Programming.....'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.fixture
def runner_pty(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, str]]:
    """A pty listed as the copapy runner's USB port; its master end."""
    master, slave = os.openpty()
    name = os.ttyname(slave)
    os.close(slave)
    use_ports(monkeypatch, [fake_port("/dev/ttyACM0", 0x2FE3, 0x0100, "Zephyr shell"),
                            fake_port(name, 0x2FE3, 0x0100, "copapy runner")])
    try:
        yield master, name
    finally:
        os.close(master)


def test_soft_reboot_sets_our_port_to_134_baud(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner_pty: tuple[int, str],
        capfd: pytest.CaptureFixture[str]) -> None:
    """The firmware reboots into the loader when the host sets 134 baud (usb_shim.c); the
    loader then waits (-w) for the board; its -s would look for Teensyduino's ids only."""
    assert "rate == 134u" in (Path(__file__).parents[1] / "zephyr_app" / "src" /
                              "usb_shim.c").read_text()
    master, name = runner_pty
    log = fake_loader(tmp_path, monkeypatch)
    hex_file = tmp_path / "zephyr.hex"
    hex_file.write_text(":00000001FF\n")
    assert termios.tcgetattr(master)[5] != termios.B134
    assert cli.main(["flash", "--soft-reboot", str(hex_file)]) == 0
    ispeed, ospeed = termios.tcgetattr(master)[4:6]  # what the last opener set
    assert ispeed == ospeed == termios.B134
    assert log.read_text().split() == ["--mcu=TEENSY41", "-v", "-w", str(hex_file)]
    assert f"asked the runner on {name} to reboot" in capfd.readouterr().err


def test_soft_reboot_no_wait_gives_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      runner_pty: tuple[int, str],
                                      capfd: pytest.CaptureFixture[str]) -> None:
    """--no-wait never runs a waiting loader: it retries the loader without -w for a bounded
    time while the board reboots, then fails with the loader's message."""
    master, _name = runner_pty
    hex_file = tmp_path / "zephyr.hex"
    hex_file.write_text(":00000001FF\n")
    log = counting_loader(tmp_path, monkeypatch, absent=2)
    assert cli.main(["flash", "--soft-reboot", "--no-wait", str(hex_file)]) == 0
    runs = [line.split() for line in log.read_text().splitlines()]
    assert runs == [["--mcu=TEENSY41", "-v", str(hex_file)]] * 3  # no -w, no -s
    assert termios.tcgetattr(master)[5] == termios.B134
    out, err = capfd.readouterr()
    assert "Programming" in out and "Unable to open device" not in err
    log.unlink()
    monkeypatch.setattr(cli, "SOFT_REBOOT_SECONDS", 0.0)
    (tmp_path / "bin" / usb.TEENSY_LOADER).unlink()
    (tmp_path / "bin").rmdir()
    counting_loader(tmp_path, monkeypatch, absent=1000)  # the board never comes up
    assert cli.main(["flash", "--soft-reboot", "--no-wait", str(hex_file)]) == 1
    assert len(log.read_text().splitlines()) == 1
    err = capfd.readouterr().err
    assert "Unable to open device" in err and "teensy_loader_cli failed (exit status 1)" in err


def test_soft_reboot_errors_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_loader(tmp_path, monkeypatch)
    hex_file = tmp_path / "zephyr.hex"
    hex_file.write_text(":00000001FF\n")
    use_ports(monkeypatch, [fake_port("/dev/ttyACM1", 0x2FE3, 0x0100, "Zephyr shell")])
    with pytest.raises(SystemExit, match=r"--soft-reboot: no copapy runner on USB .*"
                                         r"product string 'Zephyr shell'.*press the board's "
                                         r"button and flash without --soft-reboot"):
        cli.main(["flash", "--soft-reboot", str(hex_file)])
    with pytest.raises(SystemExit, match=r"--soft-reboot: .*No such file.*press the board's"):
        cli.main(["flash", "--soft-reboot", "--port", str(tmp_path / "ttyACM9"), str(hex_file)])


def test_flash_errors_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capfd: pytest.CaptureFixture[str]) -> None:
    hex_file = tmp_path / "zephyr.hex"
    hex_file.write_text(":00000001FF\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SystemExit, match="teensy_loader_cli is not installed: apt-get install "
                                         "teensy-loader-cli"):
        cli.main(["flash", str(hex_file)])
    elf = tmp_path / "zephyr.elf"
    elf.write_bytes(b"\x7fELF")
    with pytest.raises(SystemExit, match=r"no Intel hex file: flash build/zephyr/zephyr\.hex"):
        cli.main(["flash", str(elf)])
    with pytest.raises(SystemExit, match="does not exist"):
        cli.main(["flash", str(tmp_path / "missing.hex")])
    fake_loader(tmp_path, monkeypatch, status=1)
    assert cli.main(["flash", str(hex_file)]) == 1
    assert "teensy_loader_cli failed (exit status 1)" in capfd.readouterr().err
