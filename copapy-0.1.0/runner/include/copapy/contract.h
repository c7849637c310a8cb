/* The contracts between the Python package and the C runners, declared once (issue 28):
 * element types, I/O channel kinds, protocol commands and errors, load errors, fault kinds,
 * image sections, port roles and the @cp.jit plan kinds. Each is an X-macro table: a file
 * that needs the list (an enum, a name table, a dispatch table, a count) expands the table with
 * its own X, so adding a row (a DAC channel kind, a command) changes every such list at once.
 *
 * tools/gen_contract.py reads this file (the rows only: one `X(...)` per line, numbers,
 * identifiers and string literals) and writes src/copapy/_contract.py; its --check runs in
 * the tests. Rules: codes are never renumbered (the wire and the image format carry them);
 * rows are in code order; the codes of a table with a derived COUNT are 1..COUNT with no gap
 * (runner/src/message.c checks that at compile time). Plain C, no other include: C and C++
 * programs of the kits see it through runner.h and copapy.h. */
#ifndef COPAPY_CONTRACT_H
#define COPAPY_CONTRACT_H

/* Element types of ports, I/O binding slots and Program.read/write (docs/image.md).
 * X(NAME, code, bytes, io, python name): io 1 if an I/O binding's slot may have the type. */
#define CP_DTYPE_TABLE(X)              \
    X(F32, 1, 4, 1, "float32")         \
    X(F64, 2, 8, 1, "float64")         \
    X(I32, 3, 4, 1, "int32")           \
    X(BOOL, 4, 4, 1, "bool")           \
    X(U8, 5, 1, 0, "uint8")            \
    X(I8, 6, 1, 0, "int8")

/* Directions of an I/O binding (docs/image.md), and as a mask what a channel kind's hardware
 * serves: CP_DIR_INPUT samples a channel into a slot, CP_DIR_OUTPUT drives it. */
#define CP_IO_DIRECTION_TABLE(X) \
    X(INPUT, 1)                  \
    X(OUTPUT, 2)

/* I/O channel kinds (cp.io). X(NAME, code, directions, devicetree property): directions is
 * the mask of the directions a real (not simulated) channel of the kind serves (a simulated
 * channel serves both); the property of the Zephyr `copapy,io` node that lists the kind's
 * channels (zephyr_app/dts/bindings). A new kind (as DAC was) is one row here, a factory in
 * io.py, its driver calls in zephyr_app/src/io.c and its binding property. */
#define CP_IO_KIND_TABLE(X)         \
    X(GPIO, 1, 3, gpios)            \
    X(PWM, 2, 2, pwms)              \
    X(ENCODER, 3, 1, encoders)      \
    X(ADC, 4, 1, io_channels)       \
    X(DAC, 5, 2, dacs)

/* Port roles (PORTS entries, docs/image.md). X(NAME, code) */
#define CP_PORT_ROLE_TABLE(X) \
    X(INPUT, 1)               \
    X(OUTPUT, 2)              \
    X(STATE, 3)               \
    X(CONSTANT, 4)

/* Protocol commands (docs/protocol.md). X(NAME, handler, code, effect, access): effect 1 if
 * the command changes the runner's state (a repeated request is answered from the replay
 * cache, never executed twice); access OPEN: anyone may send it unauthenticated, even to a
 * runner that requires authentication or that another client's session owns (HELLO, and
 * SESSION, which begins one); OWNER: the owner of the runner only; EVENT: sent by the runner
 * only (an event), never a request. The server dispatches request `code` to cmd_<handler>. */
#define CP_COMMAND_TABLE(X)                         \
    X(HELLO, hello, 1, 0, OPEN)                     \
    X(LOAD_BEGIN, load_begin, 2, 1, OWNER)          \
    X(LOAD_CHUNK, load_chunk, 3, 1, OWNER)          \
    X(LOAD_STATUS, load_status, 4, 0, OWNER)        \
    X(LOAD_COMMIT, load_commit, 5, 1, OWNER)        \
    X(START, start, 6, 1, OWNER)                    \
    X(STOP, stop, 7, 1, OWNER)                      \
    X(READ, read, 8, 0, OWNER)                      \
    X(WRITE, write, 9, 1, OWNER)                    \
    X(STATS, stats, 10, 0, OWNER)                   \
    X(STREAM, stream, 11, 1, OWNER)                 \
    X(RESET, reset, 12, 1, OWNER)                   \
    X(IO_READ, io_read, 13, 0, OWNER)               \
    X(IO_WRITE, io_write, 14, 1, OWNER)             \
    X(GET_PORTS, get_ports, 15, 0, OWNER)           \
    X(SESSION, session, 16, 0, OPEN)                \
    X(PING, ping, 17, 0, OWNER)                     \
    X(FAULT, fault, 18, 0, EVENT)

/* Error codes of an ERROR response (docs/protocol.md). X(NAME, code) */
#define CP_PROTOCOL_ERROR_TABLE(X) \
    X(BAD_COMMAND, 1)              \
    X(BAD_PAYLOAD, 2)              \
    X(BAD_STATE, 3)                \
    X(TOO_LARGE, 4)                \
    X(GAP, 5)                      \
    X(IMAGE_INVALID, 6)            \
    X(OUT_OF_RANGE, 7)             \
    X(NOT_WRITABLE, 8)             \
    X(VERSION, 9)                  \
    X(BUSY, 10)          /* another client owns the runner */                  \
    X(AUTH_REQUIRED, 11) /* the request must be authenticated */               \
    X(AUTH_FAILED, 12)   /* wrong key, tampered frame, or no such session */   \
    X(REPLAY, 13)        /* the counter was used already */

/* Load errors (cp_status), in the order they are checked (docs/image.md, "Load errors");
 * 0 is OK. X(NAME, code) */
#define CP_LOAD_ERROR_TABLE(X) \
    X(TRUNCATED, 1)            \
    X(MAGIC, 2)                \
    X(VERSION, 3)              \
    X(CRC, 4)                  \
    X(ARCH, 5)                 \
    X(LAYOUT, 6)               \
    X(PATCH, 7)                \
    X(NOMEM, 8)                \
    X(TOO_LARGE, 9)            \
    X(ARGUMENT, 10)            \
    X(UNSUPPORTED, 11)  /* a required section type this runner does not know (ABI 3) */  \
    X(CPU_FEATURES, 12) /* the image needs CPU features this CPU lacks (ABI 4) */ \
    X(STENCIL, 13)      /* format 2: a block names no stencil of the runner's table */ \
    X(SLOTS, 14)        /* format 2: a block's slot count is not its stencil's */ \
    X(DATA_RANGE, 15)   /* format 2: a slot's access leaves the data region */ \
    X(STRUCTURE, 16)    /* format 2: chains, fused loops or task entries malformed */ \
    X(FROZEN, 17)       /* format 2: a length or pointer slot not frozen, or written */ \
    X(TABLE, 18)        /* format 2: the image pins another stencil table */

/* Fault kinds (docs/realtime.md, "Faults and the safe state"); 0 is none.
 * X(NAME, code, display name) */
#define CP_FAULT_TABLE(X)                                                                  \
    X(SIGSEGV, 1, "SIGSEGV")      /* host: invalid memory access */                        \
    X(SIGILL, 2, "SIGILL")        /* host: illegal instruction */                          \
    X(SIGBUS, 3, "SIGBUS")        /* host: bus error (e.g. alignment check) */             \
    X(SIGFPE, 4, "SIGFPE")        /* host: arithmetic exception (integer division by 0) */ \
    X(HARDFAULT, 5, "HardFault")  /* Cortex-M exceptions */                                \
    X(MEMMANAGE, 6, "MemManage")                                                           \
    X(BUSFAULT, 7, "BusFault")                                                             \
    X(USAGEFAULT, 8, "UsageFault")                                                         \
    X(TIMEOUT, 9, "timeout")      /* a job ran longer than its budget x factor: stopped */ \
    X(WATCHDOG, 10, "watchdog")   /* the hardware watchdog's warning caught a blocked CPU */ \
    X(LINK, 11, "link timeout")   /* dead-man switch: the host link was silent too long */ \
    X(SIGTRAP, 12, "SIGTRAP")     /* host: breakpoint or trap flag (int3, icebp, EFLAGS.TF) */ \
    X(CPU_STATE, 13, "CPU state") /* a job left the FP control state, flags or signals changed */ \
    X(SIGSYS, 14, "SIGSYS")       /* host: a system call the tick thread's seccomp filter forbids */

/* Image section types (docs/image.md). X(NAME, code, v1 entry size): a reader accepts
 * entries of at least the v1 size (later versions append fields). */
#define CP_SECTION_TABLE(X)    \
    X(CODE, 1, 1)              \
    X(DATA_INIT, 2, 1)         \
    X(PATCH_KINDS, 3, 20)      \
    X(PATCHES, 4, 12)          \
    X(TASKS, 5, 24)            \
    X(PORTS, 6, 16)            \
    X(STRINGS, 7, 1)           \
    X(METADATA, 8, 1)          \
    X(LET_COPIES, 9, 16)       \
    X(IO_BINDINGS, 10, 16)     \
    X(CPU_FEATURES, 11, 8)     \
    X(BLOCKS, 12, 1)           \
    X(TABLE_PIN, 13, 32)       \
    X(FROZEN, 14, 8)

/* Kinds of the entries of a @cp.jit invoke plan (runner/python/invoke.h). X(NAME, code):
 * SCALAR a scalar argument or result; COPY a buffer argument copied in, a result copied out
 * into a new bytearray; VIEW an unused argument, a result the caller reads from its own view;
 * IN_PLACE a buffer the program reads (argument) or writes (result) through a pointer slot. */
#define CP_PLAN_KIND_TABLE(X) \
    X(SCALAR, 0)              \
    X(COPY, 1)                \
    X(VIEW, 2)                \
    X(IN_PLACE, 3)

/* ---- what every user of the tables needs */

#define CP_CONTRACT_PLUS_ONE(...) +1

/* Rows of a table: `CP_TABLE_COUNT(CP_IO_KIND_TABLE)` is 5 today (GPIO PWM ENCODER ADC DAC). */
#define CP_TABLE_COUNT(table) (0 table(CP_CONTRACT_PLUS_ONE))

#define CP_CONTRACT_DTYPE_ENUM(N, code, bytes, io, py) CP_DT_##N = code,
#define CP_CONTRACT_IO_DIRECTION_ENUM(N, code) CP_DIR_##N = code,
#define CP_CONTRACT_IO_KIND_ENUM(N, code, dirs, prop) CP_IO_##N = code,
#define CP_CONTRACT_ROLE_ENUM(N, code) CP_ROLE_##N = code,
#define CP_CONTRACT_COMMAND_ENUM(N, h, code, effect, access) CP_CMD_##N = code,
#define CP_CONTRACT_PERR_ENUM(N, code) CP_PERR_##N = code,
#define CP_CONTRACT_SECTION_ENUM(N, code, size) CP_SEC_##N = code,
#define CP_CONTRACT_PLAN_ENUM(N, code) CP_PLAN_##N = code,

enum {
    CP_DTYPE_TABLE(CP_CONTRACT_DTYPE_ENUM)
    CP_DTYPE_COUNT = CP_TABLE_COUNT(CP_DTYPE_TABLE)
};
enum { CP_IO_DIRECTION_TABLE(CP_CONTRACT_IO_DIRECTION_ENUM) CP_DIR_BOTH = 3 };
enum {
    CP_IO_KIND_TABLE(CP_CONTRACT_IO_KIND_ENUM)
    CP_IO_KIND_COUNT = CP_TABLE_COUNT(CP_IO_KIND_TABLE)
};
enum {
    CP_PORT_ROLE_TABLE(CP_CONTRACT_ROLE_ENUM)
    CP_ROLE_COUNT = CP_TABLE_COUNT(CP_PORT_ROLE_TABLE)
};
enum {
    CP_COMMAND_TABLE(CP_CONTRACT_COMMAND_ENUM)
    CP_COMMAND_COUNT = CP_TABLE_COUNT(CP_COMMAND_TABLE)
};
enum {
    CP_PROTOCOL_ERROR_TABLE(CP_CONTRACT_PERR_ENUM)
    CP_PERR_COUNT = CP_TABLE_COUNT(CP_PROTOCOL_ERROR_TABLE)
};
enum {
    CP_SECTION_TABLE(CP_CONTRACT_SECTION_ENUM)
    CP_SEC_KNOWN_MAX = CP_TABLE_COUNT(CP_SECTION_TABLE)
};
enum {
    CP_PLAN_KIND_TABLE(CP_CONTRACT_PLAN_ENUM)
    CP_PLAN_KIND_COUNT = CP_TABLE_COUNT(CP_PLAN_KIND_TABLE)
};

/* Lists of the codes for messages, string literals built from the tables at compile time:
 * CP_DTYPE_LIST is " 1=float32 2=float64 ...", CP_IO_KIND_LIST " 1=GPIO 2=PWM ...". */
#define CP_CONTRACT_DTYPE_ITEM(N, code, bytes, io, py) " " #code "=" py
#define CP_CONTRACT_IO_DTYPE_ITEM(N, code, bytes, io, py) CP_CONTRACT_IO_DTYPE_ITEM_##io(code, py)
#define CP_CONTRACT_IO_DTYPE_ITEM_1(code, py) " " #code "=" py
#define CP_CONTRACT_IO_DTYPE_ITEM_0(code, py)
#define CP_CONTRACT_IO_KIND_ITEM(N, code, dirs, prop) " " #code "=" #N
#define CP_DTYPE_LIST CP_DTYPE_TABLE(CP_CONTRACT_DTYPE_ITEM)
#define CP_IO_DTYPE_LIST CP_DTYPE_TABLE(CP_CONTRACT_IO_DTYPE_ITEM)
#define CP_IO_KIND_LIST CP_IO_KIND_TABLE(CP_CONTRACT_IO_KIND_ITEM)

#endif /* COPAPY_CONTRACT_H */
