// The project's Linux-only C, in one place: what Swift cannot call or see directly (variadic
// `syscall`, `_GNU_SOURCE`-only declarations and constants) and the futex lock's fast path.
// Every function here is a thin wrapper: error handling (EINTR, errno → typed error) stays in
// Swift, in Sources/Strata/System.
#ifndef C_STRATA_LINUX_H
#define C_STRATA_LINUX_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <pthread.h>
#include <sys/rseq.h>

// MARK: - Constants that glibc declares only under _GNU_SOURCE

/// `F_OFD_SETLK`, `F_OFD_SETLKW`, `F_OFD_GETLK` (open-file-description locks).
extern const int strata_F_OFD_SETLK;
extern const int strata_F_OFD_SETLKW;
extern const int strata_F_OFD_GETLK;

// MARK: - Calls that glibc declares only under _GNU_SOURCE, or that have no wrapper

/// `eventfd(initval, flags)`.
int strata_eventfd(unsigned int initval, int flags);
/// `EFD_CLOEXEC`, `EFD_NONBLOCK`.
extern const int strata_EFD_CLOEXEC;
extern const int strata_EFD_NONBLOCK;
/// `O_TMPFILE` (an unnamed file in a directory, gone when its last descriptor closes).
extern const int strata_O_TMPFILE;

/// `copy_file_range(in, &in_offset, out, &out_offset, count, 0)`: -1 and errno on failure.
ssize_t strata_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, size_t count);

/// `getdents64(fd, buffer, count)`: -1 and errno on failure, 0 at the end of the directory.
ssize_t strata_getdents64(int fd, void *buffer, size_t count);

/// `pthread_setname_np(pthread_self(), name)`; returns the error number (0 on success).
int strata_set_thread_name(const char *name);

/// `flock(fd, operation)` (Swift sees `struct flock` and the function under one name).
int strata_flock(int fd, int operation);

/// The C library's allocator: bytes it holds free in its arenas (`mallinfo2().fordblks`, a
/// walk of every arena under their locks: for statistics, not a hot path), and the bytes it has
/// from the kernel in all (`arena + hblkhd`).
size_t strata_malloc_free_bytes(void);
size_t strata_malloc_total_bytes(void);

/// When jemalloc is the process's allocator (linked or preloaded: its `mallctl` is found with
/// `dlsym`): the bytes it has handed out (`stats.allocated`) and those of its pages resident
/// (`stats.resident`), refreshed first (`epoch`); returns 0, or -1 when jemalloc is not loaded.
int strata_jemalloc_stats(size_t *allocated, size_t *resident);

/// `pthread_getattr_np(pthread_self(), attributes)`: the calling thread's actual attributes
/// (detach state, stack); returns the error number. Destroy them with `pthread_attr_destroy`.
int strata_current_thread_attributes(pthread_attr_t *attributes);

/// The calling thread's kernel id (`gettid`).
int strata_gettid(void);

/// `sched_getcpu()`, or 0 where the kernel cannot say.
int strata_current_cpu_slow(void);

/// The processor the calling thread is running on now, read from the thread's rseq area (which
/// glibc registers and the kernel keeps current): one load, no call. Where rseq is not
/// registered, `sched_getcpu`. A hint: the thread may move right after.
static inline int strata_current_cpu(void) {
    if (__builtin_expect(__rseq_size != 0, 1)) {
        const struct rseq *area = (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
        return (int)__atomic_load_n(&area->cpu_id_start, __ATOMIC_RELAXED);
    }
    return strata_current_cpu_slow();
}

/// One spin-wait hint to the processor (`pause` on x86-64, `yield` on arm64).
void strata_spin_pause(void);

// MARK: - Futex

/// `FUTEX_WAIT_PRIVATE`: sleeps while `*word == expected`. Returns 0, or -1 with errno
/// (EAGAIN when the word already differs, EINTR on a signal).
int strata_futex_wait(uint32_t *word, uint32_t expected);
/// `FUTEX_WAKE_PRIVATE`: wakes up to `count` waiters; returns how many were woken or -1.
int strata_futex_wake(uint32_t *word, int count);

// MARK: - The project's lock: a futex mutex with a short adaptive spin

/// The number of times a contended `strata_lock_lock` retries before it sleeps.
extern const int strata_lock_spin_limit;

/// Slow path of `strata_lock_lock` (out of line): spins briefly, then sleeps on the futex.
void strata_lock_lock_contended(uint32_t *word);
/// Slow path of `strata_lock_unlock`: wakes one sleeper.
void strata_lock_wake(uint32_t *word);

/// Word states: 0 free, 1 held, 2 held and someone may be sleeping (Drepper, "Futexes Are Tricky").
static inline void strata_lock_lock(uint32_t *word) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    strata_lock_lock_contended(word);
}

static inline int strata_lock_trylock(uint32_t *word) {
    uint32_t expected = 0;
    return __atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void strata_lock_unlock(uint32_t *word) {
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2) strata_lock_wake(word);
}

// MARK: - Calls that refuse to wait for the disk

/// `openat2(dirfd, name, {flags | O_CLOEXEC, resolve: RESOLVE_CACHED})`: opens only when the
/// path resolves from the dentry cache; -1 with errno EAGAIN when it would need the disk, and
/// ENOSYS / EINVAL / E2BIG on kernels without openat2 or RESOLVE_CACHED (before 5.12).
int strata_openat_cached(int dirfd, const char *name, int flags);

/// `preadv2(fd, {buffer, count}, offset, RWF_NOWAIT)`: reads only what is in the page cache;
/// -1 with errno EAGAIN when nothing is (EOPNOTSUPP on file systems without it).
ssize_t strata_pread_nowait(int fd, void *buffer, size_t count, off_t offset);

// MARK: - Plain atomics on a 32-bit word (for words that live in memory Swift allocated)

static inline uint32_t strata_atomic_load_u32(uint32_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
static inline uint32_t strata_atomic_add_u32(uint32_t *word, uint32_t value) {
    return __atomic_fetch_add(word, value, __ATOMIC_ACQ_REL);
}
static inline uint32_t strata_atomic_sub_u32(uint32_t *word, uint32_t value) {
    return __atomic_fetch_sub(word, value, __ATOMIC_ACQ_REL);
}

#endif
