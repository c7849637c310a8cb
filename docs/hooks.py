"""mkdocs hook: pages of the site that live outside docs/ (the benchmark results with their plots
and data, the kits' READMEs) are read from where they are in the checkout, and a link written
for the checkout (``../benchmarks/RESULTS.md`` from docs/kits.md, which GitHub follows) is
pointed at that file's place in the site, so one link works in both."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
#: files of the checkout that are pages of the site: (folder, glob, folder in the site)
OUTSIDE = [("benchmarks", "**/*.md", "benchmarks"), ("benchmarks", "**/*.png", "benchmarks"),
           ("benchmarks", "jitter/*.json", "benchmarks"),
           ("src/copapy/kits", "*/README.md", "kits")]
#: a Markdown link or image target: ](target) or ](target#anchor)
LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?\)")


def on_files(files: Files, config: Any) -> Files:
    for folder, pattern, site in OUTSIDE:
        for path in sorted((ROOT / folder).glob(pattern)):
            uri = f"{site}/{path.relative_to(ROOT / folder).as_posix()}"
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    """Links to a file of the checkout that the site holds (under another path) lead there."""
    in_site = {Path(f.abs_src_path).resolve(): f.src_uri for f in files if f.abs_src_path}
    here = Path(page.file.abs_src_path or "").parent
    page_dir = posixpath.dirname(page.file.src_uri)

    def point(m: re.Match[str]) -> str:
        target = m[2]
        if "://" in target or target.startswith(("/", "mailto:")):
            return m[0]
        uri = in_site.get((here / target).resolve())
        if uri is None or posixpath.normpath(posixpath.join(page_dir, target)) == uri:
            return m[0]  # not a file of the site (mkdocs warns), or already its site path
        return f"{m[1]}{posixpath.relpath(uri, page_dir or '.')}{m[3] or ''})"

    return LINK.sub(point, markdown)
