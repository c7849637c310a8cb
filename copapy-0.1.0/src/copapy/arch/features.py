"""The CPU features an image's code needs, as its CPU_FEATURES section records them
(docs/image.md): bit k is the k-th name of the base architecture's ``[image_features] bits``;
a variant (x86_64-v3) sets the bits of its ``cpu_features``. One declaration, the tomls: the
compiler writes the bits from them, the readers name them from them."""

from __future__ import annotations

from .targets import Target, by_id, by_name, targets


class UnknownFeatureError(ValueError):
    """An image names a feature bit its architecture does not declare (a corrupted image, or
    one from a newer copapy)."""


def base_of(target: Target) -> Target:
    """The base architecture of a variant (the target itself for a base)."""
    return by_name(target.variant_of) if target.variant_of else target


def feature_mask(target: Target) -> int:
    """The CPU_FEATURES bits an image compiled for ``target`` carries (0 for a base)."""
    bits = base_of(target).feature_bits
    return sum(1 << bits.index(name) for name in target.cpu_features)


def feature_names(base: Target, mask: int) -> tuple[str, ...]:
    """The names of the bits of ``mask`` for the base architecture ``base`` (its image id's),
    in bit order; UnknownFeatureError for a bit it does not declare."""
    bits = base.feature_bits
    if mask >> len(bits):
        bit = next(k for k in range(len(bits), mask.bit_length()) if mask >> k & 1)
        raise UnknownFeatureError(
            f"the image needs CPU feature bit {bit} of {base.name}, which this copapy does "
            f"not know ({base.name} declares {len(bits)}): a corrupted image, or one from a "
            f"newer copapy")
    return tuple(name for k, name in enumerate(bits) if mask >> k & 1)


def mask_of(base: Target, names: frozenset[str]) -> int:
    """The CPU_FEATURES bits of ``names`` (names ``base`` does not declare are left out)."""
    return sum(1 << k for k, name in enumerate(base.feature_bits) if name in names)


def variant_name(arch_id: int, mask: int) -> str:
    """The architecture whose code needs exactly ``mask`` (``x86_64-v3``), else the base's
    name (0, or a set no variant declares)."""
    for t in targets():
        if t.id == arch_id and t.variant_of and feature_mask(t) == mask:
            return t.name
    return by_id(arch_id).name
