// SPDX-License-Identifier: MIT
/* tests/purge/cycles.c: a single-threaded program that frees its working
 * set and builds it again, round after round, keeps the memory in between.
 *
 * With no purge thread (a single-threaded program starts none), frees purge
 * what waits over a budget at once, so that a program that frees a lot and
 * then idles keeps little. A program that rebuilt 200 MB after each such
 * purge faulted every page in again at every round (glibc does too; the
 * other allocators keep the memory). Clean memory taken within a purge
 * delay of such a purge now raises the budget (arena.c, arena_regrow), and
 * activity in which less waits brings it back down (budget_look).
 *
 * Checks: after the first round the memory went back (the budget, for a
 * program that frees once: RSS within 64 MiB of the start); from the third
 * round on a round faults in fewer than a tenth of its pages (the code
 * before: all of them, 51,200 a round); after 1.2 s of other activity with
 * a 10 ms purge delay, one more round freed goes back again. */
#include "check.h"
#include "testutil.h"
#include <sys/resource.h>

#include "hakozuna.h"

enum { BLOCKS = 51200, SIZE = 4000, ROUNDS = 6 };
static char *blocks[BLOCKS];

static long faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Builds the working set (a page written per block) and frees it; the
 * page faults of the building. */
static long round_trip(void) {
  long f0 = faults();
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(SIZE);
    if (!CHECK(blocks[i] != NULL)) return -1;
    memset(blocks[i], i, SIZE);
  }
  long f = faults() - f0;
  for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
  return f;
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 1000) == 0); /* (slow machines: a round within a delay) */
  long rss0 = tu_rss_mib_quiet();
  long f = round_trip();
  long kept = tu_rss_mib_quiet() - rss0;
  printf("round 1: %ld faults, then RSS +%ld MiB\n", f, kept);
  CHECKF(kept < 64, "one round of 200 MB freed: RSS +%ld MiB kept", kept);
  for (int r = 2; r <= ROUNDS; r++) {
    f = round_trip();
    printf("round %d: %ld faults\n", r, f);
    if (r >= 3) CHECKF(f < BLOCKS / 10, "round %d faulted %ld pages in again", r, f);
  }

  /* Other work, with a short delay: the budget comes back down. */
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 10) == 0);
  for (double t0 = tu_now(); tu_now() - t0 < 1.2;) {
    void *p = malloc(1 << 20);
    if (!CHECK(p != NULL)) return 1;
    memset(p, 1, 4096);
    free(p);
  }
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 1000) == 0);
  round_trip();
  kept = tu_rss_mib_quiet() - rss0;
  printf("after 1.2 s of other work, one more round: RSS +%ld MiB\n", kept);
  CHECKF(kept < 64, "a round freed after the budget went back down: RSS +%ld MiB kept", kept);
  return 0;
}
