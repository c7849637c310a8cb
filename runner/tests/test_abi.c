/* Unit tests of libcopapy's exported ABI (copapy.h) on the standard test image: loading and its
 * errors, ports by name, conversions, ticks, statistics, I/O channels, struct_size prefixes and
 * the periodic loop. Built with AddressSanitizer and UBSan (make -C runner test). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "copapy/copapy.h"
#include "test_image.h"

static copapy_error new_err(void)
{
    copapy_error e;
    memset(&e, 0, sizeof(e));
    e.struct_size = sizeof(e);
    return e;
}

static copapy_port new_port(void)
{
    copapy_port q;
    memset(&q, 0, sizeof(q));
    q.struct_size = sizeof(q);
    return q;
}

static void test_load_and_ports(void)
{
    tb_image img;
    std_image(&img);
    copapy_program *p = NULL;
    copapy_error err = new_err();
    /* the declared costs (COPAPY_DETERMINISTIC), not the measured ones: with measured costs a
     * job the OS preempts for a period (a loaded machine) is still pending at its period's end,
     * so it publishes later and its next release is skipped, as specified; the checks below are
     * of the publication and the statistics, which must not depend on the machine's load */
    copapy_options det;
    memset(&det, 0, sizeof(det));
    det.struct_size = sizeof(det);
    det.flags = COPAPY_DETERMINISTIC;
    CHECK(copapy_load(img.bytes, img.len, &det, &p, &err) == COPAPY_OK);
    CHECK(p != NULL && err.status == COPAPY_OK && strcmp(err.name, "OK") == 0);
    CHECK(copapy_abi_version() == COPAPY_ABI_VERSION);
    CHECK(copapy_tick_ns(p) == 1000000u);
    CHECK(copapy_task_count(p) == 4);
    CHECK(copapy_port_count(p) == 2);

    copapy_port out = new_port(), count = new_port();
    CHECK(copapy_port_find(p, "out", &out, &err) == COPAPY_OK);
    CHECK(out.index == 0 && out.dtype == COPAPY_I32 && out.role == COPAPY_OUTPUT &&
          out.task == 1 && out.count == 1 && strcmp(out.name, "out") == 0);
    CHECK(copapy_port_find(p, "count", &count, &err) == COPAPY_OK);
    CHECK(count.index == 1 && count.role == COPAPY_STATE && count.offset == 4);

    CHECK(copapy_port_find(p, "speed", &out, &err) == COPAPY_E_NO_PORT);
    CHECK(err.status == COPAPY_E_NO_PORT && strcmp(err.name, "NO_PORT") == 0);
    CHECK(strstr(err.message, "\"speed\"") != NULL && strstr(err.message, "out, count") != NULL);

    /* outputs are read-only, states and inputs writable; conversions saturate */
    double v = 5.0;
    CHECK(copapy_write(p, out.index, &v, 1) == COPAPY_E_READ_ONLY);
    v = 1e12;
    CHECK(copapy_write(p, count.index, &v, 1) == COPAPY_OK);
    double r = 0.0;
    CHECK(copapy_read(p, count.index, &r, 1) == COPAPY_OK && r == 2147483647.0);
    v = -7.9;
    CHECK(copapy_write(p, count.index, &v, 1) == COPAPY_OK);
    CHECK(copapy_read(p, count.index, &r, 1) == COPAPY_OK && r == -7.0);
    CHECK(copapy_read(p, count.index, &r, 2) == COPAPY_E_ARGUMENT);  /* count is 1 */
    CHECK(copapy_read(p, 9, &r, 1) == COPAPY_E_ARGUMENT);

    /* task 1 (1 ms) writes 42 into "out" and publishes it to PWM 1 at the end of its period;
     * copapy_tick settles, so the publication of the period ending at the next tick shows */
    CHECK(copapy_read(p, out.index, &r, 1) == COPAPY_OK && r == 0.0);
    CHECK(copapy_io_set(p, COPAPY_ADC, 3, 2.5) == COPAPY_OK);
    CHECK(copapy_tick(p) == COPAPY_OK);
    CHECK(copapy_read(p, out.index, &r, 1) == COPAPY_OK && r == 42.0);
    CHECK(copapy_io_get(p, COPAPY_PWM, 1) == 42.0);
    CHECK(copapy_ticks(p) == 1);
    uint32_t size = 0;
    float sampled;
    uint8_t *data = copapy_data(p, &size);
    CHECK(data != NULL && size == STD_DATA_SIZE);
    memcpy(&sampled, data + 24, sizeof(sampled));
    CHECK(sampled == 2.5f);  /* the ADC input binding sampled at the release */
    CHECK(copapy_advance(p, 9) == COPAPY_OK && copapy_ticks(p) == 10);

    copapy_task_stats st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    CHECK(copapy_get_task_stats(p, 1, &st) == COPAPY_OK && st.runs == 10 && st.skipped == 0);
    CHECK(copapy_get_task_stats(p, 4, &st) == COPAPY_E_ARGUMENT);

    /* a struct shorter than its ABI-1 layout is refused */
    struct { uint32_t struct_size; uint32_t reserved; uint64_t runs; uint64_t guard; } old;
    memset(&old, 0xab, sizeof(old));
    old.struct_size = 16;
    CHECK(copapy_get_task_stats(p, 1, (copapy_task_stats *)(void *)&old) == COPAPY_E_ARGUMENT);

    copapy_reset(p);
    CHECK(copapy_ticks(p) == 0);
    CHECK(copapy_read(p, out.index, &r, 1) == COPAPY_OK && r == 0.0);
    CHECK(copapy_run(p, 3) == COPAPY_OK);  /* task 3: data[8] = 7, on request */
    int32_t seven;
    memcpy(&seven, (uint8_t *)copapy_data(p, NULL) + 8, sizeof(seven));
    CHECK(seven == 7);
    CHECK(copapy_run(p, 4) == COPAPY_E_ARGUMENT);
    copapy_free(p);
    copapy_free(NULL);
}

static void test_load_errors(void)
{
    tb_image img;
    std_image(&img);
    copapy_program *p = (copapy_program *)(void *)&img;  /* must be reset to NULL */
    copapy_error err = new_err();
    img.bytes[60] ^= 1u;
    CHECK(copapy_load(img.bytes, img.len, NULL, &p, &err) == COPAPY_E_IMAGE);
    CHECK(p == NULL && err.code == CP_ERR_CRC && strcmp(err.name, "IMAGE/CRC") == 0);
    CHECK(strstr(err.message, "CRC") != NULL);
    CHECK(copapy_load(img.bytes, 10, NULL, &p, &err) == COPAPY_E_IMAGE);
    CHECK(err.code == CP_ERR_TRUNCATED);

    copapy_options opt;
    memset(&opt, 0, sizeof(opt));
    opt.struct_size = 4;
    std_image(&img);
    CHECK(copapy_load(img.bytes, img.len, &opt, &p, &err) == COPAPY_E_ARGUMENT);
    opt.struct_size = sizeof(opt);
    opt.tick_ns = 300000;  /* does not divide the 1 ms period */
    CHECK(copapy_load(img.bytes, img.len, &opt, &p, &err) == COPAPY_E_ARGUMENT);
    CHECK(strstr(err.message, "multiple of the tick") != NULL);
    CHECK(copapy_load(img.bytes, img.len, NULL, NULL, &err) == COPAPY_E_ARGUMENT);
    CHECK(copapy_load_file("/nonexistent/x.cpim", NULL, &p, &err) == COPAPY_E_IO);
    CHECK(strstr(err.message, "/nonexistent/x.cpim") != NULL);

    /* an error struct of an older, shorter layout: nothing beyond it is written */
    struct { copapy_error e; uint8_t guard[8]; } small;
    memset(&small, 0x5a, sizeof(small));
    small.e.struct_size = 8;
    CHECK(copapy_load(img.bytes, 3, NULL, &p, &small.e) == COPAPY_E_IMAGE);
    CHECK(small.e.status == COPAPY_E_IMAGE && small.e.code == 0x5a5a5a5au);
    CHECK(strcmp(copapy_status_name(COPAPY_E_NO_PORT), "NO_PORT") == 0);
    CHECK(strcmp(copapy_status_name(99), "UNKNOWN") == 0);
}

typedef struct hooks {
    copapy_program *p;
    uint64_t before, after;
    uint64_t stop_at;
    double last;
} hooks;

static int before(void *ctx, uint64_t cycle, int64_t wake)
{
    hooks *h = ctx;
    (void)wake;
    CHECK(cycle == h->before);
    h->before++;
    return 0;
}

static int after(void *ctx, uint64_t cycle, int64_t wake)
{
    hooks *h = ctx;
    (void)wake;
    copapy_read(h->p, 0, &h->last, 1);
    h->after++;
    return h->stop_at != 0 && cycle + 1 >= h->stop_at;
}

static void test_loop(void)
{
    tb_image img;
    std_image(&img);
    copapy_program *p = NULL;
    copapy_error err = new_err();
    CHECK(copapy_load(img.bytes, img.len, NULL, &p, &err) == COPAPY_OK);
    int64_t lat[4];
    memset(lat, 0, sizeof(lat));
    hooks h = {p, 0, 0, 0, 0.0};
    copapy_loop_config c;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    c.period_ns = 200000;
    c.cycles = 6;
    c.cpu = -1;
    c.program = p;
    c.before = before;
    c.after = after;
    c.ctx = &h;
    c.latency_ns = lat;
    c.latency_capacity = 4;
    copapy_loop_stats s;
    memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    CHECK(copapy_loop_run(&c, &s, &err) == COPAPY_OK);
    CHECK(s.cycles == 6 && h.before == 6 && h.after == 6 && s.running == 0);
    CHECK(s.status == COPAPY_OK && s.latency_min_ns >= 0 && s.latency_max_ns >= s.latency_min_ns);
    CHECK(lat[0] >= 0 && lat[1] >= 0 && lat[2] >= 0 && lat[3] >= 0);
    CHECK(h.last == 42.0 && copapy_ticks(p) == 6);

    h.stop_at = 2;
    h.before = 0;
    c.cycles = 0;
    CHECK(copapy_loop_run(&c, &s, &err) == COPAPY_E_STOPPED);
    CHECK(s.cycles == 2 && err.status == COPAPY_E_STOPPED);

    int32_t stop = 1;
    c.stop = &stop;
    CHECK(copapy_loop_run(&c, &s, &err) == COPAPY_OK && s.cycles == 0);

    c.program = NULL;
    c.period_ns = 0;
    CHECK(copapy_loop_run(&c, &s, &err) == COPAPY_E_ARGUMENT);
    c.struct_size = 8;
    CHECK(copapy_loop_run(&c, &s, &err) == COPAPY_E_ARGUMENT);
    copapy_free(p);
}

/* ABI 2 appended copapy_options' budget fields: an ABI-1 caller (the struct without them)
 * still loads; copapy_get_fault of a running program says none. */
static void test_abi1_options_and_fault_query(void)
{
    tb_image img;
    std_image(&img);
    copapy_program *p = NULL;
    copapy_error err = new_err();
    copapy_options opt;
    memset(&opt, 0, sizeof(opt));
    opt.struct_size = (uint32_t)offsetof(copapy_options, budget_factor);
    CHECK(copapy_load(img.bytes, img.len, &opt, &p, &err) == COPAPY_OK);
    opt.struct_size = 8; /* not even tick_ns */
    copapy_program *q = NULL;
    CHECK(copapy_load(img.bytes, img.len, &opt, &q, &err) == COPAPY_E_ARGUMENT && q == NULL);
    CHECK(copapy_tick(p) == COPAPY_OK);
    copapy_fault f;
    memset(&f, 0xAA, sizeof(f));
    f.struct_size = sizeof(f);
    CHECK(copapy_get_fault(p, &f) == COPAPY_OK);
    CHECK(f.kind == COPAPY_FAULT_NONE && f.task == 0xFFFFFFFFu && strcmp(f.name, "none") == 0);
    CHECK(copapy_get_fault(p, NULL) == COPAPY_E_ARGUMENT);
    CHECK(copapy_run(p, 99) == COPAPY_E_ARGUMENT);
    copapy_free(p);
}

int main(void)
{
    test_load_and_ports();
    test_load_errors();
    test_loop();
    test_abi1_options_and_fault_query();
    printf("test_abi: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
