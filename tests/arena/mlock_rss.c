// SPDX-License-Identifier: MIT
/* tests/arena/mlock_rss.c: a program that locks its memory (mlockall) has
 * resident what it uses, not what the allocator reserved.
 *
 * mlockall makes every page of every writable mapping resident, now
 * (MCL_CURRENT) and in mappings to come (MCL_FUTURE). hakozuna reserved its
 * 64 MiB regions of segments writable and kept its 32 MiB segment map in
 * .bss: a program that locked itself after its first malloc had 110 MB
 * resident against glibc's 11 (an audit's finding). The regions are now
 * reserved inaccessible and opened a segment at a time, and the map's pages
 * are read-only until written (arena.c, os.c). Here: one malloc before the
 * lock, as a real program's start-up makes; then blocks of small, large and
 * huge sizes, in main and in a thread (whose heap may take another arena),
 * filled, checked and freed; after malloc_trim(0) (freed huge blocks wait
 * in a cache for the purge delay) the resident set must be under 32 MiB (a
 * thread's stack is locked too: 8 MiB here). 20 MiB now; the library
 * before 172 MiB. Not run on glibc, which keeps 35 MiB: freeing a 3 MiB
 * mapped block raises its mmap threshold, and the later ones come from its
 * heap, which it keeps (mimalloc 2 68 MiB, tcmalloc 50, jemalloc 100).
 * Skipped where mlockall is refused. */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>

static void use_blocks(uint64_t seed) {
  static const size_t sizes[] = {16, 100, 1000, 5000, 40000, 300000, 3 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    void *v[8];
    for (int i = 0; i < 8; i++) {
      v[i] = malloc(sizes[k]);
      if (!CHECK(v[i] != NULL)) return;
      tu_fill(v[i], sizes[k], seed + k * 8 + (uint64_t)i);
    }
    for (int i = 0; i < 8; i++) {
      CHECKF(tu_verify(v[i], sizes[k], seed + k * 8 + (uint64_t)i) == 0, "a block of %zu bytes changed", sizes[k]);
      free(v[i]);
    }
  }
}

static void *thread_main(void *arg) {
  (void)arg;
  use_blocks(1000);
  return NULL;
}

TEST_MAIN() {
  void *first = malloc(16);
  CHECK(first != NULL);
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("SKIP mlockall: errno %d (not allowed here)\n", errno);
    return 77; /* tests/run.sh: skipped */
  }
  long locked = tu_rss();
  use_blocks(0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0 && pthread_join(t, NULL) == 0);
  malloc_trim(0);
  long rss = tu_rss();
  munlockall();
  free(first);
  printf("resident: %ld KiB after mlockall, %ld KiB after the blocks and malloc_trim(0)\n", locked >> 10, rss >> 10);
  CHECKF(rss > 0 && rss < (long)(32 * MiB), "%ld KiB resident in a locked process that used a few MiB", rss >> 10);
  return check_failed() ? 1 : 0;
}
