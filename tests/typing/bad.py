"""Misuse a type checker must reject (each line is expected to be an error)."""

import copapy as cp

cp.value("a")  # E: str is not a number
cp.value(1.0) + "x"  # E: no str operand
cp.value(1) << 1.5  # E: shifts take ints
cp.LocalTarget().compile(1.0)  # E: compile takes values
