/* Semihosting calls. Each call passes a parameter block in r1 and returns r0; BKPT 0xAB is
 * the M-profile trap, which qemu services before any exception priority is considered, so it
 * also works inside the fault handler. */
#include "semihost.h"

#include <stddef.h>

enum {
    SYS_OPEN = 0x01,
    SYS_CLOSE = 0x02,
    SYS_WRITE = 0x05,
    SYS_READ = 0x06,
    SYS_SEEK = 0x0A,
    SYS_FLEN = 0x0C,
    SYS_GET_CMDLINE = 0x15,
    SYS_EXIT = 0x18,
    SYS_EXIT_EXTENDED = 0x20
};

enum { ADP_STOPPED_APPLICATION_EXIT = 0x20026 };

/* `arg` is the address of the parameter block, or for SYS_EXIT the reason code itself. */
static uint32_t sh_call(uint32_t op, uint32_t arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register uint32_t r1 __asm__("r1") = arg;
    /* "memory": the host reads and writes buffers the block points to */
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static uint32_t addr(const volatile void *p)
{
    return (uint32_t)(uintptr_t)p;
}

static uint32_t str_len(const char *s)
{
    uint32_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

int32_t sh_open(const char *name, uint32_t mode)
{
    volatile uint32_t block[3] = {addr(name), mode, str_len(name)};
    return (int32_t)sh_call(SYS_OPEN, addr(block));
}

void sh_close(int32_t handle)
{
    volatile uint32_t block[1] = {(uint32_t)handle};
    (void)sh_call(SYS_CLOSE, addr(block));
}

int sh_read(int32_t handle, void *buf, uint32_t len)
{
    volatile uint32_t block[3] = {(uint32_t)handle, addr(buf), len};
    /* returns the number of bytes NOT read */
    return sh_call(SYS_READ, addr(block)) == 0 ? 0 : -1;
}

int sh_write(int32_t handle, const void *buf, uint32_t len)
{
    volatile uint32_t block[3] = {(uint32_t)handle, addr(buf), len};
    return sh_call(SYS_WRITE, addr(block)) == 0 ? 0 : -1;
}

int32_t sh_flen(int32_t handle)
{
    volatile uint32_t block[1] = {(uint32_t)handle};
    return (int32_t)sh_call(SYS_FLEN, addr(block));
}

int sh_seek(int32_t handle, uint32_t pos)
{
    volatile uint32_t block[2] = {(uint32_t)handle, pos};
    return sh_call(SYS_SEEK, addr(block)) == 0 ? 0 : -1;
}

int sh_cmdline(char *buf, uint32_t cap)
{
    if (cap == 0) {
        return -1;
    }
    volatile uint32_t block[2] = {addr(buf), cap};
    if (sh_call(SYS_GET_CMDLINE, addr(block)) != 0) {
        buf[0] = '\0';
        return -1;
    }
    uint32_t len = block[1]; /* the host stores the length without the NUL */
    buf[len < cap ? len : cap - 1] = '\0';
    return 0;
}

_Noreturn void sh_exit(uint32_t code)
{
    /* SYS_EXIT_EXTENDED carries a full exit status also on 32-bit targets */
    volatile uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, code};
    (void)sh_call(SYS_EXIT_EXTENDED, addr(block));
    /* only reached if the host ignored the call */
    (void)sh_call(SYS_EXIT, code == 0 ? ADP_STOPPED_APPLICATION_EXIT : 0x20023u);
    for (;;) {
        __asm__ volatile("wfi");
    }
}
