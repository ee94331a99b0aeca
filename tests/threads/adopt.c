// SPDX-License-Identifier: MIT
/* tests/threads/adopt.c: a thread that takes over an exited thread's heap
 * within a purge delay finds its current spans as they were, and after the
 * delay they are collected.
 *
 * 1. With a purge delay of 10 s, a thread mallocs and frees blocks of six
 *    sizes under 1 KiB and exits; the next thread mallocs the same sizes
 *    and gets the same blocks without a single refill. Collected at the
 *    exit, as before, every class refilled: a program that runs a thread
 *    per task set up each class again in every thread (docs/perf.md §92).
 *    The exit empties the stashes (blocks of 1 KiB and more) all the same.
 * 2. hz_collect(1) collects a waiting heap whole: its current spans no
 *    longer count as held.
 * 3. With no purge delay (0: everything at once), the exit collects the
 *    heap whole: the next thread refills every class. */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <pthread.h>
#include <string.h>

#define SIZES 6
#define PER 4
static const size_t sizes[SIZES] = {64, 112, 256, 512, 800, 960};
#define STASHED 20000 /* (a class with a stash) */
static void *first[SIZES][PER], *second[SIZES][PER];

static uint64_t refills(void) {
  hz_stats_t st;
  uint64_t n = 0;
  if (!CHECK(tu_stats(&st) == 0)) return 0;
  for (int i = 0; i < SIZES; i++) n += st.classes[tu_class_of(sizes[i])].refills;
  return n;
}

static void *use(void *arg) {
  void *(*got)[PER] = arg;
  free(malloc(16)); /* (a thread's first malloc takes the slow path, whatever its heap holds) */
  void *st[PER];
  for (int k = 0; k < PER; k++) st[k] = malloc(STASHED);
  for (int k = 0; k < PER; k++) free(st[k]);
  for (int i = 0; i < SIZES; i++)
    for (int k = 0; k < PER; k++) {
      got[i][k] = malloc(sizes[i]);
      if (CHECK(got[i][k] != NULL)) memset(got[i][k], 7, sizes[i]);
    }
  for (int i = 0; i < SIZES; i++)
    for (int k = 0; k < PER; k++) free(got[i][k]);
  return NULL;
}

static void run(void *(*got)[PER]) {
  pthread_t t;
  if (CHECK(pthread_create(&t, NULL, use, got) == 0)) CHECK(pthread_join(t, NULL) == 0);
}

static int same_blocks(void) {
  int same = 0;
  for (int i = 0; i < SIZES; i++)
    for (int k = 0; k < PER; k++)
      for (int j = 0; j < PER; j++) same += second[i][k] == first[i][j];
  return same;
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 10000) == 0);
  /* (this thread's heap uses the sizes too: pthread_create and _join
   * allocate here, and their refills are not the other heap's) */
  for (int i = 0; i < SIZES; i++) free(malloc(sizes[i]));
  run(first);
  uint64_t before = refills();
  run(second);
  uint64_t taken = refills() - before;
  CHECKF(taken == 0, "the thread that took the exited one's heap over refilled %llu times for the same sizes",
         (unsigned long long)taken);
  CHECKF(same_blocks() == SIZES * PER, "%d of its %d blocks were the exited thread's", same_blocks(), SIZES * PER);

  hz_stats_t st;
  if (CHECK(tu_stats(&st) == 0)) {
    CHECKF(st.unused_stashed == 0, "%llu bytes stashed after the exit", (unsigned long long)st.unused_stashed);
    CHECKF(st.unused_empty_spans >= 4 * 32 * KiB, "the waiting heap holds %llu bytes of empty current spans",
           (unsigned long long)st.unused_empty_spans);
  }
  hz_collect(1);
  if (CHECK(tu_stats(&st) == 0))
    CHECKF(st.unused_empty_spans < 4 * 32 * KiB, "after hz_collect(1): %llu bytes in empty spans",
           (unsigned long long)st.unused_empty_spans);

  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 0) == 0);
  run(first);
  before = refills();
  run(second);
  taken = refills() - before;
  CHECKF(taken >= SIZES, "with no purge delay, the next thread refilled %llu times for %d sizes",
         (unsigned long long)taken, SIZES);
  return 0;
}
