"""The user guide cannot drift from the code: every code block of docs/index.md and
docs/guide/ runs (python blocks with this interpreter, sh blocks with bash, in page order, in
a scratch directory that sees the checkout's examples/, tools/, src/ …), and the site
builds with ``mkdocs build --strict`` (mkdocs.yml; API reference from the docstrings).

A block preceded by ``<!-- guide-test: background -->`` is a long-running command: it must
start and print its first line. ``<!-- guide-test: skip: REASON -->`` is for the few blocks
that need hardware or rebuild everything; the list of them is checked here."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "docs" / "index.md", *sorted((ROOT / "docs" / "guide").rglob("*.md"))]
BLOCK = re.compile(r"(?:<!-- guide-test: (?P<mark>[^\n]*?) -->\n)?^```(?P<lang>[^\n]*)\n"
                   r"(?P<body>.*?)^```$", re.S | re.M)
#: what the guide may leave unexecuted, and why (a new entry is a decision, not an accident)
SKIPPED = {
    ("getting-started.md", "the README's set-up commands; .ci/run runs them (and the test "
                           "suite)"),
    ("teensy.md", "needs a Zephyr workspace (west)"),
    ("teensy.md", "needs a Teensy 4.1 on USB"),
    ("add-operation.md", "rebuilds the stencil tables of every architecture (minutes)"),
}
LINKED = ("examples", "tools", "runner", "stencils", "src", "docs", "benchmarks",
          "pyproject.toml")
#: a TCP port on this machine in a block (docs/guide/howto/teensy.md's qemu serial line): the
#: page shows a readable fixed number, the test runs the block with a port free right now, so
#: a port another program holds does not fail it
LOCAL_PORT = re.compile(r"(?<=127\.0\.0\.1:)\d{2,5}\b")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    mark: str


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start("body")) + 1, m["lang"].strip(),
                  m["body"], (m["mark"] or "").strip()) for m in BLOCK.finditer(text)]


def test_every_block_is_run_or_knowingly_skipped() -> None:
    skipped = set()
    for page in PAGES:
        for b in blocks(page):
            assert b.lang in ("python", "sh"), (f"{page.name}:{b.line}: a ```{b.lang} block: "
                                                f"the guide's blocks are python or sh")
            if b.mark.startswith("skip"):
                reason = b.mark.partition(":")[2].strip()
                assert reason, f"{page.name}:{b.line}: a skip needs a reason"
                skipped.add((page.name, reason))
            else:
                assert b.mark in ("", "background"), f"{page.name}:{b.line}: mark {b.mark!r}"
    assert skipped == SKIPPED


def _scratch(tmp_path: Path) -> dict[str, str]:
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    env["COPAPY_PROGRESS"] = "0"
    return env


def _background(b: Block, tmp_path: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen(["bash", "-c", f"exec {b.body.strip()}"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() and proc.poll() is None, (
            f"{b.page.name}:{b.line}: {b.body!r} did not start: {first!r} "
            f"{proc.stderr.read() if proc.stderr else ''}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_free_ports(body: str, chosen: dict[str, str]) -> str:
    """``body`` with each local port number replaced by a free one (the same number by the
    same free port throughout the page: ``chosen``)."""
    return LOCAL_PORT.sub(lambda m: chosen.setdefault(m[0], str(free_port())), body)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT / "docs")) for p in PAGES])
def test_page_code_runs(page: Path, tmp_path: Path) -> None:
    env = _scratch(tmp_path)
    ports: dict[str, str] = {}
    for b in blocks(page):
        if b.mark.startswith("skip"):
            continue
        b = Block(b.page, b.line, b.lang, with_free_ports(b.body, ports), b.mark)
        if b.mark == "background":
            _background(b, tmp_path, env)
            continue
        argv = [sys.executable, "-c", b.body] if b.lang == "python" else \
            ["bash", "-euo", "pipefail", "-c", b.body]
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600, start_new_session=True)
        assert proc.returncode == 0, (f"{page.relative_to(ROOT)}:{b.line} ({b.lang}) failed:\n"
                                      f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """Without -q: -q hides the warnings from --strict too, and the build then passed with
    pages outside the nav and links that lead nowhere (mkdocs.yml ``validation`` makes a
    broken link or anchor a warning)."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert proc.returncode == 0 and not warnings, "\n".join(warnings) or log[-4000:]
    api = (tmp_path / "site" / "guide" / "reference" / "api" / "index.html").read_text()
    # the API reference comes from the docstrings
    assert "Compile values into machine code and run them in this process." in api
    assert "Compile <code>cp.Task</code> objects" in api or "Compile cp.Task" in api or \
        "periodic tasks" in api


def test_getting_started_quotes_the_readme_commands() -> None:
    """The one skipped block of Getting started is the README's two set-up commands, verbatim."""
    readme = (ROOT / "README.md").read_text()
    setup = readme[readme.index("## Set up"):readme.index("## What it does")]
    commands = [m["body"].strip() for m in BLOCK.finditer(setup)]
    assert len(commands) == 2, commands
    page = [b for b in blocks(ROOT / "docs" / "guide" / "getting-started.md")
            if b.mark.startswith("skip")]
    assert [b.body.strip() for b in page] == ["\n".join(commands)]


API_PAGE = ROOT / "docs" / "guide" / "reference" / "api.md"


def _documented_names() -> set[str]:
    """Names the API page documents: a ``::: module.name`` directive, an entry of a
    ``members: [...]`` list, or a ``cp.<name>`` in its prose."""
    text = API_PAGE.read_text()
    names = set(re.findall(r"^::: copapy\.(?:\w+\.)*(\w+)$", text, re.M))
    for members in re.findall(r"members: \[([^\]]*)\]", text):
        names.update(m.strip() for m in members.split(","))
    names.update(re.findall(r"`cp\.(\w+)", text))
    return names


def test_api_page_documents_every_public_name() -> None:
    import copapy as cp

    missing = sorted(set(cp.__all__) - _documented_names())
    assert not missing, f"docs/guide/reference/api.md does not document cp.{missing}"


def test_every_public_function_and_class_has_a_docstring() -> None:
    import inspect

    import copapy as cp

    bare = []
    for name in cp.__all__:
        obj = getattr(cp, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue  # dtypes, cp.dt, cp.io: described in prose / their module docstring
        if not (inspect.getdoc(obj) or "").strip():
            bare.append(name)
        if inspect.isclass(obj):
            bare += [f"{name}.{m}" for m, member in vars(obj).items()
                     if not m.startswith("_") and inspect.isfunction(member)
                     and not (inspect.getdoc(member) or "").strip()]
    assert not bare, f"public names without a docstring: {bare}"


ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: a path of the checkout in backticks: a folder part or a file's extension, no placeholder
#: (`src/copapy/_tables/<arch>.cpst` and `cmd_<handler>` are patterns, not paths)
CHECKOUT_PATH = re.compile(r"`([\w.,-]+(?:/[\w.,-]*)+|[\w-]+\.(?:py|c|h|md|toml|ya?ml|json|"
                           r"cpst|txt|sh|in))`")


def test_every_path_architecture_names_exists() -> None:
    """architecture.md is the map of the code: a moved or renamed file fails here, not in a
    newcomer's first hour (paths are written from the checkout's root)."""
    paths = CHECKOUT_PATH.findall(ARCHITECTURE.read_text())
    assert len(paths) > 50, paths  # the pattern still finds the page's paths
    missing = sorted({p for p in paths if not (ROOT / p).exists()})
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


DECISIONS = ROOT / "docs" / "decisions"
DECISION_HEADER = re.compile(r"# .+\n\n- \*\*Status:\*\* (?:accepted|superseded)\b.*\n"
                             r"- \*\*Date:\*\* (\d{4}-\d\d-\d\d).*\n- \*\*Issue:\*\* .+\n")


def test_every_decision_has_its_header_and_a_line_in_the_index() -> None:
    index = (DECISIONS / "README.md").read_text()
    pages = sorted(DECISIONS.glob("2*.md"))
    assert pages
    for page in pages:
        m = DECISION_HEADER.match(page.read_text())
        assert m, (f"docs/decisions/{page.name} must open with '# Title', then the lines "
                   f"'- **Status:** accepted' (or 'superseded by ...'), '- **Date:** "
                   f"YYYY-MM-DD' and '- **Issue:** ...' (docs/decisions/README.md)")
        assert page.name.startswith(m[1] + "-"), f"{page.name}: the name starts with its date"
        assert f"]({page.name})" in index, f"docs/decisions/README.md does not list {page.name}"
    listed = re.findall(r"^\| \d{4}-\d\d-\d\d \| \[.*?\]\((\d{4}-\d\d-\d\d-[^)]+\.md)\) \|",
                        index, re.M)  # the decision each row names (a status may link others)
    assert sorted(listed) == sorted(p.name for p in pages)
    assert listed == sorted(listed, key=lambda n: n[:10]), "the index is in date order"


def test_a_page_port_becomes_a_free_one() -> None:
    """teensy.md's qemu listens on 127.0.0.1:5599; the test runs it on a port free now, the
    same one in every command of the page, even while another program holds 5599."""
    page = next(p for p in PAGES if p.name == "teensy.md")
    text = "".join(b.body for b in blocks(page) if not b.mark.startswith("skip"))
    assert "127.0.0.1:5599" in text
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            busy.bind(("127.0.0.1", 5599))
            busy.listen()
        except OSError:
            pass  # already held by another program: as good a busy port
        ports: dict[str, str] = {}
        ran = with_free_ports(text, ports)
    assert "5599" not in ran and set(ports) == {"5599"}
    assert ran.count(f"127.0.0.1:{ports['5599']}") == text.count("127.0.0.1:5599") == 3
