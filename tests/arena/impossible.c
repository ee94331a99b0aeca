// SPDX-License-Identifier: MIT
/* tests/arena/impossible.c: a request no address space can hold fails
 * without giving memory back.
 *
 * When a huge block cannot be mapped, the allocator gives back its cache
 * of huge mappings and every empty segment, and tries again: under
 * RLIMIT_AS that makes room. For 2^62 bytes, which glibc's
 * tst-malloc-too-large asks for again and again between small mallocs, it
 * only made the next small malloc map the segment again: 354,000 segments
 * mapped and unmapped, 12 s against glibc's 1. Here 2,000 rounds of
 * malloc(16), free, then requests of 2^62, 2^50 and 2^48 bytes (and an
 * alignment of 2^50), each of which must fail with ENOMEM, may unmap
 * nothing. Fails on the code before (3,999 munmap calls). */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "hakozuna.h"

static void stats(hz_stats_t *st) {
  st->size = sizeof *st;
  CHECK(hz_stats_get(st) == 0);
}

int test_main(int argc, char **argv) {
  (void)argc, (void)argv;
  static const size_t sizes[] = {(size_t)1 << 62, (size_t)1 << 50, (size_t)1 << 48};
  free(malloc(16)); /* (a segment exists) */
  hz_stats_t before, after;
  stats(&before);
  for (int i = 0; i < 2000; i++) {
    void *volatile small = malloc(tu_opaque(16));
    CHECK(small != NULL);
    free(small);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      errno = 0;
      void *volatile p = malloc(tu_opaque(sizes[k]));
      CHECKF(p == NULL && errno == ENOMEM, "malloc(%zu) = %p, errno %d", sizes[k], (void *)p, errno);
    }
    void *p = NULL;
    CHECK(posix_memalign(&p, (size_t)1 << 50, 16) == ENOMEM && p == NULL);
  }
  stats(&after);
  uint64_t unmapped = after.munmap_calls - before.munmap_calls, mapped = after.mmap_calls - before.mmap_calls;
  CHECKF(unmapped == 0, "2,000 rounds of impossible requests: %llu munmap and %llu mmap calls",
         (unsigned long long)unmapped, (unsigned long long)mapped);
  return 0;
}
