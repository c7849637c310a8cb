"""Write src/copapy/_tables/targets.json: the parsed toml of every architecture declaration.

Usage:
    python tools/gen_target_cache.py           # rewrite the cache
    python tools/gen_target_cache.py --check   # exit 1 if it is not current (the test suite)

The declarations (src/copapy/targets/*.toml) stay the one source; the cache only spares a
process tomllib's import and parse (~40 ms of the first @cp.jit call). copapy.arch.targets
uses an entry only when the file's length and crc32 match it, so an edited declaration is
parsed again until the cache is rewritten.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from copapy.arch.targets import CACHE_FILE, CACHE_FORMAT, file_key  # noqa: E402

PKG = ROOT / "src" / "copapy"


def cache_text() -> str:
    files = {}
    for path in sorted((PKG / "targets").glob("*.toml")):
        raw = path.read_bytes()
        files[path.name] = {"key": file_key(raw), "toml": tomllib.loads(raw.decode("utf-8"))}
    return json.dumps({"format": CACHE_FORMAT, "files": files}, indent=1) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    out = PKG / "_tables" / CACHE_FILE
    text = cache_text()
    if args.check:
        if not out.is_file() or out.read_text(encoding="utf-8") != text:
            print(f"{out} is not current: run python tools/gen_target_cache.py")
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
