/* The allocator and mapping entry points, counted (tests/test_no_alloc.py): malloc, calloc,
 * realloc, free, posix_memalign, aligned_alloc, mmap and mremap call `note()` (defined by the
 * file that includes this, before it) and forward to glibc. Defined in an executable they take
 * precedence over libc's for the shared libraries it loads (alloc_count.c); in a library
 * loaded with LD_PRELOAD, for the whole process (alloc_shim.c). */
#ifndef COPAPY_TEST_ALLOC_HOOKS_H
#define COPAPY_TEST_ALLOC_HOOKS_H

#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static void note(void);

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

void *malloc(size_t n) { note(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note(); return __libc_realloc(p, n); }
void free(void *p) { if (p != NULL) { note(); } __libc_free(p); }
void *aligned_alloc(size_t a, size_t n) { note(); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n)
{
    note();
    *out = __libc_memalign(a, n);
    return *out != NULL ? 0 : 12;
}
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    note();
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}
void *mremap(void *old, size_t old_len, size_t len, int flags, ...)
{
    note();
    return (void *)syscall(SYS_mremap, old, old_len, len, flags, NULL);
}

#endif /* COPAPY_TEST_ALLOC_HOOKS_H */
