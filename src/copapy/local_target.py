"""LocalTarget: compile and run programs in this process (native code or an emulated CPU)."""

from __future__ import annotations

from typing import Any, Protocol

from . import dtypes as dt
from .compiler import CompiledProgram, compile_program
from .compiler.layout import ROLE_INPUT, Port
from .value import Value


class _Program(Protocol):
    def run(self, task: int = 0) -> None: ...
    def read(self, offset: int, dtype: int) -> Any: ...
    def write(self, offset: int, dtype: int, value: Any) -> None: ...


class TargetError(RuntimeError):
    """A target was used in a way that cannot work (nothing compiled, wrong value, ...)."""


def host_architecture() -> str:
    from . import _runner
    from .image import ARCH_NAMES

    name = ARCH_NAMES.get(_runner.ARCH)
    if name is None:
        raise TargetError("this machine's CPU has no native copapy runner; "
                          "use LocalTarget(arch=...) with the unicorn emulator")
    return name


class LocalTarget:
    """Compile values into machine code and run it in this process.

    ``arch`` defaults to this machine's architecture (native execution); any other supported
    architecture runs on the unicorn emulator (``pip install 'copapy[emu]'``).
    """

    def __init__(self, arch: str | None = None) -> None:
        self.arch = arch or host_architecture()
        self._compiled: CompiledProgram | None = None
        self._program: _Program | None = None
        self._ports: dict[Any, Port] = {}
        #: inputs the program does not depend on (e.g. simplified away): writes are kept here
        self._detached: dict[Any, float | int | bool] = {}

    def compile(self, *values: Value[Any]) -> None:
        """Compile ``values`` (and everything they depend on) into one program and load it."""
        if not values:
            raise TargetError("compile() needs at least one value to compute")
        nodes = []
        for v in values:
            if not isinstance(v, Value):
                raise TypeError(f"compile() takes copapy values, got {type(v).__name__}")
            nodes.append(v.node)
        compiled = compile_program(nodes, self.arch)
        program = self._load(compiled.image)
        # only now replace the running program: a failed compile or load leaves it intact
        self._compiled = compiled
        self._program = program
        self._ports = compiled.ports
        self._detached = {}
        self.run = program.run  # type: ignore[method-assign]  # direct C call, no wrapper

    def _load(self, image: bytes) -> _Program:
        from .image import ARCH_IDS

        native = None
        try:
            from . import _runner

            native = _runner.ARCH
        except ImportError:
            pass
        if native == ARCH_IDS[self.arch]:
            from .runtime.native import load_native

            native_program: _Program = load_native(image)
            return native_program
        if self.arch == "cortex-m55":
            # ARMv8.1-M (MVE, new conditional instructions) runs only on qemu-system
            from .runtime.qemu_backend import QemuProgram

            return QemuProgram(image, self.arch)
        from .runtime.unicorn_backend import UnicornProgram

        return UnicornProgram(image, self.arch)

    def run(self, task: int = 0) -> None:
        """Execute the compiled program once."""
        raise TargetError("nothing compiled yet: call tg.compile(values) first")

    @property
    def image(self) -> bytes:
        """The program image (docs/image.md) of the last compile."""
        if self._compiled is None:
            raise TargetError("nothing compiled yet: call tg.compile(values) first")
        return self._compiled.image

    @property
    def program_info(self) -> CompiledProgram:
        if self._compiled is None:
            raise TargetError("nothing compiled yet: call tg.compile(values) first")
        return self._compiled

    def _port(self, v: Value[Any]) -> Port:
        if not isinstance(v, Value):
            raise TypeError(f"expected a copapy value, got {type(v).__name__}")
        port = self._ports.get(v.node)
        if port is None:
            if self._compiled is None:
                raise TargetError("nothing compiled yet: call tg.compile(values) first")
            raise TargetError(f"{v!r} is not part of the compiled program: pass it to "
                              f"tg.compile() (inputs and compiled values can be read)")
        return port

    def read(self, v: Value[Any]) -> float | int | bool:
        """Current value of an input or a compiled value, as a Python number."""
        if isinstance(v, Value) and v.node not in self._ports and v.node.op == "input":
            return self._detached.get(v.node, v.node.dtype.unpack(v.node.attr[2]))  # type: ignore[index]
        port = self._port(v)
        assert self._program is not None
        result: float | int | bool = self._program.read(port.offset, port.dtype.code)
        return result

    def write(self, v: Value[Any], x: float | int | bool) -> None:
        """Set an input (a ``cp.value``) for the following runs."""
        if isinstance(v, Value) and v.node not in self._ports and v.node.op == "input":
            # the program does not depend on this input: accept the value, nothing to do
            self._detached[v.node] = _checked(x, v.node.dtype)
            return
        port = self._port(v)
        if port.role != ROLE_INPUT:
            raise TargetError(f"{v!r} is computed by the program, not an input; only values made "
                              f"with cp.value() can be written")
        assert self._program is not None
        self._program.write(port.offset, port.dtype.code, _checked(x, port.dtype))


def _checked(x: Any, dtype: dt.DType) -> float | int | bool:
    """``x`` as a Python number fit for a ``dtype`` input, or an error naming the problem."""
    if isinstance(x, Value):
        raise TypeError("write() takes a Python number, not a traced value")
    item = getattr(x, "item", None)
    if callable(item) and getattr(x, "ndim", 0) == 0:
        x = item()
    if not isinstance(x, bool | int | float):
        raise TypeError(f"cannot write {type(x).__name__} {x!r} into a {dtype.name} input")
    if dtype.is_int:
        if isinstance(x, float):
            if not x.is_integer():
                raise TypeError(f"{x!r} would be truncated writing an int32 input; pass an int")
            x = int(x)
        if not dt.INT32_MIN <= x <= dt.INT32_MAX:
            raise OverflowError(f"{x} does not fit in the int32 input")
    if dtype.is_bool and not isinstance(x, bool) and x not in (0, 1):
        raise TypeError(f"write {x!r} into a bool input: pass True or False")
    checked: float | int | bool = x
    return checked
