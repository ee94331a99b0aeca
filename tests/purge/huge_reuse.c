// SPDX-License-Identifier: MIT
/* tests/purge/huge_reuse.c: freed huge blocks of mixed sizes serve new ones.
 * mimalloc-bench's malloc-large keeps 20 blocks of 5-25 MiB live, replacing
 * one at random: a freed mapping was reused only by a block of nearly its
 * size, the others waited resident for the purge delay while fresh mappings
 * faulted in (peak RSS 612 MiB for 397 live). Now pages move from cached
 * mappings to new blocks (large.c, gather).
 *
 * Checks: a block that fits no cached mapping takes a freed one's pages
 * instead of faulting fresh ones in (9 MiB after freeing 20 MiB: about
 * 2,300 faults on the old code), calloc'ed blocks made of moved pages read
 * zero, and over 400 random replacements of 10 blocks of 2.5-12.5 MiB each
 * block still holds what was written to it when it is freed (a move must
 * never take a live block's pages) while the process's kernel mappings stay
 * bounded (each move splits some). */
#include "check.h"
#include "testutil.h"
#include <stdbool.h>
#include <sys/resource.h>

#include "hakozuna.h"

enum { NBLOCKS = 10, ROUNDS = 400 };

static size_t count_maps(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  size_t n = 0;
  int c;
  if (!f) return 0;
  while ((c = fgetc(f)) != EOF) n += c == '\n';
  fclose(f);
  return n;
}

static long faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static void touch(char *p, size_t n) {
  for (size_t i = 0; i < n; i += 4096) p[i] = 1;
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 600000) == 0); /* nothing goes back during the test */
  char *big = malloc(20 * MiB);
  if (!CHECK(big)) return 1;
  touch(big, 20 * MiB);
  free(big);
  long f0 = faults();
  char *mid = malloc(9 * MiB);
  if (!CHECK(mid)) return 1;
  touch(mid, 9 * MiB);
  long moved_faults = faults() - f0;
  printf("9 MiB after freeing 20 MiB: %ld faults\n", moved_faults);
  CHECKF(moved_faults < 200, "%ld page faults writing 9 MiB after 20 MiB were freed", moved_faults);
  free(mid);
  char *zero = calloc(1, 30 * MiB); /* fits neither freed mapping: made of their pages */
  if (!CHECK(zero)) return 1;
  CHECKF(tu_nonzero(zero, 30 * MiB) == 0, "calloc(30 MiB) not zero at %zu", tu_nonzero(zero, 30 * MiB) - 1);
  free(zero);

  char *blocks[NBLOCKS] = {0};
  size_t sizes[NBLOCKS] = {0};
  uint64_t seeds[NBLOCKS] = {0}, rng = 42;
  size_t maps_before = count_maps();
  for (int round = 0; round < ROUNDS; round++) {
    int i = (int)(tu_rand(&rng) % NBLOCKS);
    size_t n = 5 * MiB / 2 + (size_t)(tu_rand(&rng) % (10 * MiB));
    bool zero = round % 4 == 0;
    /* (allocated before the old one is freed, as `buf = make_unique(...)` does) */
    char *p = zero ? calloc(1, n) : malloc(n);
    if (!CHECKF(p != NULL, "round %d: %zu bytes", round, n)) return 1;
    if (zero) CHECKF(tu_nonzero(p, n) == 0, "round %d: calloc(%zu) not zero at %zu", round, n, tu_nonzero(p, n) - 1);
    uint64_t seed = tu_rand(&rng);
    tu_fill(p, n, seed);
    if (blocks[i]) {
      size_t bad = tu_verify(blocks[i], sizes[i], seeds[i]);
      CHECKF(bad == 0, "round %d: a live block of %zu bytes changed at offset %zu", round, sizes[i], bad - 1);
      free(blocks[i]);
    }
    blocks[i] = p, sizes[i] = n, seeds[i] = seed;
  }
  for (int i = 0; i < NBLOCKS; i++) free(blocks[i]);
  size_t maps_after = count_maps();
  CHECKF(maps_after < maps_before + 5000, "kernel mappings %zu -> %zu", maps_before, maps_after);

  /* A block that takes a bigger freed mapping leaves no more than an eighth
   * of itself resident past its end once a purge has run (here forced; by
   * age a purge delay after the block was taken): ten times a 66 MiB buffer
   * written and freed, then a 50 MiB block kept (each took the 66 MiB one's
   * mapping, and kept 16 MiB more resident than it uses: 660 MiB for 500). */
  hz_collect(1); /* (the cached mappings above go back: RSS counts from here) */
  enum { KEPT = 10 };
  char *kept[KEPT];
  long rss0 = tu_rss_mib_quiet();
  for (int i = 0; i < KEPT; i++) {
    char *tmp = malloc(66 * MiB);
    if (!CHECK(tmp != NULL)) return 1;
    memset(tmp, 1, 66 * MiB);
    free(tmp);
    kept[i] = malloc(50 * MiB);
    if (!CHECK(kept[i] != NULL)) return 1;
    memset(kept[i], 2, 50 * MiB);
  }
  /* Until then the pages stay: a block soon freed gives its mapping back to
   * the cache whole, for the next bigger block (purged when taken, bench's
   * large ran at a fifth of its speed). */
  long kept_tails = tu_rss_mib_quiet() - rss0;
  printf("10 blocks of 50 MiB, each after a 66 MiB one was freed: RSS +%ld MiB\n", kept_tails);
  CHECKF(kept_tails > 600, "the pages past the blocks' ends went back at once: RSS +%ld MiB", kept_tails);
  hz_collect(0);
  long grew = tu_rss_mib_quiet() - rss0;
  printf("then a purge: RSS +%ld MiB\n", grew);
  CHECKF(grew < 500 + 500 / 8 + 8, "RSS grew by %ld MiB for 500 MiB of live blocks", grew);
  for (int i = 0; i < KEPT; i++) free(kept[i]);
  return 0;
}
