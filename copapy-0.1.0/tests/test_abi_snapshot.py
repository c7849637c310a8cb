"""The kits ABI is pinned (issue 29, item 6): offset and size of every field of every
copapy_* struct of runner/include/copapy/copapy.h and the value of every enum constant equal
the committed tests/abi_copapy.json. An intended change: python tools/abi_snapshot.py
--update (and bump COPAPY_ABI_VERSION where the change is not an append)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import abi_snapshot  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux" or __import__("platform").machine()
                                != "x86_64", reason="the snapshot is of x86_64 Linux's C ABI")


def test_layout_equals_the_snapshot() -> None:
    want = json.loads(abi_snapshot.SNAPSHOT.read_text())
    got = json.loads(abi_snapshot.dumps(abi_snapshot.measure()))
    for name, s in want["structs"].items():
        assert name in got["structs"], f"struct {name} was removed from copapy.h"
        assert got["structs"][name] == s, (
            f"the layout of {name} changed: {got['structs'][name]} (snapshot: {s}); if "
            "intended, run python tools/abi_snapshot.py --update")
    changed = {k: (v, got["enums"].get(k)) for k, v in want["enums"].items()
               if got["enums"].get(k) != v}
    assert not changed, f"enum values changed or removed (snapshot, now): {changed}"
    assert got == want, "copapy.h gained structs or constants: python tools/abi_snapshot.py " \
                        "--update"


def test_every_struct_of_the_header_is_measured() -> None:
    header = (ROOT / "runner" / "include" / "copapy" / "copapy.h").read_text()
    declared = {line.split()[2] for line in header.splitlines()
                if line.startswith("typedef struct copapy_") and line.rstrip().endswith("{")}
    snap = json.loads(abi_snapshot.SNAPSHOT.read_text())
    assert declared == set(snap["structs"]) and len(declared) >= 7
    assert all(s["fields"] for s in snap["structs"].values())
    assert snap["enums"]["COPAPY_FAULT_SIGSEGV"] == 1
