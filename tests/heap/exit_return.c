// SPDX-License-Identifier: MIT
/* tests/heap/exit_return.c: a thread that exits gives back every span it
 * used, its current ones included. Four threads at once (so no thread
 * adopts another's heap before it ends) each take and free blocks of every
 * small size, 16 B to 32 KiB, and exit; after hz_collect(1) the spans they
 * used must not be held as empty spans or spans with free blocks (they go
 * back to the pools, and the purge returns them). heap_collect walks
 * only the classes a heap used (a mask kept by the slow paths): a class
 * missing from the mask would leave its spans with the abandoned heap. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>

#include "hakozuna.h"

#define THREADS 4

static pthread_barrier_t all_started;

static void *worker(void *arg) {
  (void)arg;
  pthread_barrier_wait(&all_started); /* four live heaps at once */
  for (size_t n = 16; n <= 32768; n += n < 1024 ? 16 : 128) {
    void *p[4];
    for (int i = 0; i < 4; i++) {
      p[i] = malloc(n);
      if (p[i]) ((char *)p[i])[0] = 1;
    }
    for (int i = 0; i < 4; i++) free(p[i]);
  }
  pthread_barrier_wait(&all_started); /* none exits before all are done */
  return NULL;
}

TEST_MAIN() {
  pthread_t t[THREADS];
  pthread_barrier_init(&all_started, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  hz_collect(1);
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  /* Each worker's spans: at least one of 32 KiB per class, ~70 classes:
   * 4 x ~2 MiB of free blocks if they stayed in use. */
  /* Each worker used ~70 classes, a span of 32 KiB or more each: ~18 MiB of
   * empty spans if they stayed with the abandoned heaps. */
  CHECKF(st.unused_empty_spans + st.unused_in_spans < 1024 * 1024,
         "%llu KiB of empty spans and %llu KiB of free blocks in spans still held after %d threads exited "
         "and hz_collect(1)",
         (unsigned long long)st.unused_empty_spans / 1024, (unsigned long long)st.unused_in_spans / 1024, THREADS);
  return 0;
}
