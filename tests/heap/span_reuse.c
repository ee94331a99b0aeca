// SPDX-License-Identifier: MIT
/* tests/heap/span_reuse.c: which memory a heap reuses for a new span.
 *
 * 1. A large block that finds no cached span of its size takes a cached one
 *    up to half as big again, whole, rather than new memory; not a bigger
 *    one (its slack would stay resident with the block).
 * 2. So a thread whose large blocks vary in size keeps about what it uses:
 *    large blocks of random sizes from 33 to 300 KB, 4 live at a time,
 *    took new spans while the cache filled with spans of sizes not asked
 *    for again: the committed peak grew by 5.9 MiB (docs/perf.md §46); now
 *    by 2.2, at most 3 allowed.
 * 3. The first span of a class of blocks of a page or more (carved one at
 *    a time) comes from memory not resident, though freed resident memory
 *    waits: its pages other than its blocks' stay unbacked. On resident
 *    memory, a class that hands out one 32 KiB block kept 256 KiB resident
 *    (16 threads passing blocks of up to 300 KB: 59 MiB peak RSS, now 26).
 *
 * The purge delay is -1 (nothing returned by age) so that the figures do not
 * depend on how fast the machine runs. */
#include "check.h"

#include <hakozuna.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLICE 32768

static uint64_t committed_peak(void) {
  hz_stats_t st;
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  if (hz_stats_get(&st) != 0) return 0;
  return st.bytes_committed_peak;
}

static size_t resident_pages(void *p, size_t len) {
  size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = len / ps, count = 0;
  unsigned char vec[4096];
  if (n > sizeof vec || mincore(p, len, vec) != 0) return (size_t)-1;
  for (size_t i = 0; i < n; i++) count += vec[i] & 1;
  return count;
}

static void best_fit(void) {
  char *p = malloc(150000); /* 37 pages: a span of 5 slices */
  CHECK(p != NULL);
  memset(p, 1, 150000);
  free(p);
  char *q = malloc(110000); /* 27 pages: 4 slices; 5 is within half again */
  CHECKF(q == p, "malloc(110000) after free of a 150000-byte block: %p, the freed span was %p", (void *)q, (void *)p);
  memset(q, 2, 110000);
  free(q);
  char *r = malloc(40000); /* 2 slices: 5 is more than half again */
  CHECKF(r != q, "malloc(40000) took the cached 5-slice span at %p", (void *)r);
  free(r);
  hz_collect(1);
}

static void varied_sizes(void) {
  enum { LIVE = 4, ROUNDS = 20000 };
  char *live[LIVE] = {0};
  uint64_t before = committed_peak(), seed = 12345;
  for (int i = 0; i < ROUNDS; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    size_t size = 33000 + (size_t)(seed >> 33) % 267000;
    free(live[i % LIVE]);
    live[i % LIVE] = malloc(size);
    CHECK(live[i % LIVE] != NULL);
    memset(live[i % LIVE], i, size);
  }
  uint64_t grew = committed_peak() - before;
  for (int i = 0; i < LIVE; i++) free(live[i]);
  printf("varied sizes: committed peak +%.2f MiB\n", grew / 1048576.0);
  CHECKF(grew <= 3u << 20, "4 large blocks of 33-300 KB live at a time: committed peak grew by %.2f MiB",
         grew / 1048576.0);
  hz_collect(1);
}

static void lazy_first_span(void) {
  enum { BIG = 64 };
  char *big[BIG];
  hz_option_set(HZ_OPTION_THREAD_CACHE, 0); /* freed spans go to the pool, resident */
  for (int i = 0; i < BIG; i++) {
    big[i] = malloc(8 * SLICE);
    CHECK(big[i] != NULL);
    memset(big[i], 3, 8 * SLICE);
  }
  for (int i = 0; i < BIG; i++) free(big[i]);
  char *p = malloc(SLICE); /* the 32 KiB class: spans of 8 blocks, 256 KiB */
  CHECK(p != NULL && ((uintptr_t)p & (SLICE - 1)) == 0);
  memset(p, 4, SLICE);
  size_t ps = (size_t)sysconf(_SC_PAGESIZE), res = resident_pages(p, 8 * SLICE);
  printf("first 32 KiB block's span: %zu of %zu pages resident\n", res, 8 * SLICE / ps);
  CHECKF(res <= 2 * SLICE / ps, "the span of one 32 KiB block has %zu of its %zu pages resident", res,
         8 * SLICE / ps);
  free(p);
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, -1) == 0);
  best_fit();
  varied_sizes();
  lazy_first_span();
  return 0;
}
