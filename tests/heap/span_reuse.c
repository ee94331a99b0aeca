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
 * 3. A heap's first span of a class of blocks of a page or more holds one
 *    block's worth of slices; its next ones hold 4 blocks or more (§63;
 *    8 before). Taken from
 *    resident memory, as spans are first, a first span of 8 such blocks
 *    kept all its pages resident: a class that hands out one 32 KiB block
 *    now and then kept 256 KiB (16 threads passing blocks of up to 300 KB:
 *    59 MiB peak RSS, now 26).
 * 4. Once such a class has a span of 4 blocks, its emptied first span is not
 *    kept as the class's spare: it serves another class's new span. Kept,
 *    each class that had gone past one block held both spans' pages
 *    (mimalloc-bench's espresso: 256 KiB of its 3.6 MiB peak RSS).
 *
 * The purge delay is -1 (nothing returned by age) so that the figures do not
 * depend on how fast the machine runs; stashes are off (HAKOZUNA_STASH=0),
 * so that freed blocks go back to their spans at once. */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLICE 32768

static uint64_t committed_peak(void) {
  hz_stats_t st;
  if (tu_stats(&st) != 0) return 0;
  return st.bytes_committed_peak;
}

/* A large block starts in its span's first page (large.c, large_offset). */
static uintptr_t span_of(const void *p) { return (uintptr_t)p & ~(uintptr_t)(SLICE - 1); }

static void best_fit(void) {
  char *p = malloc(150000); /* 37 pages: a span of 5 slices */
  CHECK(p != NULL);
  memset(p, 1, 150000);
  free(p);
  char *q = malloc(110000); /* 27 pages: 4 slices; 5 is within half again */
  CHECKF(span_of(q) == span_of(p), "malloc(110000) after free of a 150000-byte block: %p, the freed span was at %p",
         (void *)q, (void *)span_of(p));
  memset(q, 2, 110000);
  free(q);
  char *r = malloc(40000); /* 2 slices: 5 is more than half again */
  CHECKF(span_of(r) != span_of(q), "malloc(40000) took the cached 5-slice span at %p", (void *)r);
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

/* Blocks of the 32 KiB class in spans of this heap, at most ever (stats). */
static uint64_t class_peak(size_t block_size) {
  hz_stats_t st;
  if (tu_stats(&st) != 0) return 0;
  for (uint32_t i = 0; i < st.class_count; i++)
    if (st.classes[i].block_size == block_size) return st.classes[i].peak;
  return 0;
}

static void first_span_small(void) {
  CHECKF(class_peak(SLICE) == 0, "the 32 KiB class was used before this part of the test");
  char *p = malloc(SLICE);
  CHECK(p != NULL);
  memset(p, 4, SLICE);
  uint64_t first = class_peak(SLICE);
  char *q = malloc(SLICE); /* the class is in use: its next span holds 4 */
  CHECK(q != NULL);
  memset(q, 5, SLICE);
  uint64_t second = class_peak(SLICE);
  printf("32 KiB class: first span %llu block(s), then %llu in all\n", (unsigned long long)first,
         (unsigned long long)second);
  CHECKF(first == 1, "a heap's first span of 32 KiB blocks holds %llu blocks", (unsigned long long)first);
  CHECKF(second >= 5, "with a second 32 KiB block, spans of the class hold %llu", (unsigned long long)second);
  free(p);
  free(q);
}

static void first_span_retired(void) {
  CHECKF(class_peak(20480) == 0 && class_peak(9216) == 0, "the 20 and 9 KiB classes were used before");
  char *a = malloc(20000); /* the 20 KiB class's first span: one block */
  char *b = malloc(20000); /* its next span: 4 blocks */
  CHECK(a != NULL && b != NULL);
  memset(a, 6, 20000);
  memset(b, 7, 20000);
  free(a); /* its span is empty; the class's current span is b's */
  free(b);
  char *q = malloc(9000); /* the 9 KiB class's first span: one slice, as a's */
  CHECK(q != NULL);
  memset(q, 8, 9000);
  printf("first span of the 20 KiB class at %p; the 9 KiB class's first block at %p\n", (void *)a, (void *)q);
  CHECKF(q == a, "the 20 KiB class kept its emptied first span (%p) as a spare: malloc(9000) took new memory at %p",
         (void *)a, (void *)q);
  free(q);
}

/* 5. Large blocks start at varied cache lines of their first page, within
 *    the bytes their last page leaves unused, so that the blocks' first
 *    bytes (and the bytes at the same offset into each page) do not all
 *    compete for the same cache sets (docs/perf.md §89): 64 blocks of
 *    36,865 bytes (10 pages, 4,095 bytes unused: any of the 64 lines)
 *    began at one offset, 0; now at 8 lines or more, each block's request
 *    in its 10 pages; the span, serving a block of another size next,
 *    keeps its line where that size leaves room for it. A block of whole pages, or aligned past a cache
 *    line, starts on a page. */
static void coloured_starts(void) {
  enum { N = 64, SIZE = 36865 };
  char *p[N];
  uint64_t seen = 0; /* bit i: some block starts at line i of its page */
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    CHECK(p[i] != NULL);
    uintptr_t off = (uintptr_t)p[i] % 4096;
    CHECKF(off % 64 == 0 && off + SIZE <= 10 * 4096 && malloc_usable_size(p[i]) == 10 * 4096,
           "malloc(%d) = %p: usable %zu", SIZE, (void *)p[i], malloc_usable_size(p[i]));
    seen |= (uint64_t)1 << (off / 64);
    memset(p[i], i, SIZE);
  }
  CHECKF(__builtin_popcountll(seen) >= 8, "64 blocks of %d bytes start at %d lines of their first page (mask %#llx)",
         SIZE, __builtin_popcountll(seen), (unsigned long long)seen);
  for (int i = 0; i < N; i++) {
    for (size_t j = 0; j < SIZE; j += 997) CHECK(p[i][j] == (char)i);
    uintptr_t off = (uintptr_t)p[i] % 4096;
    free(p[i]);
    /* the span just freed, its line again where 10 pages leave it room (3,995 bytes unused) */
    char *q = malloc(SIZE + 100);
    uintptr_t want = off <= 10 * 4096 - (SIZE + 100) ? off : 0;
    CHECKF(q != NULL && (uintptr_t)q / 4096 == (uintptr_t)p[i] / 4096 && (uintptr_t)q % 4096 == want,
           "malloc(%d) after the free of %p: %p", SIZE + 100, (void *)p[i], (void *)q);
    free(q);
  }
  char *whole = malloc(10 * 4096), *aligned = aligned_alloc(128, SIZE);
  CHECKF((uintptr_t)whole % 4096 == 0, "malloc(40960) = %p", (void *)whole);
  CHECKF((uintptr_t)aligned % 128 == 0, "aligned_alloc(128, %d) = %p", SIZE, (void *)aligned);
  free(whole);
  free(aligned);
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, -1) == 0);
  /* Freed blocks of 4 KiB and more go to spans at once, not to the
   * thread's stashes (stash.c; tests/heap/stash covers those). */
  CHECK(hz_option_set(HZ_OPTION_STASH, 0) == 0);
  best_fit();
  varied_sizes();
  first_span_small();
  first_span_retired();
  coloured_starts();
  return 0;
}
