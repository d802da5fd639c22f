#define _GNU_SOURCE
#include "CStrataLinux.h"

#include <errno.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

const int strata_F_OFD_SETLK = F_OFD_SETLK;
const int strata_F_OFD_SETLKW = F_OFD_SETLKW;
const int strata_F_OFD_GETLK = F_OFD_GETLK;
const int strata_EFD_CLOEXEC = EFD_CLOEXEC;
const int strata_O_TMPFILE = O_TMPFILE;
const int strata_EFD_NONBLOCK = EFD_NONBLOCK;

int strata_eventfd(unsigned int initval, int flags) { return eventfd(initval, flags); }

ssize_t strata_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, size_t count) {
    loff_t from = *in_offset, to = *out_offset;
    ssize_t done = copy_file_range(in, &from, out, &to, count, 0);
    *in_offset = from;
    *out_offset = to;
    return done;
}

ssize_t strata_getdents64(int fd, void *buffer, size_t count) {
    return (ssize_t)syscall(SYS_getdents64, fd, buffer, count);
}

int strata_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

int strata_flock(int fd, int operation) { return flock(fd, operation); }

int strata_current_thread_attributes(pthread_attr_t *attributes) {
    return pthread_getattr_np(pthread_self(), attributes);
}

typedef int (*strata_mallctl_fn)(const char *, void *, size_t *, void *, size_t);

int strata_jemalloc_stats(size_t *allocated, size_t *resident) {
    strata_mallctl_fn mallctl = (strata_mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
    if (mallctl == NULL) return -1;
    uint64_t epoch = 1;
    size_t length = sizeof(epoch);
    mallctl("epoch", &epoch, &length, &epoch, length);
    length = sizeof(size_t);
    if (mallctl("stats.allocated", allocated, &length, NULL, 0) != 0) return -1;
    length = sizeof(size_t);
    if (mallctl("stats.resident", resident, &length, NULL, 0) != 0) return -1;
    return 0;
}

size_t strata_malloc_free_bytes(void) { return mallinfo2().fordblks; }

size_t strata_malloc_total_bytes(void) {
    struct mallinfo2 info = mallinfo2();
    return info.arena + info.hblkhd;
}

int strata_gettid(void) { return (int)syscall(SYS_gettid); }

int strata_current_cpu_slow(void) {
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : cpu;
}

int strata_futex_wait(uint32_t *word, uint32_t expected) {
    return (int)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

int strata_futex_wake(uint32_t *word, int count) {
    return (int)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

static inline void strata_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void strata_spin_pause(void) { strata_cpu_relax(); }

const int strata_lock_spin_limit = 100;

void strata_lock_lock_contended(uint32_t *word) {
    // Spin while the holder is likely running a short critical section: read-only polling keeps
    // the cache line shared until it is released, then one compare-and-swap takes it.
    for (int i = 0; i < strata_lock_spin_limit; i++) {
        uint32_t seen = __atomic_load_n(word, __ATOMIC_RELAXED);
        if (seen == 0) {
            uint32_t expected = 0;
            if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        }
        strata_cpu_relax();
    }
    // Mark "held, maybe with sleepers" and sleep until the holder's unlock wakes us.
    while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
        (void)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    }
}

void strata_lock_wake(uint32_t *word) {
    (void)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

// MARK: - Calls that refuse to wait for the disk

#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/uio.h>

int strata_openat_cached(int dirfd, const char *name, int flags) {
#ifdef SYS_openat2
    struct open_how how = {0};
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.resolve = RESOLVE_CACHED;
    return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof how);
#else
    errno = ENOSYS;
    return -1;
#endif
}

ssize_t strata_pread_nowait(int fd, void *buffer, size_t count, off_t offset) {
    struct iovec vector = {.iov_base = buffer, .iov_len = count};
    return preadv2(fd, &vector, 1, offset, RWF_NOWAIT);
}
