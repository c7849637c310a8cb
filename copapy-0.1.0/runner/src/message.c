/* Error reports without libc: a tiny formatter for cp_error.message and the name tables. */
#include "internal.h"

typedef struct cp_msg {
    char *buf;
    size_t cap; /* bytes usable including the NUL; 0 = discard */
    size_t len;
} cp_msg;

static void msg_char(cp_msg *m, char c)
{
    if (m->len + 1 < m->cap) {
        m->buf[m->len++] = c;
        m->buf[m->len] = '\0';
    }
}

static void msg_str(cp_msg *m, const char *s)
{
    while (*s != '\0') {
        msg_char(m, *s++);
    }
}

static void msg_digits(cp_msg *m, uint64_t v, unsigned radix)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = digits[v % radix];
        v /= radix;
    } while (v != 0);
    while (n > 0) {
        msg_char(m, tmp[--n]);
    }
}

static void msg_signed(cp_msg *m, uint64_t bits)
{
    if (bits >> 63) {
        msg_char(m, '-');
        msg_digits(m, ~bits + 1u, 10); /* two's complement magnitude, valid for INT64_MIN too */
    } else {
        msg_digits(m, bits, 10);
    }
}

const char *cp_arch_name(uint32_t arch)
{
    static const char *const names[] = {
        "unknown", "x86_64", "x86", "aarch64", "armv6", "armv7a", "cortex-m4",
        "cortex-m7", "cortex-m55", "rv32", "rv64", "tricore",
    };
    return arch < sizeof(names) / sizeof(names[0]) ? names[arch] : names[0];
}

/* Every code of a table lies in its range (1..COUNT, plan kinds 0..COUNT - 1); with the
 * switches below (a duplicate case is an error) and tools/gen_contract.py's check that codes
 * are unique, a table's codes are exactly its range, which every `1 <= code <= COUNT` check
 * and every array indexed by a code relies on. */
#define IN_RANGE(what, N, code, lo, count) \
    _Static_assert((code) >= (lo) && (code) < (lo) + (count), what " " #N " is out of range");
#define IO_KIND_AT(N, code, ...) IN_RANGE("I/O kind", N, code, 1, CP_IO_KIND_COUNT)
#define DTYPE_AT(N, code, ...) IN_RANGE("dtype", N, code, 1, CP_DTYPE_COUNT)
#define SECTION_AT(N, code, ...) IN_RANGE("section", N, code, 1, CP_SEC_KNOWN_MAX)
#define ROLE_AT(N, code) IN_RANGE("role", N, code, 1, CP_ROLE_COUNT)
#define COMMAND_AT(N, h, code, ...) IN_RANGE("command", N, code, 1, CP_COMMAND_COUNT)
#define PERR_AT(N, code) IN_RANGE("protocol error", N, code, 1, CP_PERR_COUNT)
#define STATUS_AT(N, code) IN_RANGE("load error", N, code, 1, CP_STATUS_COUNT - 1)
#define FAULT_AT(N, code, name) IN_RANGE("fault kind", N, code, 1, CP_FAULT_KIND_COUNT - 1)
#define PLAN_AT(N, code) IN_RANGE("plan kind", N, code, 0, CP_PLAN_KIND_COUNT)
CP_IO_KIND_TABLE(IO_KIND_AT)
CP_DTYPE_TABLE(DTYPE_AT)
CP_SECTION_TABLE(SECTION_AT)
CP_PORT_ROLE_TABLE(ROLE_AT)
CP_COMMAND_TABLE(COMMAND_AT)
CP_PROTOCOL_ERROR_TABLE(PERR_AT)
CP_LOAD_ERROR_TABLE(STATUS_AT)
CP_FAULT_TABLE(FAULT_AT)
CP_PLAN_KIND_TABLE(PLAN_AT)

#define NAME_CASE(N, code, ...) case code: return #N;
#define FAULT_NAME_CASE(N, code, name) case code: return name;
#define COMMAND_NAME_CASE(N, h, code, ...) case code: return #N;

const char *cp_section_name(uint32_t type)
{
    switch (type) {
    CP_SECTION_TABLE(NAME_CASE)
    default: return "unknown";
    }
}

const char *cp_status_name(cp_status status)
{
    switch ((unsigned)status) {
    case CP_OK: return "OK";
    CP_LOAD_ERROR_TABLE(NAME_CASE)
    default: return "UNKNOWN";
    }
}

const char *cp_fault_name(uint32_t kind)
{
    switch (kind) {
    case CP_FAULT_NONE: return "none";
    CP_FAULT_TABLE(FAULT_NAME_CASE)
    default: return "unknown fault";
    }
}

const char *cp_io_kind_name(uint32_t kind)
{
    switch (kind) {
    CP_IO_KIND_TABLE(NAME_CASE)
    default: return "unknown";
    }
}

const char *cp_command_name(uint32_t command)
{
    switch (command) {
    CP_COMMAND_TABLE(COMMAND_NAME_CASE)
    default: return "unknown";
    }
}

const char *cp_protocol_error_name(uint32_t code)
{
    switch (code) {
    CP_PROTOCOL_ERROR_TABLE(NAME_CASE)
    default: return "unknown";
    }
}

/* Honours the caller's struct_size so an older, smaller cp_error is never overrun. */
static cp_msg error_begin(cp_error *err, cp_status code, uint32_t detail)
{
    cp_msg m = {0, 0, 0};
    if (err == NULL) {
        return m;
    }
    size_t known = err->struct_size;
    if (known >= offsetof(cp_error, code) + sizeof(err->code)) {
        err->code = (uint32_t)code;
    }
    if (known >= offsetof(cp_error, detail) + sizeof(err->detail)) {
        err->detail = detail;
    }
    if (known > offsetof(cp_error, message)) {
        size_t cap = known - offsetof(cp_error, message);
        m.buf = err->message;
        m.cap = cap < sizeof(err->message) ? cap : sizeof(err->message);
        m.buf[0] = '\0';
    }
    return m;
}

void cp_ok(cp_error *err)
{
    (void)error_begin(err, CP_OK, 0);
}

cp_status cp_fail(cp_error *err, cp_status code, uint32_t detail, const char *fmt,
                  const uint64_t *args, size_t nargs)
{
    cp_msg m = error_begin(err, code, detail);
    if (m.cap == 0) {
        return code;
    }
    size_t next = 0;
    for (const char *p = fmt; *p != '\0'; p++) {
        if (*p != '%' || p[1] == '\0') {
            msg_char(&m, *p);
            continue;
        }
        char spec = *++p;
        if (spec == '%') {
            msg_char(&m, '%');
            continue;
        }
        if (next >= nargs) {
            msg_char(&m, '?'); /* a formatting slip must not read past the arguments */
            continue;
        }
        uint64_t v = args[next++];
        switch (spec) {
        case 'u':
            msg_digits(&m, v, 10);
            break;
        case 'd':
            msg_signed(&m, v);
            break;
        case 'x':
            msg_str(&m, "0x");
            msg_digits(&m, v, 16);
            break;
        case 'a':
            msg_str(&m, cp_arch_name(v > UINT32_MAX ? 0u : (uint32_t)v));
            msg_str(&m, " (");
            msg_digits(&m, v, 10);
            msg_char(&m, ')');
            break;
        case 'S':
            msg_str(&m, cp_section_name(v > UINT32_MAX ? 0u : (uint32_t)v));
            break;
        case 's':
            if (v != 0) {
                msg_str(&m, (const char *)(uintptr_t)v);
            }
            break;
        default:
            msg_char(&m, '?');
            break;
        }
    }
    return code;
}
