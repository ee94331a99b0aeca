// SPDX-License-Identifier: MIT
/* tests/purge/calloc_reuse.c: a big calloc'ed buffer that the program uses
 * sparsely stays sparse when its memory is reused.
 *
 * A freed huge block's mapping waits in the cache, resident, for the next
 * one. calloc cleared a reused mapping by writing zeros over all of it: a
 * 64 MiB buffer calloc'ed and freed 40 times, a few pages of it used each
 * time, made all 64 MiB resident (glibc maps each afresh: a few pages) and
 * took 4 ms a call. From 32 MiB the pages go back to the OS instead and read
 * zero again (alloc.c, clear_big). Below that, and where cached pages moved
 * into a new mapping, only what may hold old data is cleared.
 *
 * Checks, with the standard API (preloaded, default and checked builds, and
 * on glibc): resident memory stays under 24 MiB over the 40 rounds; the
 * bytes written in one round read zero in the next; blocks of 32 MiB less a
 * page to 40 MiB, filled with 0xa5 and freed, come back from calloc all
 * zero, as does an 80 MiB block made partly of a freed 40 MiB one's pages. */
#include "check.h"
#include "testutil.h"

enum { ROUNDS = 40, SPOTS = 8 };

static void spots(size_t n, size_t *at) {
  for (int k = 0; k < SPOTS; k++) at[k] = (size_t)k * (n / SPOTS) + 12345;
  at[0] = 0;
  at[SPOTS - 1] = n - 1;
}

/* calloc(n) after a block of n (or more) was filled and freed reads zero */
static void refill(size_t filled, size_t n) {
  char *p = malloc(filled);
  if (!CHECK(p != NULL)) return;
  memset(p, 0xa5, filled);
  free(p);
  char *q = calloc(1, n);
  if (!CHECK(q != NULL)) return;
  size_t bad = tu_nonzero(q, n);
  CHECKF(bad == 0, "calloc(%zu) after %zu bytes were filled and freed: not zero at %zu", n, filled, bad - 1);
  free(q);
}

TEST_MAIN() {
  const size_t n = 64 * MiB;
  size_t at[SPOTS];
  spots(n, at);
  long rss0 = tu_rss_mib_quiet(), most = 0;
  for (int r = 0; r < ROUNDS; r++) {
    unsigned char *p = calloc(1, n);
    if (!CHECKF(p != NULL, "round %d", r)) return 1;
    for (int k = 0; k < SPOTS; k++) {
      CHECKF(p[at[k]] == 0, "round %d: byte %zu of a calloc'ed block is %d", r, at[k], p[at[k]]);
      p[at[k]] = 0xff;
    }
    long grew = tu_rss_mib_quiet() - rss0;
    if (grew > most) most = grew;
    free(p);
  }
  printf("calloc(64 MiB), %d pages written, freed, %d times: RSS +%ld MiB at most\n", SPOTS, ROUNDS, most);
  CHECKF(most < 24, "RSS grew by %ld MiB for %d written pages of a reused calloc'ed block", most, SPOTS);

  refill(32 * MiB - 4096 + 100, 32 * MiB - 4096 + 100);
  refill(32 * MiB + 1, 32 * MiB + 1);
  refill(40 * MiB + 12345, 40 * MiB + 12345);
  refill(40 * MiB, 36 * MiB); /* (a mapping bigger than the block) */
  refill(40 * MiB, 80 * MiB); /* (a new mapping, of the freed one's pages where they move) */
  return 0;
}
