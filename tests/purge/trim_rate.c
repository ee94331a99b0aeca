// SPDX-License-Identifier: MIT
/* tests/purge/trim_rate.c: malloc_trim called over and over stays cheap.
 *
 * malloc_trim walks the calling thread's partly used spans and returns the
 * pages inside their free blocks, a madvise call for nearly each. stress-ng's
 * malloc stressor calls it every 8th round and ran at 0.55x glibc's speed.
 * The walk now runs at most every 10 ms in a thread (thread.c, hz_heap_trim);
 * hz_collect(1) still walks every time, and a walk skips the blocks whose
 * pages it returned before and that nobody wrote since (their mark): with
 * nothing freed since, a walk makes no call (it purged the head of each
 * list again before, docs/perf.md §81). Not timed: the test counts madvise
 * calls over 2,000 malloc_trim calls and holds them to what one walk makes
 * times the 10 ms windows that passed (each call walked before: 2,000 walks). */
#include "check.h"
#include "testutil.h"
#include <time.h>

#include "hakozuna.h"

static uint64_t madvises(void) {
  hz_stats_t st = {.size = sizeof st};
  return hz_stats_get(&st) == 0 ? st.madvise_calls : 0;
}

static double clock_ms(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

TEST_MAIN() {
  enum { N = 4000 };
  static char *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(6000 + (size_t)(i % 5) * 1000); /* blocks over a page: their inner pages go back */
    if (!CHECK(p[i])) return 1;
    memset(p[i], 1, 6000);
  }
  for (int i = 0; i < N; i += 2) free(p[i]), p[i] = NULL;
  /* one walk, not rate-limited, then another with nothing freed since */
  uint64_t m0 = madvises();
  hz_collect(1);
  uint64_t first = madvises() - m0;
  CHECKF(first > 0, "hz_collect(1) made no madvise call with free blocks over a page in partly used spans");
  m0 = madvises();
  hz_collect(1);
  uint64_t per_walk = madvises() - m0;
  CHECKF(per_walk <= 2, "hz_collect(1) with nothing freed since made %llu madvise calls (the first: %llu)",
         (unsigned long long)per_walk, (unsigned long long)first);
  m0 = madvises();
  double t0 = now_ms();
  for (int i = 0; i < 2000; i++) malloc_trim(0);
  double ms = now_ms() - t0;
  /* (the walks' window runs on the allocator's clock, CLOCK_MONOTONIC_COARSE,
   * which ticks every 1-10 ms: the last walk was no later than this) */
  double walked_by = clock_ms(CLOCK_MONOTONIC_COARSE);
  uint64_t calls = madvises() - m0, allowed = ((uint64_t)(ms / 10) + 2) * (per_walk + 1);
  printf("2000 malloc_trim calls in %.1f ms: %llu madvise calls (one walk: %llu; allowed %llu)\n", ms,
         (unsigned long long)calls, (unsigned long long)per_walk, (unsigned long long)allowed);
  CHECKF(calls <= allowed, "%llu madvise calls in 2000 malloc_trim over %.1f ms: every call walked the spans",
         (unsigned long long)calls, ms);
  /* and after the window a walk returns what was freed since */
  for (int i = 1; i < N; i += 4) free(p[i]), p[i] = NULL;
  while (clock_ms(CLOCK_MONOTONIC_COARSE) - walked_by < 11) {
  }
  m0 = madvises();
  CHECK(malloc_trim(0) == 1);
  CHECKF(madvises() - m0 >= N / 16, "malloc_trim after the window returned %llu of 1,000 blocks newly freed",
         (unsigned long long)(madvises() - m0));
  for (int i = 0; i < N; i++) free(p[i]);
  return check_failed() ? 1 : 0;
}
