/* Arm semihosting (BKPT 0xAB) calls the harness needs: host files, command line and exit.
 * Reference: "Semihosting for AArch32 and AArch64", Arm IHI 0057. qemu implements them with
 * `-semihosting-config enable=on,target=native`. */
#ifndef CP_BAREMETAL_SEMIHOST_H
#define CP_BAREMETAL_SEMIHOST_H

#include <stdint.h>

enum {
    SH_MODE_RB = 1, /* fopen "rb" */
    SH_MODE_WB = 5  /* fopen "wb" */
};

/* Opens a host file; returns its handle or -1. */
int32_t sh_open(const char *name, uint32_t mode);
void sh_close(int32_t handle);
/* Reads exactly `len` bytes; returns 0 on success, -1 on a short read. */
int sh_read(int32_t handle, void *buf, uint32_t len);
/* Writes exactly `len` bytes; returns 0 on success, -1 on a short write. */
int sh_write(int32_t handle, const void *buf, uint32_t len);
/* Length of an open file in bytes, or -1. */
int32_t sh_flen(int32_t handle);
/* Moves to absolute position `pos`; returns 0 on success. */
int sh_seek(int32_t handle, uint32_t pos);
/* The command line (qemu: the `arg=` values joined by spaces), NUL-terminated; 0 on success. */
int sh_cmdline(char *buf, uint32_t cap);
/* Ends the simulation; qemu exits with `code` as its status. */
_Noreturn void sh_exit(uint32_t code);

#endif /* CP_BAREMETAL_SEMIHOST_H */
