"""The codes the Python package and the C runners share: GENERATED from
runner/include/copapy/contract.h by tools/gen_contract.py; do not edit (edit the
header, then run ``python tools/gen_contract.py``)."""

# generated, do not edit

from __future__ import annotations

from enum import IntEnum


class DType(IntEnum):
    """Element types of ports, I/O binding slots and Program.read/write (CP_DTYPE_TABLE)."""

    F32 = 1
    F64 = 2
    I32 = 3
    BOOL = 4
    U8 = 5
    I8 = 6


DTYPE_COUNT = 6
DTYPE_BYTES = {
    DType.F32: 4,
    DType.F64: 8,
    DType.I32: 4,
    DType.BOOL: 4,
    DType.U8: 1,
    DType.I8: 1,
}
DTYPE_IO = {
    DType.F32: 1,
    DType.F64: 1,
    DType.I32: 1,
    DType.BOOL: 1,
    DType.U8: 0,
    DType.I8: 0,
}
DTYPE_PYTHON = {
    DType.F32: 'float32',
    DType.F64: 'float64',
    DType.I32: 'int32',
    DType.BOOL: 'bool',
    DType.U8: 'uint8',
    DType.I8: 'int8',
}


class IoDirection(IntEnum):
    """Directions of an I/O binding (CP_IO_DIRECTION_TABLE)."""

    INPUT = 1
    OUTPUT = 2


IO_DIRECTION_COUNT = 2


class IoKind(IntEnum):
    """I/O channel kinds (cp.io) (CP_IO_KIND_TABLE)."""

    GPIO = 1
    PWM = 2
    ENCODER = 3
    ADC = 4
    DAC = 5


IO_KIND_COUNT = 5
IO_KIND_DIRECTIONS = {
    IoKind.GPIO: 3,
    IoKind.PWM: 2,
    IoKind.ENCODER: 1,
    IoKind.ADC: 1,
    IoKind.DAC: 2,
}
IO_KIND_DT_PROPERTY = {
    IoKind.GPIO: 'gpios',
    IoKind.PWM: 'pwms',
    IoKind.ENCODER: 'encoders',
    IoKind.ADC: 'io_channels',
    IoKind.DAC: 'dacs',
}


class PortRole(IntEnum):
    """Roles of image ports (CP_PORT_ROLE_TABLE)."""

    INPUT = 1
    OUTPUT = 2
    STATE = 3
    CONSTANT = 4


PORT_ROLE_COUNT = 4


class Command(IntEnum):
    """Protocol commands (docs/protocol.md) (CP_COMMAND_TABLE)."""

    HELLO = 1
    LOAD_BEGIN = 2
    LOAD_CHUNK = 3
    LOAD_STATUS = 4
    LOAD_COMMIT = 5
    START = 6
    STOP = 7
    READ = 8
    WRITE = 9
    STATS = 10
    STREAM = 11
    RESET = 12
    IO_READ = 13
    IO_WRITE = 14
    GET_PORTS = 15
    SESSION = 16
    PING = 17
    FAULT = 18


COMMAND_COUNT = 18
COMMAND_HANDLER = {
    Command.HELLO: 'hello',
    Command.LOAD_BEGIN: 'load_begin',
    Command.LOAD_CHUNK: 'load_chunk',
    Command.LOAD_STATUS: 'load_status',
    Command.LOAD_COMMIT: 'load_commit',
    Command.START: 'start',
    Command.STOP: 'stop',
    Command.READ: 'read',
    Command.WRITE: 'write',
    Command.STATS: 'stats',
    Command.STREAM: 'stream',
    Command.RESET: 'reset',
    Command.IO_READ: 'io_read',
    Command.IO_WRITE: 'io_write',
    Command.GET_PORTS: 'get_ports',
    Command.SESSION: 'session',
    Command.PING: 'ping',
    Command.FAULT: 'fault',
}
COMMAND_EFFECT = {
    Command.HELLO: 0,
    Command.LOAD_BEGIN: 1,
    Command.LOAD_CHUNK: 1,
    Command.LOAD_STATUS: 0,
    Command.LOAD_COMMIT: 1,
    Command.START: 1,
    Command.STOP: 1,
    Command.READ: 0,
    Command.WRITE: 1,
    Command.STATS: 0,
    Command.STREAM: 1,
    Command.RESET: 1,
    Command.IO_READ: 0,
    Command.IO_WRITE: 1,
    Command.GET_PORTS: 0,
    Command.SESSION: 0,
    Command.PING: 0,
    Command.FAULT: 0,
}
COMMAND_ACCESS = {
    Command.HELLO: 'OPEN',
    Command.LOAD_BEGIN: 'OWNER',
    Command.LOAD_CHUNK: 'OWNER',
    Command.LOAD_STATUS: 'OWNER',
    Command.LOAD_COMMIT: 'OWNER',
    Command.START: 'OWNER',
    Command.STOP: 'OWNER',
    Command.READ: 'OWNER',
    Command.WRITE: 'OWNER',
    Command.STATS: 'OWNER',
    Command.STREAM: 'OWNER',
    Command.RESET: 'OWNER',
    Command.IO_READ: 'OWNER',
    Command.IO_WRITE: 'OWNER',
    Command.GET_PORTS: 'OWNER',
    Command.SESSION: 'OPEN',
    Command.PING: 'OWNER',
    Command.FAULT: 'EVENT',
}


class ErrorCode(IntEnum):
    """Error codes of an ERROR response (CP_PROTOCOL_ERROR_TABLE)."""

    BAD_COMMAND = 1
    BAD_PAYLOAD = 2
    BAD_STATE = 3
    TOO_LARGE = 4
    GAP = 5
    IMAGE_INVALID = 6
    OUT_OF_RANGE = 7
    NOT_WRITABLE = 8
    VERSION = 9
    BUSY = 10
    AUTH_REQUIRED = 11
    AUTH_FAILED = 12
    REPLAY = 13


ERROR_CODE_COUNT = 13


class LoadError(IntEnum):
    """The runner core's load errors (cp_status; 0 is OK) (CP_LOAD_ERROR_TABLE)."""

    TRUNCATED = 1
    MAGIC = 2
    VERSION = 3
    CRC = 4
    ARCH = 5
    LAYOUT = 6
    PATCH = 7
    NOMEM = 8
    TOO_LARGE = 9
    ARGUMENT = 10
    UNSUPPORTED = 11
    CPU_FEATURES = 12
    STENCIL = 13
    SLOTS = 14
    DATA_RANGE = 15
    STRUCTURE = 16
    FROZEN = 17
    TABLE = 18


LOAD_ERROR_COUNT = 18


class FaultKind(IntEnum):
    """Fault kinds (0 is none) (CP_FAULT_TABLE)."""

    SIGSEGV = 1
    SIGILL = 2
    SIGBUS = 3
    SIGFPE = 4
    HARDFAULT = 5
    MEMMANAGE = 6
    BUSFAULT = 7
    USAGEFAULT = 8
    TIMEOUT = 9
    WATCHDOG = 10
    LINK = 11
    SIGTRAP = 12
    CPU_STATE = 13
    SIGSYS = 14


FAULT_KIND_COUNT = 14
FAULT_KIND_DISPLAY = {
    FaultKind.SIGSEGV: 'SIGSEGV',
    FaultKind.SIGILL: 'SIGILL',
    FaultKind.SIGBUS: 'SIGBUS',
    FaultKind.SIGFPE: 'SIGFPE',
    FaultKind.HARDFAULT: 'HardFault',
    FaultKind.MEMMANAGE: 'MemManage',
    FaultKind.BUSFAULT: 'BusFault',
    FaultKind.USAGEFAULT: 'UsageFault',
    FaultKind.TIMEOUT: 'timeout',
    FaultKind.WATCHDOG: 'watchdog',
    FaultKind.LINK: 'link timeout',
    FaultKind.SIGTRAP: 'SIGTRAP',
    FaultKind.CPU_STATE: 'CPU state',
    FaultKind.SIGSYS: 'SIGSYS',
}


class Section(IntEnum):
    """Image section types (docs/image.md) (CP_SECTION_TABLE)."""

    CODE = 1
    DATA_INIT = 2
    PATCH_KINDS = 3
    PATCHES = 4
    TASKS = 5
    PORTS = 6
    STRINGS = 7
    METADATA = 8
    LET_COPIES = 9
    IO_BINDINGS = 10
    CPU_FEATURES = 11
    BLOCKS = 12
    TABLE_PIN = 13
    FROZEN = 14


SECTION_COUNT = 14
SECTION_V1_ENTRY_SIZE = {
    Section.CODE: 1,
    Section.DATA_INIT: 1,
    Section.PATCH_KINDS: 20,
    Section.PATCHES: 12,
    Section.TASKS: 24,
    Section.PORTS: 16,
    Section.STRINGS: 1,
    Section.METADATA: 1,
    Section.LET_COPIES: 16,
    Section.IO_BINDINGS: 16,
    Section.CPU_FEATURES: 8,
    Section.BLOCKS: 1,
    Section.TABLE_PIN: 32,
    Section.FROZEN: 8,
}


class PlanKind(IntEnum):
    """Kinds of the entries of a @cp.jit invoke plan (CP_PLAN_KIND_TABLE)."""

    SCALAR = 0
    COPY = 1
    VIEW = 2
    IN_PLACE = 3


PLAN_KIND_COUNT = 4
