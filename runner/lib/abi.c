/* libcopapy's exported ABI (runner/include/copapy/copapy.h) over the runner core. This layer is
 * host code: it may allocate (at load time only) and use libc; the core it wraps stays
 * libc-free. Nothing here runs during a tick except the scheduler and the I/O callbacks. */
#define COPAPY_BUILDING_LIBRARY 1

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copapy/copapy.h"
#include "copapy/platform_posix.h"
#include "copapy/runner.h"
#include "../src/internal.h"
#include "abi_internal.h"

enum { IO_CHANNELS = 256, DEFAULT_TICK_NS = 1000000 };

/* Fault containment defaults (copapy_options' budget fields): the budget factor of the host
 * runner; a 20 ms minimum, polled every 10 ms, so the supervisor wakes rarely beside a 1 kHz
 * loop (the host runner polls every 2 ms), and 60 s for copapy_run of a task that declares no
 * time at all (the in-process on_request). The supervisor runs at SCHED_FIFO 90 where
 * permitted: above a real-time loop thread (80) whose chain does not return. */
#define DEFAULT_BUDGET_FACTOR 10u
#define DEFAULT_BUDGET_MIN_NS 20000000ull
#define REQUEST_BUDGET_NS 60000000000ull
#define WATCHDOG_PRIORITY 90

struct copapy_program {
    cp_program prog;
    cp_sched sched;
    cp_platform platform;
    uint32_t port_count;
    copapy_port *ports;
    char *strings;
    double io[CP_IO_KIND_COUNT][IO_CHANNELS];
    uint32_t budget_factor;        /* 0: no time limit */
    uint64_t budget_min_ns;
};

/* ---- errors */

static const char *const status_names[] = {
    "OK", "ARGUMENT", "IMAGE", "NO_PORT", "NOMEM", "IO", "READ_ONLY", "FAULTED", "SYSTEM",
    "STOPPED",
};

const char *copapy_status_name(int status)
{
    if (status < 0 || (size_t)status >= sizeof(status_names) / sizeof(status_names[0])) {
        return "UNKNOWN";
    }
    return status_names[status];
}

uint32_t copapy_abi_version(void)
{
    return COPAPY_ABI_VERSION;
}

/* Writes the caller's error struct: only the prefix its struct_size covers. */
static void put_error(copapy_error *err, const copapy_error *e)
{
    if (err == NULL || err->struct_size < offsetof(copapy_error, status) + sizeof(int32_t)) {
        return;
    }
    uint32_t size = err->struct_size < sizeof(*e) ? err->struct_size : (uint32_t)sizeof(*e);
    memcpy((uint8_t *)err + sizeof(uint32_t), (const uint8_t *)e + sizeof(uint32_t),
           size - sizeof(uint32_t));
    if (size == sizeof(*e)) {
        err->message[sizeof(err->message) - 1] = '\0';
    }
}

int copapy_abi_fail(copapy_error *err, int status, uint32_t code, uint32_t detail,
                    const char *name, const char *message)
{
    copapy_error e;
    memset(&e, 0, sizeof(e));
    e.struct_size = sizeof(e);
    e.status = status;
    e.code = code;
    e.detail = detail;
    snprintf(e.name, sizeof(e.name), "%s", name != NULL ? name : copapy_status_name(status));
    snprintf(e.message, sizeof(e.message), "%s", message != NULL ? message : "");
    put_error(err, &e);
    return status;
}

static void ok(copapy_error *err)
{
    (void)copapy_abi_fail(err, COPAPY_OK, 0, 0, "OK", "");
}

/* A caller struct is usable if it covers at least its ABI-1 fields (a struct that grew later
 * names its ABI-1 end in ABI1_SIZE_<type>); an appended field is read only if covered. */
#define ABI1_SIZE_copapy_options offsetof(copapy_options, budget_factor)
#define ABI1_SIZE(type) (sizeof(type))
#define USABLE(p, type) ((p) != NULL && (p)->struct_size >= ABI1_SIZE(type))
#define USABLE_AT(p, type, size) ((p) != NULL && (p)->struct_size >= (size))
#define COVERS(p, type, field) \
    ((p)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

/* ---- I/O and clock callbacks of the scheduler */

static double io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    const copapy_program *p = ctx;
    int ok = kind >= 1 && kind <= CP_IO_KIND_COUNT && channel < IO_CHANNELS;
    return ok ? p->io[kind - 1][channel] : 0.0;
}

static void io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    copapy_program *p = ctx;
    if (kind >= 1 && kind <= CP_IO_KIND_COUNT && channel < IO_CHANNELS) {
        p->io[kind - 1][channel] = value;
    }
}

int64_t copapy_now_ns(void)
{
    return (int64_t)cp_posix_monotonic_ns();
}

/* ---- loading */

static int image_error(copapy_error *err, cp_status st, const cp_error *ce)
{
    char name[32];
    snprintf(name, sizeof(name), "IMAGE/%s", cp_status_name(st));
    return copapy_abi_fail(err, COPAPY_E_IMAGE, (uint32_t)st, ce->detail, name,
                           ce->message[0] != '\0' ? ce->message : cp_status_name(st));
}

/* Copies the PORTS section (names into one block) out of the parsed image. */
static int copy_ports(copapy_program *p, const cp_image *img, copapy_error *err)
{
    const cp_section *ports = &img->sec[CP_SEC_PORTS];
    const cp_section *strings = &img->sec[CP_SEC_STRINGS];
    p->port_count = ports->count;
    p->ports = calloc(ports->count > 0 ? ports->count : 1, sizeof(copapy_port));
    p->strings = malloc(strings->size > 0 ? strings->size : 1);
    if (p->ports == NULL || p->strings == NULL) {
        return copapy_abi_fail(err, COPAPY_E_NOMEM, 0, 0, NULL, "out of memory for the ports");
    }
    if (strings->size > 0) {
        memcpy(p->strings, img->bytes + strings->offset, strings->size);
    }
    for (uint32_t i = 0; i < ports->count; i++) {
        const uint8_t *e = cp_image_entry(img, CP_SEC_PORTS, i);
        copapy_port *q = &p->ports[i];
        q->struct_size = sizeof(*q);
        q->index = i;
        q->name = p->strings + cp_le32(e); /* validated: a NUL-terminated name in STRINGS */
        q->offset = cp_le32(e + 4);
        q->dtype = e[8];
        q->role = e[9];
        q->task = cp_le16(e + 10);
        q->count = cp_le32(e + 12);
    }
    return COPAPY_OK;
}

int copapy_load(const void *image, size_t len, const copapy_options *options,
                copapy_program **out, copapy_error *err)
{
    if (out == NULL) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_load: out must not be NULL");
    }
    *out = NULL;
    if (image == NULL) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_load: image must not be NULL");
    }
    if (options != NULL && !USABLE_AT(options, copapy_options, ABI1_SIZE_copapy_options)) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_options.struct_size is too small: set it to "
                               "sizeof(copapy_options)");
    }
    uint32_t flags = options != NULL ? options->flags : 0;
    uint64_t tick_ns = options != NULL ? options->tick_ns : 0;
    uint32_t budget_factor = 0;
    uint64_t budget_min_ns = 0;
    if (options != NULL && COVERS(options, copapy_options, budget_min_ns)) {
        budget_factor = options->budget_factor;
        budget_min_ns = options->budget_min_ns;
    }
    budget_factor = (flags & COPAPY_NO_BUDGET) != 0 ? 0u
                    : budget_factor != 0            ? budget_factor
                                                    : DEFAULT_BUDGET_FACTOR;
    budget_min_ns = budget_min_ns != 0 ? budget_min_ns : DEFAULT_BUDGET_MIN_NS;

    copapy_program *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return copapy_abi_fail(err, COPAPY_E_NOMEM, 0, 0, NULL, "out of memory");
    }
    p->platform = *cp_platform_posix();
    p->prog.struct_size = sizeof(p->prog);
    cp_error ce;
    memset(&ce, 0, sizeof(ce));
    ce.struct_size = sizeof(ce);
    cp_image img;
    cp_status st = cp_image_parse(&img, image, len, p->platform.arch, &ce);
    img.allow_code = (flags & COPAPY_ALLOW_CODE) != 0;
    if (st == CP_OK) {
        st = cp_program_load_parsed(&p->prog, &img, &p->platform, &ce);
    }
    if (st != CP_OK) {
        free(p);
        return image_error(err, st, &ce);
    }
    int rc = copy_ports(p, &img, err);
    if (rc != COPAPY_OK) {
        copapy_free(p);
        return rc;
    }
    if (tick_ns == 0) {
        tick_ns = cp_program_tick_ns(&p->prog);
        if (tick_ns == 0) {
            tick_ns = DEFAULT_TICK_NS;
        }
    }
    cp_sched_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.struct_size = sizeof(cfg);
    cfg.deterministic = (flags & COPAPY_DETERMINISTIC) != 0;
    cfg.tick_ns = tick_ns;
    /* jobs are timed by the calibrated cycle counter where there is one (platform_posix.h) */
    cfg.clock_ns = (flags & COPAPY_NO_MEASURE) != 0 ? NULL : cp_posix_clock_ns;
    if (cfg.clock_ns != NULL) {
        (void)cp_posix_clock_init();
    }
    cfg.io_read = io_read;
    cfg.io_write = io_write;
    cfg.io_ctx = p;
    /* the core's guard: a fault in a chain stops the program, not the process */
    cfg.guard = cp_posix_guard;
    cfg.guard_run = cp_posix_guard_run;
    cfg.guard_jobs = cp_posix_guard_jobs;
    cfg.budget_factor = budget_factor;
    cfg.budget_min_ns = budget_min_ns;
    p->budget_factor = budget_factor;
    p->budget_min_ns = budget_min_ns;
    p->sched.struct_size = sizeof(p->sched);
    st = cp_sched_init(&p->sched, &p->prog, &cfg, &ce);
    if (st != CP_OK) {
        copapy_free(p);
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, (uint32_t)st, ce.detail, "ARGUMENT",
                               ce.message);
    }
    /* on top of whatever handlers were installed since (another copy of the runner core in
     * this process, faulthandler, ...); those stay the chain a foreign fault goes to */
    if (cp_posix_guard_install() != 0) {
        copapy_free(p);
        return copapy_abi_fail(err, COPAPY_E_SYSTEM, 0, 0, NULL,
                               "cannot install the fault handlers (sigaction failed)");
    }
    if (budget_factor != 0) {
        (void)cp_posix_watchdog_start(budget_min_ns / 2, WATCHDOG_PRIORITY);
    }
    *out = p;
    ok(err);
    return COPAPY_OK;
}

int copapy_load_file(const char *path, const copapy_options *options, copapy_program **out,
                     copapy_error *err)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (path == NULL) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_load_file: path must not be NULL");
    }
    char msg[256];
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, sizeof(msg), "cannot open %s: %s", path, strerror(errno));
        return copapy_abi_fail(err, COPAPY_E_IO, 0, 0, NULL, msg);
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap != 0 ? cap * 2 : 65536;
            uint8_t *nbuf = realloc(buf, ncap);
            if (nbuf == NULL) {
                free(buf);
                fclose(f);
                return copapy_abi_fail(err, COPAPY_E_NOMEM, 0, 0, NULL, "out of memory");
            }
            buf = nbuf;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            break;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        snprintf(msg, sizeof(msg), "reading %s failed", path);
        return copapy_abi_fail(err, COPAPY_E_IO, 0, 0, NULL, msg);
    }
    int rc = copapy_load(buf, len, options, out, err);
    free(buf);
    return rc;
}

void copapy_free(copapy_program *p)
{
    if (p == NULL) {
        return;
    }
    cp_program_unload(&p->prog);
    free(p->ports);
    free(p->strings);
    free(p);
}

/* ---- ports */

uint32_t copapy_port_count(const copapy_program *p)
{
    return p != NULL ? p->port_count : 0;
}

static void put_port(copapy_port *out, const copapy_port *q)
{
    uint32_t size = out->struct_size < sizeof(*q) ? out->struct_size : (uint32_t)sizeof(*q);
    memcpy((uint8_t *)out + sizeof(uint32_t), (const uint8_t *)q + sizeof(uint32_t),
           size - sizeof(uint32_t));
}

int copapy_port_at(const copapy_program *p, uint32_t index, copapy_port *out)
{
    if (p == NULL || !USABLE(out, copapy_port) || index >= p->port_count) {
        return COPAPY_E_ARGUMENT;
    }
    put_port(out, &p->ports[index]);
    return COPAPY_OK;
}

int copapy_port_find(const copapy_program *p, const char *name, copapy_port *out,
                     copapy_error *err)
{
    if (p == NULL || name == NULL || !USABLE(out, copapy_port)) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_port_find: program, name and out (with struct_size) "
                               "are required");
    }
    for (uint32_t i = 0; i < p->port_count; i++) {
        if (strcmp(p->ports[i].name, name) == 0) {
            put_port(out, &p->ports[i]);
            ok(err);
            return COPAPY_OK;
        }
    }
    char msg[256];
    int at = snprintf(msg, sizeof(msg), "the program has no port named \"%s\"; its ports:",
                      name);
    for (uint32_t i = 0; i < p->port_count && at > 0 && (size_t)at < sizeof(msg); i++) {
        at += snprintf(msg + at, sizeof(msg) - (size_t)at, "%s %s", i ? "," : "",
                       p->ports[i].name);
    }
    if (p->port_count == 0 && at > 0 && (size_t)at < sizeof(msg)) {
        snprintf(msg + at, sizeof(msg) - (size_t)at, " none");
    }
    return copapy_abi_fail(err, COPAPY_E_NO_PORT, 0, 0, NULL, msg);
}

static const copapy_port *port_of(const copapy_program *p, uint32_t port, uint32_t n)
{
    if (p == NULL || port >= p->port_count || n == 0 || n > p->ports[port].count) {
        return NULL;
    }
    return &p->ports[port];
}

int copapy_write(copapy_program *p, uint32_t port, const double *values, uint32_t n)
{
    const copapy_port *q = port_of(p, port, n);
    if (q == NULL || values == NULL) {
        return COPAPY_E_ARGUMENT;
    }
    if (q->role != COPAPY_INPUT && q->role != COPAPY_STATE) {
        return COPAPY_E_READ_ONLY;
    }
    uint8_t *at = cp_program_data(&p->prog) + q->offset;
    uint32_t size = cp_dtype_size(q->dtype);
    for (uint32_t i = 0; i < n; i++) {
        cp_slot_store(at + (size_t)i * size, q->dtype, values[i]);
    }
    return COPAPY_OK;
}

int copapy_read(const copapy_program *p, uint32_t port, double *values, uint32_t n)
{
    const copapy_port *q = port_of(p, port, n);
    if (q == NULL || values == NULL) {
        return COPAPY_E_ARGUMENT;
    }
    const uint8_t *at = p->prog.base + p->prog.data_offset + q->offset;
    uint32_t size = cp_dtype_size(q->dtype);
    for (uint32_t i = 0; i < n; i++) {
        values[i] = cp_slot_load(at + (size_t)i * size, q->dtype);
    }
    return COPAPY_OK;
}

void *copapy_data(copapy_program *p, uint32_t *size)
{
    if (p == NULL) {
        if (size != NULL) {
            *size = 0;
        }
        return NULL;
    }
    if (size != NULL) {
        *size = p->prog.data_size;
    }
    return cp_program_data(&p->prog);
}

/* ---- running */

int copapy_tick(copapy_program *p)
{
    if (p == NULL) {
        return COPAPY_E_ARGUMENT;
    }
    cp_sched_tick(&p->sched);
    cp_sched_settle(&p->sched);
    return cp_sched_fault(&p->sched) != NULL ? COPAPY_E_FAULTED : COPAPY_OK;
}

int copapy_advance(copapy_program *p, uint64_t ticks)
{
    if (p == NULL) {
        return COPAPY_E_ARGUMENT;
    }
    cp_sched_advance(&p->sched, ticks);
    cp_sched_settle(&p->sched);
    return cp_sched_fault(&p->sched) != NULL ? COPAPY_E_FAULTED : COPAPY_OK;
}

int copapy_run(copapy_program *p, uint32_t task)
{
    if (p == NULL || task >= p->prog.task_count) {
        return COPAPY_E_ARGUMENT;
    }
    if (cp_sched_fault(&p->sched) != NULL) {
        return COPAPY_E_FAULTED;
    }
    const cp_task_entry *t = &p->prog.tasks[task];
    if (t->entry == NULL) {
        return COPAPY_E_ARGUMENT;
    }
    uint64_t budget = cp_task_budget_ns(t, p->budget_factor, p->budget_min_ns,
                                        p->budget_factor != 0 ? REQUEST_BUDGET_NS : 0);
    cp_fault f;
    memset(&f, 0, sizeof(f));
    if (cp_posix_guard(NULL, t->entry, budget, &f) != 0) {
        f.task = task;
        cp_sched_fail(&p->sched, &f); /* FAULTED, outputs safe, as in a tick */
        return COPAPY_E_FAULTED;
    }
    return COPAPY_OK;
}

void copapy_reset(copapy_program *p)
{
    if (p != NULL) {
        cp_sched_reset(&p->sched);
    }
}

uint64_t copapy_tick_ns(const copapy_program *p)
{
    return p != NULL ? p->sched.cfg.tick_ns : 0;
}

uint64_t copapy_ticks(const copapy_program *p)
{
    return p != NULL ? p->sched.tick : 0;
}

uint32_t copapy_task_count(const copapy_program *p)
{
    return p != NULL ? p->prog.task_count : 0;
}

int copapy_get_task_stats(const copapy_program *p, uint32_t task, copapy_task_stats *out)
{
    if (p == NULL || task >= p->prog.task_count || !USABLE(out, copapy_task_stats)) {
        return COPAPY_E_ARGUMENT;
    }
    const cp_task_stats *s = &p->sched.stats[task];
    copapy_task_stats t = {sizeof(t), 0, s->runs, s->skipped, s->overruns, s->exec_ns_max,
                           s->exec_ns_sum};
    uint32_t size = out->struct_size < sizeof(t) ? out->struct_size : (uint32_t)sizeof(t);
    memcpy((uint8_t *)out + sizeof(uint32_t), (const uint8_t *)&t + sizeof(uint32_t),
           size - sizeof(uint32_t));
    return COPAPY_OK;
}

int copapy_get_fault(const copapy_program *p, copapy_fault *out)
{
    if (p == NULL || !USABLE(out, copapy_fault)) {
        return COPAPY_E_ARGUMENT;
    }
    const cp_fault *f = cp_sched_fault(&p->sched);
    copapy_fault r;
    memset(&r, 0, sizeof(r));
    r.struct_size = sizeof(r);
    r.task = CP_FAULT_NO_TASK;
    if (f != NULL) {
        r.kind = f->kind;
        r.task = f->task;
        r.code = f->code;
        r.address = f->address;
        r.pc = f->pc;
        r.tick = f->tick;
    }
    snprintf(r.name, sizeof(r.name), "%s", f != NULL ? cp_fault_name(f->kind) : "none");
    uint32_t size = out->struct_size < sizeof(r) ? out->struct_size : (uint32_t)sizeof(r);
    memcpy((uint8_t *)out + sizeof(uint32_t), (const uint8_t *)&r + sizeof(uint32_t),
           size - sizeof(uint32_t));
    return COPAPY_OK;
}

double copapy_io_get(const copapy_program *p, int kind, int channel)
{
    if (p == NULL || kind < 1 || kind > CP_IO_KIND_COUNT || channel < 0 ||
        channel >= IO_CHANNELS) {
        return 0.0;
    }
    return p->io[kind - 1][channel];
}

int copapy_io_set(copapy_program *p, int kind, int channel, double value)
{
    if (p == NULL || kind < 1 || kind > CP_IO_KIND_COUNT || channel < 0 ||
        channel >= IO_CHANNELS) {
        return COPAPY_E_ARGUMENT;
    }
    p->io[kind - 1][channel] = value;
    return COPAPY_OK;
}
