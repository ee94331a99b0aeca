// SPDX-License-Identifier: MIT
/* tests/purge/idle_threaded.c: a worker thread allocates about 48 MiB in
 * blocks of 64 bytes to 32 KiB, frees them all and waits; nobody calls the
 * allocator after that. Within 5 s the resident set must come back to
 * within 12 MiB of where it started. Frees of small blocks may not start
 * the purge thread (purge.c), and nothing waited while the blocks were
 * allocated, so before docs/perf.md §61 the thread never ran: 19 MiB stayed
 * resident for good (what waits below the frees' own 16 MiB budget, plus
 * the worker's span cache). Now the worker's first safe points start it,
 * and it stays while owners are active and a second after. (Blocks of 32
 * KiB or less: a large block's free by its owner starts the thread.) RSS is
 * read with open/read, and the wait is a semaphore: main makes no allocator
 * call while it measures. Then exactly two thread caches must be live: the
 * worker's first malloc starts the purge thread, whose pthread_create
 * allocates and so set the worker's heap up, and the malloc then set up a
 * second one over it, leaking the first (3 before §61). */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>

#define N 3000

static void *v[N];
static sem_t freed, leave;

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < N; i++) {
    size_t n = 64 + (size_t)i * 7919 % 32704;
    v[i] = malloc(n);
    if (v[i] == NULL) abort();
    memset(v[i], 1, n);
  }
  for (int i = 0; i < N; i++) free(v[i]);
  sem_post(&freed);
  while (sem_wait(&leave) != 0) {
  }
  return NULL;
}

TEST_MAIN() {
  sem_init(&freed, 0, 0);
  sem_init(&leave, 0, 0);
  long start = tu_rss_mib_quiet();
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, worker, NULL) == 0)) return 1;
  while (sem_wait(&freed) != 0) {
  }
  long idle = -1;
  double give_up = tu_now() + 5;
  struct timespec tick = {0, 50 * 1000 * 1000};
  do {
    nanosleep(&tick, NULL);
    idle = tu_rss_mib_quiet();
  } while (idle - start > 12 && tu_now() < give_up);
  CHECKF(idle >= 0 && idle - start <= 12,
         "RSS %ld MiB above the start 5 s after a thread freed ~48 MiB and idled, with no allocator call", idle - start);
  struct timespec second = {1, 0};
  nanosleep(&second, NULL);
  printf("%ld MiB above the start when under 12, %ld a second later\n", idle - start, tu_rss_mib_quiet() - start);
  /* main's heap and the worker's, no leaked one */
  hz_stats_t st;
  if (CHECK(hz_stats_get(&st) == 0)) CHECKF(st.thread_count == 2, "%u thread caches live", st.thread_count);
  sem_post(&leave);
  CHECK(pthread_join(t, NULL) == 0);
  return 0;
}
