// SPDX-License-Identifier: MIT
/* tests/heap/busy_cache.c: a thread that freed large blocks into its span
 * cache and then only makes fast-path calls (a malloc and a free of one
 * small size, over and over) gets the cache's memory back to the OS. Its
 * owner returns expired spans itself only in its slow paths, which such a
 * thread never reaches again, and the purge thread takes a cache only from
 * heaps whose owner has not looked at it for two purge delays (one that
 * does look often would wait on the purge thread's claim: docs/perf.md
 * §36). With "the owner made no malloc" as the purge thread's test, this
 * thread (it mallocs all the time) kept 3.75 MiB for good. RSS is read
 * with open/read; the watching thread makes no allocator call. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS 60 /* of 64 KiB: 3.75 MiB, within the 4 MiB thread cache */

static pthread_barrier_t step;
static atomic_int stop;
static atomic_long calls;

static void *worker(void *arg) {
  (void)arg;
  static void *p[BLOCKS];
  for (int i = 0; i < BLOCKS; i++)
    if ((p[i] = malloc(64 * 1024)) != NULL) memset(p[i], 1, 64 * 1024);
  void *warm = malloc(32); /* the small class's span is set up before the watch */
  free(warm);
  pthread_barrier_wait(&step); /* main reads RSS with the blocks live */
  pthread_barrier_wait(&step);
  for (int i = 0; i < BLOCKS; i++) free(p[i]);
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    void *q = malloc(32);
    if (q != NULL) ((volatile char *)q)[0] = 1;
    free(q);
    atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
  }
  return NULL;
}

TEST_MAIN() {
  pthread_t t;
  pthread_barrier_init(&step, NULL, 2);
  if (!CHECK(pthread_create(&t, NULL, worker, NULL) == 0)) return 1;
  pthread_barrier_wait(&step);
  long full = tu_rss_mib_quiet();
  pthread_barrier_wait(&step);
  /* a purge delay is 100 ms: the cache expires after two, the pool's pages
   * go one more later; watch for up to 10 s (slow emulators) */
  long now = full;
  double until = tu_now() + 10;
  while (tu_now() < until && (now = tu_rss_mib_quiet()) > full - 3) {
    struct timespec tick = {0, 20 * 1000 * 1000};
    nanosleep(&tick, NULL);
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  CHECKF(full >= 4, "RSS %ld MiB with 3.75 MiB of blocks live", full);
  CHECKF(atomic_load(&calls) > 1000, "the thread made %ld malloc+free calls while watched", atomic_load(&calls));
  CHECKF(now >= 0 && now <= full - 3,
         "RSS %ld MiB 10 s after a thread freed 3.75 MiB into its cache and went on with fast-path calls (was %ld)",
         now, full);
  return 0;
}
