"""Errors of graph construction and differentiation (below every other graph module)."""

from __future__ import annotations


class ShapeOrTypeError(TypeError):
    """An operation got operands of types it cannot take."""


class ShapeError(ValueError):
    """Operands whose shapes do not fit the operation (the message names both shapes)."""


class NotDifferentiableError(TypeError):
    """A gradient was asked for something that has none."""
