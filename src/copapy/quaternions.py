"""Unit quaternions for orientations: w + x·i + y·j + z·k, components are traced values."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Never

from . import functions
from .arrays import Array, asarray
from .functions import atan2, cos, sin, sqrt, where
from .graph.node import Node
from .value import Value, wrap


class Quaternion:
    """A quaternion of four traced scalars (always unpacked: 4 elements)."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, w: Any, x: Any, y: Any, z: Any) -> None:
        self.w, self.x, self.y, self.z = (wrap(c) for c in (w, x, y, z))

    def __repr__(self) -> str:
        return "<copapy quaternion>"

    def components(self) -> list[Value[Any]]:
        """[w, x, y, z]."""
        return [self.w, self.x, self.y, self.z]

    def __iter__(self) -> Iterator[Value[Any]]:
        """w, x, y, z (``w, x, y, z = q``, ``cp.Task(*q)``)."""
        return iter(self.components())

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> Value[Any]:
        """Component ``i`` of (w, x, y, z)."""
        return self.components()[i]

    def nodes(self) -> list[Node]:
        """What the compiler computes (the traced-value protocol of value.Traced)."""
        return [c.node for c in self.components()]

    def __mul__(self, o: Any) -> Quaternion:
        if not isinstance(o, Quaternion):
            return Quaternion(self.w * o, self.x * o, self.y * o, self.z * o)
        a, b = self, o
        return Quaternion(a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z,
                          a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
                          a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
                          a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w)

    def __rmul__(self, o: Any) -> Quaternion:
        """A scalar times the quaternion (a quaternion on the left is ``__mul__``)."""
        return Quaternion(o * self.w, o * self.x, o * self.y, o * self.z)

    def __truediv__(self, o: Any) -> Quaternion:
        if isinstance(o, Quaternion):
            return NotImplemented
        return Quaternion(self.w / o, self.x / o, self.y / o, self.z / o)

    def __add__(self, o: Any) -> Quaternion:
        if not isinstance(o, Quaternion):
            return NotImplemented  # Python's TypeError: a quaternion adds quaternions
        return Quaternion(self.w + o.w, self.x + o.x, self.y + o.y, self.z + o.z)

    def __sub__(self, o: Any) -> Quaternion:
        if not isinstance(o, Quaternion):
            return NotImplemented
        return Quaternion(self.w - o.w, self.x - o.x, self.y - o.y, self.z - o.z)

    def __neg__(self) -> Quaternion:
        return Quaternion(-self.w, -self.x, -self.y, -self.z)

    def conjugate(self) -> Quaternion:
        """w - x·i - y·j - z·k (the inverse rotation of a unit quaternion)."""
        return Quaternion(self.w, -self.x, -self.y, -self.z)

    def norm(self) -> Value[float]:
        """sqrt(w² + x² + y² + z²), without overflow or underflow in the squares (0 for the
        zero quaternion, inf if a component is infinite)."""
        scale, scaled = _scaled(self.components())
        length = scale * _length(scaled)
        return where(scale == 0.0, 0.0, where(scale == math.inf, math.inf, length))

    def normalize(self) -> Quaternion:
        """This quaternion divided by its norm (a unit quaternion); the components are first
        divided by the largest |component|, so tiny (subnormal) and huge quaternions
        normalise too. The zero quaternion, and one with an infinite or NaN component, give
        NaN (no direction)."""
        _, scaled = _scaled(self.components())
        n = _length(scaled)
        return Quaternion(*(c / n for c in scaled))

    def rotate(self, v: Any) -> Array:
        """Rotate a 3-vector: q ⊗ (0, v) ⊗ q*, for a unit quaternion."""
        vec = asarray(v, self.w.dtype).to_unpacked()  # constants weak, as in an operation
        if vec.shape != (3,):
            raise ValueError(f"rotate needs a 3-vector, got shape {vec.shape}")
        vx, vy, vz = vec.items()
        # v + 2w (u x v) + 2 u x (u x v) with u = (x, y, z): fewer operations than two products
        ux, uy, uz = self.x, self.y, self.z
        tx = 2.0 * (uy * vz - uz * vy)
        ty = 2.0 * (uz * vx - ux * vz)
        tz = 2.0 * (ux * vy - uy * vx)
        return Array((3,), items=[vx + self.w * tx + (uy * tz - uz * ty),
                                  vy + self.w * ty + (uz * tx - ux * tz),
                                  vz + self.w * tz + (ux * ty - uy * tx)])

    def to_rotation_matrix(self) -> Array:
        """The 3x3 rotation matrix of a unit quaternion (unpacked)."""
        w, x, y, z = self.components()
        return Array((3, 3), items=[
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])

    def to_axis_angle(self) -> tuple[Array, Value[float]]:
        """(unit axis, angle in [0, 2π]); the axis is (1, 0, 0) for the identity rotation."""
        s = Quaternion(0.0, self.x, self.y, self.z).norm()
        angle = 2.0 * atan2(s, self.w)
        safe = where(s > 1e-12, s, 1.0)
        axis = Array((3,), items=[where(s > 1e-12, self.x / safe, 1.0),
                                  where(s > 1e-12, self.y / safe, 0.0),
                                  where(s > 1e-12, self.z / safe, 0.0)])
        return axis, angle

    @staticmethod
    def from_axis_angle(axis: Any, angle: Any) -> Quaternion:
        """The rotation by ``angle`` radians about ``axis`` (a 3-vector of any nonzero length;
        normalised here, also when tiny or huge). A zero axis gives NaN in x, y, z."""
        ax = asarray(axis).to_unpacked()
        _, (x, y, z) = _scaled(ax.items())
        n = _length([x, y, z])
        half = wrap(angle) * 0.5
        s = sin(half) / n
        return Quaternion(cos(half), x * s, y * s, z * s)

    @staticmethod
    def from_euler(*args: Never, roll: Any, pitch: Any, yaw: Any) -> Quaternion:
        """Aerospace angles (radians): yaw about z, then pitch about new y, then roll about new x.

        Keyword-only, because conventions disagree on the order (scipy's
        ``Rotation.from_euler("ZYX", [yaw, pitch, roll])`` is the same rotation); a positional
        call is a TypeError naming the keywords (``*args`` is there only to catch it).
        """
        if args:
            raise TypeError(f"Quaternion.from_euler takes its angles by name: "
                            f"from_euler(roll=..., pitch=..., yaw=...), got {len(args)} positional "
                            f"argument(s) (the order (roll, pitch, yaw) vs (yaw, pitch, roll) is "
                            f"too easy to get wrong)")
        cr, sr = cos(wrap(roll) * 0.5), sin(wrap(roll) * 0.5)
        cp_, sp = cos(wrap(pitch) * 0.5), sin(wrap(pitch) * 0.5)
        cy, sy = cos(wrap(yaw) * 0.5), sin(wrap(yaw) * 0.5)
        return Quaternion(cr * cp_ * cy + sr * sp * sy, sr * cp_ * cy - cr * sp * sy,
                          cr * sp * cy + sr * cp_ * sy, cr * cp_ * sy - sr * sp * cy)

    @staticmethod
    def from_rotation_matrix(m: Any) -> Quaternion:
        """From a proper rotation matrix (Shepperd's method, branch-free with cp.where)."""
        r = asarray(m).to_unpacked()
        if r.shape != (3, 3):
            raise ValueError(f"a rotation matrix is 3x3, got {r.shape}")
        e = r.items()
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = e
        trace = m00 + m11 + m22
        cands = []
        s0 = sqrt(where(trace > -1.0, trace + 1.0, 1.0)) * 2.0
        cands.append(Quaternion(0.25 * s0, (m21 - m12) / s0, (m02 - m20) / s0, (m10 - m01) / s0))
        s1 = sqrt(where(1.0 + m00 - m11 - m22 > 0.0, 1.0 + m00 - m11 - m22, 1.0)) * 2.0
        cands.append(Quaternion((m21 - m12) / s1, 0.25 * s1, (m01 + m10) / s1, (m02 + m20) / s1))
        s2 = sqrt(where(1.0 + m11 - m00 - m22 > 0.0, 1.0 + m11 - m00 - m22, 1.0)) * 2.0
        cands.append(Quaternion((m02 - m20) / s2, (m01 + m10) / s2, 0.25 * s2, (m12 + m21) / s2))
        s3 = sqrt(where(1.0 + m22 - m00 - m11 > 0.0, 1.0 + m22 - m00 - m11, 1.0)) * 2.0
        cands.append(Quaternion((m10 - m01) / s3, (m02 + m20) / s3, (m12 + m21) / s3, 0.25 * s3))
        use0 = trace > 0.0
        use1 = (m00 > m11) & (m00 > m22)
        use2 = m11 > m22

        def pick(i: int) -> Value[Any]:
            comps = [c.components()[i] for c in cands]
            return where(use0, comps[0], where(use1, comps[1], where(use2, comps[2], comps[3])))

        return Quaternion(pick(0), pick(1), pick(2), pick(3))

    def angle_to(self, other: Quaternion) -> Value[float]:
        """The rotation angle between two orientations (radians, 0..π): 2·atan2(|vec(d)|, |w(d)|)
        of d = self* ⊗ other, accurate for small angles (acos of the dot product loses them:
        it read 0 for 2e-4 rad in float32) and independent of the quaternions' lengths."""
        d = self.conjugate() * other
        return 2.0 * atan2(Quaternion(0.0, d.x, d.y, d.z).norm(), functions.abs(d.w))


def _scaled(comps: list[Value[Any]]) -> tuple[Value[Any], list[Value[Any]]]:
    """(m, comps / m) with m the largest |component|: the squares of the scaled components
    neither overflow nor underflow (one of them is 1)."""
    m = functions.abs(comps[0])
    for c in comps[1:]:
        m = functions.max(m, functions.abs(c))
    return m, [c / m for c in comps]


def _length(comps: list[Value[Any]]) -> Value[float]:
    total = comps[0] * comps[0]
    for c in comps[1:]:
        total = total + c * c
    return sqrt(total)


def quaternion(w: Any, x: Any, y: Any, z: Any) -> Quaternion:
    """The quaternion w + x·i + y·j + z·k from four numbers or traced scalars (``cp.value``);
    multiplication composes rotations, ``q.rotate(v)`` rotates a 3-vector."""
    return Quaternion(w, x, y, z)
