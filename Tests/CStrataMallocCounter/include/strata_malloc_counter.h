#ifndef STRATA_MALLOC_COUNTER_H
#define STRATA_MALLOC_COUNTER_H

#include <stdint.h>

/// Whether this build counts allocations: always without a sanitizer; under one, when its
/// allocator took the counter's hook.
int strata_malloc_counter_available(void);

/// Starts counting the allocations (`malloc`, `calloc`, `realloc`, `posix_memalign`,
/// `aligned_alloc`, `memalign`) made on the calling thread from zero.
void strata_malloc_counter_start(void);

/// Stops counting on the calling thread and returns how many allocations it made since
/// `strata_malloc_counter_start`.
uint64_t strata_malloc_counter_stop(void);

#endif
