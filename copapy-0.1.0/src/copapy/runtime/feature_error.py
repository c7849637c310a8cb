"""The CpuFeatureError of a runner's refusal, shared by the native loader and SerialTarget
(apart from runtime.load so that the loader can import the native runner without a cycle)."""

from __future__ import annotations

from .. import image as im
from ..arch.features import feature_names, variant_name
from ..arch.targets import by_id
from .errors import CpuFeatureError


def features_error(arch_id: int, image: bytes, missing_bits: int,
                   where: str = "this CPU") -> CpuFeatureError:
    """The CpuFeatureError of a runner's CPU_FEATURES refusal (its detail: the missing
    bits), naming the features from the architecture's declaration."""
    base = by_id(arch_id)
    mask = im.required_features(image, arch_id)
    missing = feature_names(base, missing_bits)
    return CpuFeatureError(variant_name(arch_id, mask), base.name,
                           feature_names(base, mask) or missing, missing, where)
