"""Type stubs of the host build of the math kernels (stencils/host/kernels_module.c)."""

from typing import Any

Buffer = bytes | bytearray | memoryview | Any

def call(name: str, is_f64: bool, *args: float) -> float: ...
def apply(name: str, is_f64: bool, out: Buffer, a: Buffer, b: Buffer = ...) -> None: ...
