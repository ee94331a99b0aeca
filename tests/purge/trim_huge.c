// SPDX-License-Identifier: MIT
/* tests/purge/trim_huge.c: what the statistics count of the OS calls
 * (issue 10, case 15). malloc_trim(0) after freeing a huge block unmaps it
 * from the reuse cache: those bytes count as returned and malloc_trim
 * returns 1. Built twice; the checked build's guard pages are made with
 * mprotect, which must be counted (HZ_CHECKED_LIB). */
#include "check.h"
#include "testutil.h"

#include <malloc.h>

#include "hakozuna.h"

static hz_stats_t stats(void) {
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  return st;
}

TEST_MAIN() {
  malloc_trim(0); /* nothing left to return from start-up */
  char *p = malloc(64 * MiB);
  if (!CHECK(p)) return 1;
  memset(p, 1, 64 * MiB);
  free(p);
  hz_stats_t before = stats();
  int r = malloc_trim(0);
  hz_stats_t after = stats();
  CHECKF(r == 1, "malloc_trim(0) returned %d after freeing a 64 MiB block", r);
  CHECKF(after.bytes_returned - before.bytes_returned >= 64 * MiB, "%llu bytes returned by the trim",
         (unsigned long long)(after.bytes_returned - before.bytes_returned));
  CHECK(after.munmap_calls > before.munmap_calls);
  CHECKF(malloc_trim(0) == 0, "a second trim has nothing to return");
#ifdef HZ_CHECKED_LIB
  uint64_t m0 = stats().mprotect_calls;
  void *q = malloc(100 * KiB); /* a large block ends on a guard */
  CHECK(q != NULL);
  free(q);
  uint64_t m1 = stats().mprotect_calls;
  CHECKF(m1 >= m0 + 2, "mprotect calls %llu -> %llu for a guarded block's malloc and free",
         (unsigned long long)m0, (unsigned long long)m1);
#endif
  return 0;
}
