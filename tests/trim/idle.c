// SPDX-License-Identifier: MIT
/* tests/trim/idle.c: a thread that frees and then idles gets the pages
 * its spans hold for nothing back without another call: those inside free
 * 16 KiB blocks of spans that still hold a live block, the pages that hold
 * only free 176-byte blocks (blocks straddle pages) in spans that still hold
 * two live ones, and all of a class's spare empty span. Only the purge thread can do it, while the owner makes
 * no call (issue 11, target 5c); hakozuna used to keep them until the owner
 * called malloc_trim or exited. The pages are watched with mincore, with no
 * allocator call meanwhile (a malloc would count as activity); a 64 KiB
 * free puts a span in the thread's cache, which starts the purge thread.
 * Then everything is used again: the blocks kept intact, the freed ones
 * reusable, and mallocs of the freed 176-byte blocks' count get exactly
 * those blocks back (the trim takes them off their lists; the refill that
 * finds a list empty puts them back: a block lost would come from a new
 * span instead, one put back twice would come twice). Linked with
 * hakozuna: it counts on its geometry (16 KiB blocks page-aligned, 8 to a
 * span; 1 KiB blocks, 32 to a 32 KiB span; 176-byte ones, 186). */
#include "check.h"
#include "testutil.h"

#include <sys/mman.h>

#include "hakozuna.h"

#define BIG 16000   /* class 16384 */
#define NBIG 65   /* eight full spans, and the current one */
#define SMALL 1000  /* class 1024 */
#define NSMALL 40   /* one full span and 8 blocks of the next */
#define SPAN 32768
#define MID 170   /* class 176 */
#define MID_SIZE 176
#define MID_PER 186 /* blocks to a 32 KiB span */
#define NMID (4 * MID_PER) /* three spans to trim and the current one */
/* The blocks kept live in each span: pages 0 and 4 (of 8) hold one; the last
 * one freed heads the list, so page 7 stays too (the owner's next free
 * links to it). Pages 1-3 and 5-6 hold only free blocks. */
#define MID_LIVE(j) ((j) == 0 || (j) == 100)

static char *big[NBIG], *small[NSMALL], *mid[NMID], *again[NMID], *warm[SPAN / 16384];

/* Resident pages of [p, p + n) (page-aligned p). */
static size_t resident(const void *p, size_t n) {
  size_t ps = tu_page_size(), count = 0;
  unsigned char v[64];
  if (!CHECK(n / ps <= sizeof v) || !CHECK(mincore((void *)p, n, v) == 0)) return SIZE_MAX;
  for (size_t i = 0; i < n / ps; i++) count += v[i] & 1;
  return count;
}

/* Resident pages the owner holds for nothing: inside the freed big blocks
 * (past the page holding the free-list link), and the small span. */
static size_t held(void) {
  size_t ps = tu_page_size(), n = 0;
  for (int i = 0; i < NBIG; i++)
    if (i % 8 != 0 && i < 64) n += resident(big[i] + ps, 16384 - ps);
  for (int k = 0; k < 3; k++) n += resident(mid[k * MID_PER] + ps, 3 * ps) + resident(mid[k * MID_PER] + 5 * ps, 2 * ps);
  return n + resident(small[0], SPAN);
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (char *const *)a, y = (uintptr_t) * (char *const *)b;
  return x < y ? -1 : x > y;
}

TEST_MAIN() {
  size_t ps = tu_page_size();
  if (ps != 4096) {
    printf("SKIP: the geometry assumed here needs 4 KiB pages (have %zu)\n", ps);
    return 77;
  }
  /* The idle trim is the purge thread's work; this program starts no thread
   * of its own, where the default (1) starts none either (purge/single). */
  CHECK(hz_option_set(HZ_OPTION_PURGE_THREAD, 2) == 0);
  /* The 16 KiB blocks freed go to their spans, not to this thread's stash,
   * which the idle trim leaves alone as it leaves current spans (stash.c). */
  CHECK(hz_option_set(HZ_OPTION_STASH, 0) == 0);
  /* A heap's first span of a class of blocks of a page or more holds one
   * block's worth of slices (heap.c, class_span_slices): two 16 KiB blocks
   * with 4 KiB pages, kept live to the end, so that big[] starts a span of 8. */
  int warm_n = tu_page_size() <= 16384 ? SPAN / 16384 : 0;
  for (int i = 0; i < warm_n; i++) {
    warm[i] = malloc(BIG);
    CHECK(warm[i] != NULL);
  }
  for (int i = 0; i < NBIG; i++) {
    big[i] = malloc(BIG);
    if (CHECK(big[i])) tu_fill(big[i], BIG, (uint64_t)i);
  }
  for (int i = 0; i < NSMALL; i++) {
    small[i] = malloc(SMALL);
    if (CHECK(small[i])) tu_fill(small[i], SMALL, 1000 + (uint64_t)i);
  }
  CHECKF((uintptr_t)small[0] % SPAN == 0 && small[31] == small[0] + 31 * 1024,
         "the first 32 1 KiB blocks fill one span (%p, %p)", (void *)small[0], (void *)small[31]);
  for (int i = 0; i < NBIG; i++)
    CHECKF((uintptr_t)big[i] % 16384 == 0, "16 KiB blocks are page-aligned (%p)", (void *)big[i]);
  for (int i = 0; i < NMID; i++) {
    mid[i] = malloc(MID);
    if (CHECK(mid[i])) tu_fill(mid[i], MID, 4000 + (uint64_t)i);
  }
  for (int i = 0; i < NMID; i++) {
    char *first = mid[i - i % MID_PER];
    CHECKF((uintptr_t)first % SPAN == 0 && mid[i] == first + (i % MID_PER) * MID_SIZE,
           "176-byte blocks fill spans in order (%p: block %d of the span at %p)", (void *)mid[i], i % MID_PER,
           (void *)first);
  }
  if (check_failed()) return 1;
  void *large = malloc(65536);
  CHECK(large != NULL);
  memset(large, 1, 65536);

  /* All but every eighth big block (each span keeps one live block), the
   * whole first small span (it becomes the class's spare), the large one. */
  for (int i = 0; i < 64; i++)
    if (i % 8 != 0) free(big[i]);
  for (int i = 0; i < 32; i++) free(small[i]);
  for (int i = 0; i < NMID; i++)
    if (!MID_LIVE(i % MID_PER)) free(mid[i]);
  free(large);
  size_t before = held();
  CHECKF(before >= 8 * 7 * 3 + 3 * 5, "%zu pages held right after the frees", before);

  /* No allocator call from here until the pages are back. */
  double give_up = tu_now() + 10;
  size_t now = before;
  while ((now = held()) != 0 && tu_now() < give_up) usleep(10000);
  CHECKF(now == 0, "%zu of %zu pages still resident after 10 s idle", now, before);

  for (int i = 0; i < NBIG; i++)
    if (i % 8 == 0 || i == 64) CHECK(tu_verify(big[i], BIG, (uint64_t)i) == 0);
  for (int i = 32; i < NSMALL; i++) CHECK(tu_verify(small[i], SMALL, 1000 + (uint64_t)i) == 0);
  for (int i = 0; i < NMID; i++)
    if (MID_LIVE(i % MID_PER)) CHECK(tu_verify(mid[i], MID, 4000 + (uint64_t)i) == 0);
  /* As many mallocs as frees: exactly the freed blocks. */
  size_t nfreed = 0;
  for (int i = 0; i < NMID; i++)
    if (!MID_LIVE(i % MID_PER)) mid[nfreed++] = mid[i];
  for (size_t i = 0; i < nfreed; i++) {
    again[i] = malloc(MID);
    if (CHECK(again[i])) tu_fill(again[i], MID, 5000 + (uint64_t)i);
  }
  qsort(mid, nfreed, sizeof *mid, by_address);
  char **sorted = malloc(nfreed * sizeof *sorted);
  if (CHECK(sorted != NULL)) {
    memcpy(sorted, again, nfreed * sizeof *sorted);
    qsort(sorted, nfreed, sizeof *sorted, by_address);
    size_t differ = 0;
    for (size_t i = 0; i < nfreed; i++) differ += sorted[i] != mid[i];
    CHECKF(differ == 0, "%zu of %zu mallocs did not return a freed 176-byte block", differ, nfreed);
    free(sorted);
  }
  for (size_t i = 0; i < nfreed; i++) {
    CHECK(tu_verify(again[i], MID, 5000 + (uint64_t)i) == 0);
    free(again[i]);
  }
  for (int i = 0; i < 64; i++) {
    if (i % 8 == 0) continue;
    big[i] = malloc(BIG);
    if (CHECK(big[i])) tu_fill(big[i], BIG, 2000 + (uint64_t)i);
  }
  for (int i = 0; i < 32; i++) {
    small[i] = malloc(SMALL);
    if (CHECK(small[i])) tu_fill(small[i], SMALL, 3000 + (uint64_t)i);
  }
  for (int i = 0; i < NBIG; i++) {
    CHECK(tu_verify(big[i], BIG, i % 8 == 0 || i == 64 ? (uint64_t)i : 2000 + (uint64_t)i) == 0);
    free(big[i]);
  }
  for (int i = 0; i < NSMALL; i++) {
    CHECK(tu_verify(small[i], SMALL, i < 32 ? 3000 + (uint64_t)i : 1000 + (uint64_t)i) == 0);
    free(small[i]);
  }
  return check_failed() ? 1 : 0;
}
