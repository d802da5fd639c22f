// Allocation counting for tests (the warm path's allocations per hit): the test executable's
// own `malloc` family, which counts the calls of a thread that asked for it and hands every call
// to glibc's allocator (`__libc_malloc` and its kin). `free` is glibc's own. Linked only into the
// test bundle; under AddressSanitizer or ThreadSanitizer, whose runtimes define `malloc`, it
// defines nothing and says it is not available.
#include "strata_malloc_counter.h"

#include <errno.h>
#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define STRATA_NO_MALLOC_COUNTER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRATA_NO_MALLOC_COUNTER 1
#endif

#ifdef STRATA_NO_MALLOC_COUNTER

int strata_malloc_counter_available(void) { return 0; }
void strata_malloc_counter_start(void) {}
uint64_t strata_malloc_counter_stop(void) { return 0; }

#else

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static __thread int counting;
static __thread uint64_t counted;

static inline void count(void) {
    if (counting) counted += 1;
}

int strata_malloc_counter_available(void) { return 1; }

void strata_malloc_counter_start(void) {
    counted = 0;
    counting = 1;
}

uint64_t strata_malloc_counter_stop(void) {
    counting = 0;
    return counted;
}

void *malloc(size_t size) {
    count();
    return __libc_malloc(size);
}

void *calloc(size_t count_, size_t size) {
    count();
    return __libc_calloc(count_, size);
}

void *realloc(void *pointer, size_t size) {
    count();
    return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    count();
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}

#endif
