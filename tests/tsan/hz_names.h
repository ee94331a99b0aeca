// SPDX-License-Identifier: MIT
/* tests/tsan/hz_names.h: forced into the threaded tests (-include) for the
 * ThreadSanitizer build (make test-tsan). TSan brings its own malloc, so the
 * allocator is built without overriding malloc (HZ_NO_OVERRIDE) and linked
 * into the test, and these macros send the test's calls to the hz_* names.
 * Only the test's own calls: libc's internal allocations stay TSan's. */
#ifndef HZ_TSAN_NAMES_H
#define HZ_TSAN_NAMES_H
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "hakozuna.h"

static inline int hz_tsan_trim(size_t pad) {
  (void)pad;
  hz_collect(1);
  return 1;
}

#define malloc hz_malloc
#define free hz_free
#define calloc hz_calloc
#define realloc hz_realloc
#define reallocarray hz_reallocarray
#define aligned_alloc hz_aligned_alloc
#define posix_memalign hz_posix_memalign
#define memalign hz_memalign
#define valloc hz_valloc
#define pvalloc hz_pvalloc
#define malloc_usable_size hz_usable_size
#define malloc_trim hz_tsan_trim
#endif
