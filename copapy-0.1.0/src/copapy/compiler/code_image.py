"""A format-2 image (stencil ids) rebuilt as the format-1 image of the same program (machine
code plus the patches that depend on the load address), for the emulated back ends (unicorn,
qemu-user), which run code but carry no stencil table (docs/image.md, "Format 2").

The relink is ``manifest.materialise``, the one Python copy of the runner's placement, so the
code is byte-identical to what a runner with the table builds. A malformed manifest raises
ValueError naming what is wrong; the rules of verified loading (ranges, frozen slots) are the
runner's (runner/src/blocks.c): an emulator contains whatever the code does."""

from __future__ import annotations

from .. import image as im
from ..arch.patchkind import PatchKind
from ..arch.targets import by_name
from .manifest import ManifestError, decode, materialise
from .runner_table import VERIFIED_ARCHS, runner_table
from .table import load_table


def code_image(blob: bytes) -> bytes:
    """``blob`` as format 1 (unchanged if it is format 1 already); ValueError if its
    manifest does not fit the stencil table it pins."""
    img = im.parse(blob)
    if img.format_version == im.FORMAT_VERSION_CODE:
        return blob
    known = sorted(a for a in VERIFIED_ARCHS if by_name(a).id == img.arch)
    pinned = [a for a in known if runner_table(a).pin == img.table_pin]
    if not pinned:
        raise ValueError(f"TABLE: the image was compiled against stencil table "
                         f"{img.table_pin[:8].hex()}..., which this copapy does not have "
                         f"(it has {', '.join(known) or 'none'} for this architecture): "
                         "compile the program again with this copapy")
    arch = pinned[0]
    table = load_table(arch)
    try:
        chains = decode(img.blocks)
        names = table.names()
        if any(sid >= len(names) for chain in chains for sid, _ in chain):
            raise ManifestError(f"a stencil id beyond the table's {len(names)}")
        left: list[tuple[int, PatchKind, int]] = []
        code, entries = materialise(table, chains, img.data_offset, left=left)
    except (ManifestError, IndexError, KeyError) as exc:
        raise ValueError(f"STRUCTURE: the image's BLOCKS manifest does not fit the {arch} "
                         f"stencil table: {exc}") from exc
    if len(code) != img.code_size or any(t.entry >= len(entries) for t in img.tasks):
        raise ValueError(f"STRUCTURE: the blocks make {len(code)} bytes of code and "
                         f"{len(entries)} chains; the header says {img.code_size} bytes")
    kinds, index = im.kinds_table([kind for _, kind, _ in left])
    img.code = code
    img.kinds = kinds
    img.patches = [im.ImagePatch(site, index[kind], target) for site, kind, target in left]
    img.tasks = [t._replace(entry=entries[t.entry]) for t in img.tasks]
    img.blocks, img.table_pin, img.frozen, img.code_size = b"", b"", [], 0
    return img.to_bytes()
