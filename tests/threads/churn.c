// SPDX-License-Identifier: MIT
/* tests/threads/churn.c: thousands of short-lived threads. Each allocates and
 * frees in several size ranges and leaves two blocks alive, which the main
 * thread checks and frees after the thread has exited. Memory that the
 * allocator keeps per thread must come back when threads exit: resident
 * memory may not grow by more than 64 MiB over 5,000 threads (HZ_CHURN_THREADS),
 * nor may the memory hakozuna holds from the OS (hz_stats_get, when the
 * allocator is hakozuna). Under an emulator (HZ_TEST_EMULATED=1) resident
 * memory is the emulator's, which grows by ~300 KiB a thread on glibc too,
 * so there only hakozuna's own figure is checked. */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#ifndef _WIN32
#include <dlfcn.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define THREADS 5000
#define BATCH 8
#define WARMUP 200
#define LEFT 2

static void *left[THREADS][LEFT];

static size_t left_size(int t, int k) { return k ? 8 * KiB + (size_t)t % 100 : 64; }

static void *thread_main(void *arg) {
  int t = (int)(intptr_t)arg;
  void *b[48];
  for (int i = 0; i < 48; i++) {
    size_t n = i < 32 ? (size_t)(i * 16 + t % 16) : (size_t)(i - 31) * 2000;
    if (i == 47 && t % 10 == 0) n = 300 * KiB;
    b[i] = i % 4 == 0 ? calloc(1, n) : malloc(n);
    if (!CHECKF(b[i], "thread %d: alloc(%zu) failed", t, n)) continue;
    if (i % 4 == 0) CHECK(tu_nonzero(b[i], n) == 0);
    memset(b[i], t, n);
  }
  b[5] = realloc(b[5], 4000);
  CHECK(b[5] != NULL);
  for (int i = 0; i < 48; i++) free(b[i]);
  for (int k = 0; k < LEFT; k++) {
    left[t][k] = malloc(left_size(t, k));
    if (CHECK(left[t][k])) tu_fill(left[t][k], left_size(t, k), t);
  }
  return NULL;
}

static void free_left(int t) {
  for (int k = 0; k < LEFT; k++) {
    if (!left[t][k]) continue;
    CHECKF(tu_verify(left[t][k], left_size(t, k), t) == 0,
           "block left by thread %d changed", t);
    free(left[t][k]);
    left[t][k] = NULL;
  }
}

/* Bytes hakozuna holds from the OS, or -1 when malloc is not hakozuna's. */
static long hz_committed(void) {
#ifdef _WIN32
  int (*get)(hz_stats_t *) = hz_stats_get; /* linked */
#else
  int (*get)(hz_stats_t *) = (int (*)(hz_stats_t *))dlsym(RTLD_DEFAULT, "hz_stats_get");
#endif
  if (get == NULL) return -1;
  hz_stats_t st;
  memset(&st, 0, sizeof st);
  st.version = HZ_STATS_VERSION;
  st.size = sizeof st;
  return CHECK(get(&st) == 0) ? (long)st.bytes_committed : -1;
}

TEST_MAIN() {
  long rss0 = 0, hz0 = 0;
  int threads = (int)tu_env_double("HZ_CHURN_THREADS", THREADS);
  if (threads > THREADS || threads < WARMUP + 2 * BATCH) threads = THREADS;
  threads -= threads % BATCH;
  pthread_t th[BATCH];
  for (int t0 = 0; t0 < threads; t0 += BATCH) {
    if (t0 == WARMUP) {
      rss0 = tu_rss();
      hz0 = hz_committed();
    }
    for (int i = 0; i < BATCH; i++)
      CHECK(pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)(t0 + i)) == 0);
    /* Free what the previous batch left while this one runs. */
    if (t0 >= BATCH)
      for (int i = 0; i < BATCH; i++) free_left(t0 - BATCH + i);
    for (int i = 0; i < BATCH; i++) CHECK(pthread_join(th[i], NULL) == 0);
    if (check_failed()) return 1;
  }
  for (int t = threads - BATCH; t < threads; t++) free_left(t);
  long rss1 = tu_rss(), hz1 = hz_committed();
  CHECK(rss0 > 0 && rss1 > 0);
  if (tu_env_double("HZ_TEST_EMULATED", 0) == 0)
    CHECKF(rss1 - rss0 < (long)(64 * MiB), "RSS grew from %ld KiB to %ld KiB "
           "over %d threads", rss0 / 1024, rss1 / 1024, threads - WARMUP);
  if (hz0 >= 0)
    CHECKF(hz1 - hz0 < (long)(64 * MiB), "hakozuna's committed memory grew "
           "from %ld KiB to %ld KiB over %d threads", hz0 / 1024, hz1 / 1024,
           threads - WARMUP);
  printf("RSS after %d threads: %ld KiB, after %d: %ld KiB\n", WARMUP,
         rss0 / 1024, threads, rss1 / 1024);
  if (hz0 >= 0)
    printf("hakozuna committed after %d threads: %ld KiB, after %d: %ld KiB\n",
           WARMUP, hz0 / 1024, threads, hz1 / 1024);
  return 0;
}
