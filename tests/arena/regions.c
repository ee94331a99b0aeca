// SPDX-License-Identifier: MIT
/* tests/arena/regions.c: regions of segments double only while the program
 * is single-threaded.
 *
 * A single-threaded program's first region is one 4 MiB segment, so that a
 * small program takes little address space (docs/perf.md §52,
 * arena/as_budget). Growing every span pool's regions 4, 8, 16, 32 MiB
 * while a thousand threads started (each region an mmap under the pool's
 * lock) made thread_flood 2.7x slower at 4x the peak RSS on 16 cores
 * (§64): a threaded program's regions are the whole HAKOZUNA_ARENA_RESERVE
 * at once. Checked on the mappings in /proc/self/maps: the one holding the
 * main thread's first block is 4 MiB before any thread starts; after a
 * thread has taken 10 MiB of 64 KiB blocks (three segments, so at least
 * one new region wherever its pool is), the mapping that holds its last
 * block spans ARENA_RESERVE or more. Fails on the code before (the
 * thread's regions were 4 and 8 MiB, at most 32 MiB even if all merged).
 * Not under RLIMIT_AS, where every region is one segment. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <sys/resource.h>

#include "hakozuna.h"

/* Bytes of the mapping in /proc/self/maps that holds p; 0 if none. */
static size_t mapping_size(const void *p) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) return 0;
  char line[512];
  size_t size = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi) size = hi - lo;
  }
  fclose(f);
  return size;
}

enum { BLOCKS = 160, BLOCK = 64 * 1024 };
static void *blocks[BLOCKS];

static void *thread_main(void *arg) {
  (void)arg;
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(BLOCK);
    if (blocks[i] == NULL) return NULL;
  }
  return blocks[BLOCKS - 1];
}

TEST_MAIN() {
  (void)argc, (void)argv;
  struct rlimit as;
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    printf("SKIP an address-space limit is set (every region is one segment)\n");
    return 77; /* tests/run.sh: skipped */
  }
  size_t reserve = (size_t)hz_option_get(HZ_OPTION_ARENA_RESERVE) * MiB;
  void *first = malloc(64);
  if (!CHECK(first != NULL)) return 1;
  size_t single = mapping_size(first);
  printf("single-threaded: the first block's mapping is %zu KiB\n", single / KiB);
  CHECKF(single == 4 * MiB, "the first region of a single-threaded program is %zu KiB, want 4096", single / KiB);

  pthread_t t;
  void *last = NULL;
  if (!CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0)) return 1;
  CHECK(pthread_join(t, &last) == 0);
  if (!CHECKF(last != NULL, "the thread's mallocs failed")) return 1;
  size_t threaded = mapping_size(last);
  printf("threaded: the mapping of a thread's block is %zu KiB (ARENA_RESERVE %zu KiB)\n", threaded / KiB,
         reserve / KiB);
  CHECKF(threaded >= reserve, "a threaded program's region is %zu KiB, want ARENA_RESERVE (%zu KiB) or more",
         threaded / KiB, reserve / KiB);
  for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
  free(first);
  return check_failed() ? 1 : 0;
}
