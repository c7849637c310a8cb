"""The Zephyr app's DAC driver code (zephyr_app/src/io.c, `dacs` of the copapy,io binding)
compiles: neither test board has a DAC (mps2_an500 simulates its DAC channels, the Teensy 4.1's
i.MX RT1062 has none), so io.c is compiled (warnings are errors) for the FRDM-K64F, whose
Kinetis DAC0 is a Zephyr DAC device, with one DAC channel in the devicetree. Only io.c: the
app itself has no K64F port. Skipped without ZEPHYR_BASE."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .support import zephyr_runners as zr

OVERLAY = """/ {
\tcopapy_io: copapy-io {
\t\tcompatible = "copapy,io";
\t\tdacs = <&dac0 0>;
\t\tdac-resolution = <12>;
\t};
};
"""


def test_the_dac_driver_compiles_for_a_board_with_a_dac(tmp_path: Path) -> None:
    zr.require_zephyr()
    (tmp_path / "dac.overlay").write_text(OVERLAY)
    out = tmp_path / "build"
    configure = ["west", "build", "--cmake-only", "-p", "always", "-b", "frdm_k64f", "-d",
                 str(out), str(zr.APP), "--", f"-DEXTRA_DTC_OVERLAY_FILE={tmp_path}/dac.overlay",
                 "-DCONFIG_DAC=y"]
    proc = subprocess.run(configure, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    obj = "CMakeFiles/app.dir/src/io.c.obj"
    proc = subprocess.run(["ninja", "-C", str(out), obj], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    code = (out / obj).read_bytes()
    assert b"dac_level" in code  # the DAC branch was compiled in (N_DAC = 1), not left out
    dts = (out / "zephyr" / "zephyr.dts").read_text()
    assert "dacs = < &dac0 0x0 >;" in dts
