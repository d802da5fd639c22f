// Counts a whole process's allocations, for Scripts/bench-warm-allocations.sh: preloaded
// (LD_PRELOAD), it defines the `malloc` family, counts every call in one atomic counter and hands
// it to glibc's allocator; a thread writes the count to $ALLOC_COUNT_FILE every 20 ms.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic unsigned long long counted;

void *malloc(size_t size) { atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed); return __libc_realloc(p, size); }
void *memalign(size_t a, size_t size) { atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed); return __libc_memalign(a, size); }
void *aligned_alloc(size_t a, size_t size) { atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed); return __libc_memalign(a, size); }
int posix_memalign(void **result, size_t a, size_t size) {
    atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
    if (a < sizeof(void *) || (a & (a - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(a, size);
    if (p == NULL) return ENOMEM;
    *result = p;
    return 0;
}

static void *writer(void *path) {
    char temporary[4096];
    snprintf(temporary, sizeof temporary, "%s.tmp", (const char *)path);
    for (;;) {
        FILE *file = fopen(temporary, "w");  // the writer's own allocations are counted too: a few a tick
        if (file) {
            fprintf(file, "%llu\n", (unsigned long long)atomic_load(&counted));
            fclose(file);
            rename(temporary, (const char *)path);
        }
        struct timespec tick = {0, 20 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    return NULL;
}

__attribute__((constructor)) static void start(void) {
    const char *path = getenv("ALLOC_COUNT_FILE");
    if (path == NULL) return;
    pthread_t thread;
    pthread_create(&thread, NULL, writer, (void *)path);
    pthread_detach(thread);
}
