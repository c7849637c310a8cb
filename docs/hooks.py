"""mkdocs hook: the benchmark results (benchmarks/RESULTS.md and its plot) are pages of the
site, read from where they live in the checkout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent


def on_files(files: Files, config: Any) -> Files:
    for path in sorted((ROOT / "benchmarks").glob("*")):
        if path.suffix in (".md", ".png"):
            files.append(File(f"benchmarks/{path.name}", str(ROOT), config["site_dir"],
                              config["use_directory_urls"]))
    return files
