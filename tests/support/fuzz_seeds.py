"""Seed corpus of the format-2 libFuzzer harness (runner/tests/fuzz_format2.c): the honest
x86_64 programs of the verified-loading corpus (tests/support/image_corpus.py: scalar chains,
packed arrays, fused loops, strided views, fori_loop) and its crafted refusals, one file
each. Usage: python -m tests.support.fuzz_seeds DIR"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from copapy.compiler.program import compile_program

from .image_corpus import corpus, nodes, programs

ARCH = "x86_64"


def seeds() -> list[tuple[str, str, bytes]]:
    """(name, the load status expected, image) of every honest program ("OK"), then of every
    crafted image (the rule that refuses it)."""
    found = [(name, "OK", compile_program(nodes(outs), ARCH).image)
             for name, outs in programs()]
    return found + corpus(ARCH)


def write(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    images = seeds()
    for _name, _expected, image in images:
        (directory / hashlib.sha1(image).hexdigest()).write_bytes(image)
    return len(images)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.support.fuzz_seeds DIR")
    print(f"{write(Path(sys.argv[1]))} seed images in {sys.argv[1]}")
