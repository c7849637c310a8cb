"""Saved programs whose CRC holds but whose metadata does not have the schema's form (another
writer, a bug, a crafted file): ``cp.load`` and ``copapy info`` load them or refuse them with
one ProgramFileError naming the file and the field, never another exception."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import cli_program
from copapy import image as im
from copapy.saved import ProgramFileError
from tests.support.metadata_mutants import NO_KIND, binary_mutants, metadata_mutants, with_metadata
from tests.test_cli import _env


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A periodic program with every kind of metadata entry: task names, an unpacked input
    array (k), a packed one (m, 2x2), an unpacked output array (z), I/O bindings."""
    k = cp.value([1.0, 2.0, 3.0], packed=False, name="k")
    m = cp.value([[1.0, 2.0], [3.0, 4.0]], packed=True, name="m")
    enc = cp.value(0.0, name="enc")
    z = k * enc
    duty = cp.min(m.sum() * 0.01, 1.0)
    path = tmp_path_factory.mktemp("meta") / "good.cpimg"
    cp.save(path, cp.Task(z, duty, period=1e-3, name="ctrl"), names={"z": z, "duty": duty},
            bindings=[(enc, cp.io.Encoder(0)), (duty, cp.io.PWM(1, safe=0.5))])
    blob = path.read_bytes()
    meta = im.parse(blob).metadata
    assert meta["tasks"] == ["ctrl"] and {a["name"] for a in meta["arrays"]} == {"k", "m", "z"}
    return blob


def _info(path: Path) -> str:
    """``copapy info PATH`` in this process, its stdout UTF-8 as a terminal's (a lone surrogate
    would fail to print); SystemExit's message for a refused file."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
    with contextlib.redirect_stdout(out):
        cli_program.cmd_image_info(str(path))
    out.flush()
    return raw.getvalue().decode()


def _check(path: Path, blob: bytes, what: str) -> bool:
    """Load and describe one mutant; True if it loaded. Only ProgramFileError may refuse it."""
    path.write_bytes(blob)
    try:
        prog = cp.load(path)
    except ProgramFileError as exc:
        assert str(path) in str(exc), what
        with pytest.raises(SystemExit) as ended:
            _info(path)
        assert str(ended.value.code).startswith(f"copapy: {path}"), what
        return False
    text = _info(path)
    assert "ports:" in text, what
    for name in prog.names():
        prog.named(name)
    prog.compiled()
    return True


def test_the_mutant_corpus_loads_or_is_a_program_file_error(good: bytes,
                                                            tmp_path: Path) -> None:
    mutants = list(metadata_mutants(good)) + list(binary_mutants(good))
    assert len(mutants) > 900
    loaded = sum(_check(tmp_path / "m.cpimg", blob, what) for what, blob in mutants)
    assert 0 < loaded < len(mutants)  # the corpus holds both kinds


@pytest.mark.parametrize(("edit", "says"), [
    ({"arrays": [{"name": "k", "shape": 5, "dtype": "float32"}]},
     "arrays[0].shape: expected a list of 1 to 8 ints >= 1, got 5"),
    ({"arrays": [{"name": "k", "shape": [4], "dtype": "float32"}]},
     "arrays[0] 'k': no port 'k' and no one-element port 'k[3]'"),
    ({"arrays": [{"name": "m", "shape": [3], "dtype": "float32"}]},
     "arrays[0] 'm': shape [3] has 3 elements, its port holds 4"),
    ({"arrays": [{"name": "k", "shape": [3], "dtype": "int32"}]},
     "arrays[0] 'k': its int32 elements are in ports of other dtypes"),
    ({"arrays": [{"name": "k", "shape": [3]}]}, "arrays[0].dtype: missing"),
    ({"ranges": [{"port": "k", "lo": "1", "hi": None, "nan": False}]},
     "ranges[0].lo: expected a finite number or null, got '1'"),
    ({"ranges": [{"port": "k", "lo": None, "hi": 2**1100, "nan": False}]},
     "ranges[0].hi: expected a finite number or null, got an integer of 1101 bits"),
    ({"ranges": [{"port": "k", "lo": 0.0, "hi": 1.0}]}, "ranges[0].nan: missing"),
    ({"tasks": 5}, "tasks: expected a list of at most 65536 items, got 5"),
    ({"tasks": ["\ud800"]}, "tasks[0]: expected valid Unicode"),
    ({"ops": -1}, "ops: expected an integer in 0..2**63-1, got -1"),
    ({"ops": 2**64}, "ops: expected an integer in 0..2**63-1, got 18446744073709551616"),
])
def test_errors_name_the_field(good: bytes, tmp_path: Path, edit: dict[str, object],
                               says: str) -> None:
    meta = {**im.parse(good).metadata, **edit}
    path = tmp_path / "bad.cpimg"
    path.write_bytes(with_metadata(good, json.dumps(meta)))
    with pytest.raises(ProgramFileError) as exc:
        cp.load(path)
    assert str(exc.value).startswith(f"{path}: ") and says in str(exc.value)


def test_deep_nesting_and_unknown_io_kind_through_the_command(good: bytes,
                                                              tmp_path: Path) -> None:
    """The two that ended in RecursionError and KeyError, through ``copapy info`` itself."""
    kinds = [blob for what, blob in binary_mutants(good) if f"+3 = {NO_KIND}" in what]
    cases = {"deep": with_metadata(good, "[" * 100_000 + "]" * 100_000), "kind": kinds[0]}
    for name, blob in cases.items():
        (tmp_path / f"{name}.cpimg").write_bytes(blob)
        out = subprocess.run([sys.executable, "-m", "copapy", "info", str(tmp_path /
                              f"{name}.cpimg")], capture_output=True, text=True, env=_env(),
                             timeout=60)
        assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith(f"copapy: {tmp_path / name}.cpimg: ")
        assert ("nests too deeply" if name == "deep" else f"kind {NO_KIND} is not a channel kind"
                ) in out.stderr


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=12)
KEYS = st.sampled_from(["compiler", "stencil_table", "ops", "stencils", "tasks", "arrays",
                       "ranges"])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=KEYS, entry=st.integers(0, 2), field=st.sampled_from(["name", "shape", "dtype"]),
       value=JSON, whole=st.booleans())
def test_any_json_in_any_field(good: bytes, tmp_path: Path, key: str, entry: int, field: str,
                               value: object, whole: bool) -> None:
    """Hypothesis: any JSON value at a top-level field or inside an array's record."""
    meta = im.parse(good).metadata
    if key == "arrays" and not whole:
        arrays = [dict(a) for a in meta["arrays"]]  # type: ignore[union-attr]
        arrays[entry][field] = value
        meta = {**meta, "arrays": arrays}
    else:
        meta = {**meta, key: value}
    _check(tmp_path / "h.cpimg", with_metadata(good, json.dumps(meta)), repr(meta))
