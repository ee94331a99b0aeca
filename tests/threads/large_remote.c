// SPDX-License-Identifier: MIT
/* tests/threads/large_remote.c: large blocks freed by a thread other than
 * the one that made them (heap.c, hz_heap_free_large_remote).
 *
 * 1. A thread that makes large blocks itself takes another thread's large
 *    block it frees into its own span cache: its next malloc of that size
 *    returns the same address. Before, the block went to its maker's inbox
 *    and waited there, cold, while the freeing thread took other memory: 8
 *    goroutines of a Go program passing 32-70 KB blocks through a channel
 *    (the OS threads that run them take turns) peaked at 270-350 MB of RSS
 *    against 80-100 MB now (docs/perf.md §76). (Not in the checked build,
 *    whose freed large spans wait in a quarantine first.)
 * 2. A thread that has made no large block (a consumer) sends them back to
 *    their maker, whose next malloc of the size gets it back: a consumer
 *    that kept them would fill its cache with memory it never uses while
 *    its producer took new spans (prodcons with 32-70 KB blocks ran at
 *    0.6 of the speed when every such free was kept).
 * 3. Threads that each make large blocks of random sizes, and blocks of
 *    1-32 KiB that a freeing thread may keep on its stash (src/stash.c,
 *    hz_stash_adopt), and pass them
 *    through a shared ring, every block filled with a pattern from its
 *    address and checked before it is freed, HZ_STRESS_SECONDS (2 s); then
 *    the statistics: as many large frees as mallocs, no more large bytes
 *    live than before.
 *
 * The purge delay is -1, so that no cached span goes back to the pool by
 * age between a free and the malloc after it. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define SIZE 40000   /* a span of 2 slices */
#define OTHER 100000 /* 4 slices: not a span SIZE would take */

static void *handed, *got_back;

static void *maker_frees(void *arg) {
  (void)arg;
  char *own = malloc(OTHER); /* this thread makes large blocks too */
  CHECK(own != NULL);
  free(handed);
  got_back = malloc(SIZE);
  CHECK(got_back != NULL);
  free(own);
  return NULL;
}

static void *consumer_frees(void *arg) {
  (void)arg;
  free(handed);
  got_back = malloc(SIZE); /* its first large malloc: not the block it sent back */
  CHECK(got_back != NULL);
  return NULL;
}

static void run(void *(*fn)(void *)) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fn, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
}

static void policy(void) {
  bool checked = strcmp(hz_target(), "hakozuna-checked") == 0;
  handed = malloc(SIZE);
  CHECK(handed != NULL);
  memset(handed, 1, SIZE);
  run(maker_frees);
  if (!checked)
    CHECKF(got_back == handed, "a thread that makes large blocks freed another's at %p; its next malloc gave %p",
           handed, got_back);
  free(got_back); /* (a remote free again: main made none of its own yet) */

  char *mine = malloc(OTHER); /* main makes large blocks: what comes back is kept */
  handed = malloc(SIZE);
  CHECK(mine != NULL && handed != NULL);
  memset(handed, 2, SIZE);
  void *sent = handed;
  run(consumer_frees);
  CHECKF(got_back != sent, "a thread that never made a large block kept the one it freed (%p)", sent);
  void *again = malloc(SIZE); /* the consumer's exit sent it: main drains its inbox first */
  if (!checked)
    CHECKF(again == sent, "the block a consumer freed (%p) did not come back to its maker (%p)", sent, again);
  free(again);
  free(got_back);
  free(mine);
}

/* ---- 3: the stress ---- */
enum { THREADS = 4, RING = 64 };
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint64_t *p;
  size_t n;
} ring[RING];
static double deadline;
static _Atomic long bad, passed_on;

static void fill(uint64_t *p, size_t n) {
  for (size_t i = 0; i + 1 < n / 8; i += 61) p[i] = (uint64_t)(uintptr_t)p * 31 + i;
  p[n / 8 - 1] = ~(uint64_t)(uintptr_t)p;
}
static bool intact(const uint64_t *p, size_t n) {
  for (size_t i = 0; i + 1 < n / 8; i += 61)
    if (p[i] != (uint64_t)(uintptr_t)p * 31 + i) return false;
  return p[n / 8 - 1] == ~(uint64_t)(uintptr_t)p;
}

static void *stress_thread(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
  while (tu_now() < deadline) {
    for (int k = 0; k < 64; k++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      size_t n = 32769 + (size_t)(seed >> 33) % 300000;
      uint32_t kind = (uint32_t)(seed >> 20) % 8;
      if (kind == 0) n = 16 + (size_t)(seed >> 40) % 2000; /* some small ones between */
      if (kind == 1 || kind == 2) n = 1000 + (size_t)(seed >> 40) % 31000; /* stashed ones (hz_stash_adopt) */
      uint64_t *p = malloc(n);
      if (p == NULL) {
        bad++;
        continue;
      }
      fill(p, n);
      uint32_t slot = (uint32_t)(seed >> 45) % RING;
      pthread_mutex_lock(&ring_lock);
      uint64_t *q = ring[slot].p;
      size_t qn = ring[slot].n;
      ring[slot].p = p;
      ring[slot].n = n;
      pthread_mutex_unlock(&ring_lock);
      if (q == NULL) continue;
      if (!intact(q, qn)) bad++;
      passed_on++;
      free(q);
    }
  }
  return NULL;
}

static void stress(void) {
  /* (a baseline: a sanitizer's runtime may hold a large block of its own) */
  hz_stats_t st0;
  CHECK(tu_stats(&st0) == 0);
  double secs = tu_env_double("HZ_STRESS_SECONDS", 2);
  deadline = tu_now() + secs;
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, stress_thread, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (int i = 0; i < RING; i++) {
    if (ring[i].p == NULL) continue;
    CHECK(intact(ring[i].p, ring[i].n));
    free(ring[i].p);
    ring[i].p = NULL;
  }
  CHECKF(bad == 0, "%ld blocks failed or changed while another thread held them", (long)bad);
  CHECKF(passed_on > 1000, "only %ld blocks passed between threads", (long)passed_on);
  hz_stats_t st;
  CHECK(tu_stats(&st) == 0);
  uint64_t mallocs = st.large_allocs - st0.large_allocs, frees = st.large_frees - st0.large_frees;
  CHECKF(mallocs == frees, "%llu large mallocs, %llu large frees, with every block freed",
         (unsigned long long)mallocs, (unsigned long long)frees);
  CHECKF(st.large_live_bytes == st0.large_live_bytes, "%llu large bytes live with every block freed, %llu before",
         (unsigned long long)st.large_live_bytes, (unsigned long long)st0.large_live_bytes);
  printf("%ld blocks passed between threads in %.1f s; %llu large mallocs\n", (long)passed_on, secs,
         (unsigned long long)st.large_allocs);
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, -1) == 0);
  policy();
  stress();
  return 0;
}
