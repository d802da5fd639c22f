// Allocation counting for tests (the warm path's allocations per hit), of the calls made on a
// thread that asked for it. Without a sanitizer: the test executable's own `malloc` family, which
// counts and hands every call to glibc's allocator (`__libc_malloc` and its kin; `free` is glibc's
// own). Under AddressSanitizer or ThreadSanitizer, whose runtimes define `malloc`: their
// allocator's hook (`__sanitizer_install_malloc_and_free_hooks`), which they call for every
// allocation. Linked only into the test bundle.
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

static __thread int counting;
static __thread uint64_t counted;

static inline void count(void) {
    if (counting) counted += 1;
}

void strata_malloc_counter_start(void) {
    counted = 0;
    counting = strata_malloc_counter_available();
}

uint64_t strata_malloc_counter_stop(void) {
    counting = 0;
    return counted;
}

#ifdef STRATA_NO_MALLOC_COUNTER

// The sanitizers' interface (compiler-rt's sanitizer/allocator_interface.h). At most a few hooks
// may be installed in a process: this one is installed once, when the bundle is loaded (the
// sanitizer's runtime initializes before any constructor runs).
extern int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void *, size_t), void (*free_hook)(const volatile void *));

static void on_malloc(const volatile void *pointer, size_t size) {
    (void)pointer;
    (void)size;
    count();
}

static void on_free(const volatile void *pointer) { (void)pointer; }

static int installed;

__attribute__((constructor)) static void install_hook(void) {
    installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}

int strata_malloc_counter_available(void) { return installed; }

#else

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

int strata_malloc_counter_available(void) { return 1; }

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
