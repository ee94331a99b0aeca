// SPDX-License-Identifier: MIT
/* tests/threads/join.c: joining many threads that have allocated must not
 * hang. 200 threads each allocate and free a few blocks and end (the
 * allocator then has memory waiting to be returned: their heaps' spare
 * spans); main joins them. glibc frees a joined thread's TLS vector while
 * it holds the lock that pthread_create takes (its stack cache), and that
 * free used to start hakozuna's purge thread with pthread_create: the join
 * deadlocked, every time. A hang shows as the runner's timeout (the
 * deadlocked thread has its signals blocked: SIGKILL ends it). */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>

enum { THREADS = 200, BLOCKS = 10 };

static pthread_barrier_t all_made;

static void *worker(void *arg) {
  uint64_t rng = (uintptr_t)arg * 7919 + 1;
  void *p[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    size_t n = 16 + (size_t)(tu_rand(&rng) % 4081);
    p[i] = malloc(n);
    if (!CHECK(p[i] != NULL)) return NULL;
    memset(p[i], 1, n);
  }
  pthread_barrier_wait(&all_made); /* all alive at once: glibc's stack cache overflows at the joins */
  for (int i = BLOCKS; i-- > 0;) free(p[i]);
  return NULL;
}

TEST_MAIN() {
  for (int round = 0; round < 3; round++) {
    pthread_t t[THREADS];
    CHECK(pthread_barrier_init(&all_made, NULL, THREADS + 1) == 0);
    for (long i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    pthread_barrier_wait(&all_made);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    pthread_barrier_destroy(&all_made);
  }
  return 0;
}
