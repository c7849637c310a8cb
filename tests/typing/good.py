"""Type-checked usage: mypy --strict must accept this file and infer these types."""

from typing import Any, assert_type

import copapy as cp

x = cp.value(1.0)
i = cp.value(3)
b = cp.value(True)
assert_type(x, cp.Value[float])
assert_type(i, cp.Value[int])
assert_type(b, cp.Value[bool])
assert_type(x + 2, cp.Value[float])
assert_type(2 * x, cp.Value[float])
assert_type(i + 2, cp.Value[int])
assert_type(i + 2.5, cp.Value[float])
assert_type(i // 2, cp.Value[int])
assert_type(b + 1, cp.Value[int])
assert_type(i / 2, cp.Value[float])
assert_type(x < 1.0, cp.Value[bool])
assert_type(b & b, cp.Value[bool])
assert_type(i & 3, cp.Value[int])
assert_type(-x, cp.Value[float])
assert_type(cp.sqrt(x), cp.Value[float])
assert_type(cp.grad(x * x, x), cp.Value[float])
assert_type(cp.grad(x * x, [x]), list[cp.Value[float]])
assert_type(cp.where(x > 0, x, 0.0), cp.Value[Any])
tg = cp.LocalTarget()
tg.compile(x + 1)
tg.write(x, 2.0)
tg.run()
assert_type(tg.read(x), float | int | bool)
