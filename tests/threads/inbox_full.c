// SPDX-License-Identifier: MIT
/* tests/threads/inbox_full.c: the owner frees its last block of a full span
 * while the purge thread's idle trim takes the owner's inbox, which holds
 * all of that span's other blocks (src/remote.c, hz_remote_trim).
 *
 * Each round main fills 25,600 1,000-byte blocks (its spans fill and leave
 * their lists); another thread frees all but every 64th, so most spans have
 * all their blocks but one waiting in main's inbox, and flushes its batches
 * (hz_collect); main makes mallocs meanwhile, then no malloc and frees the kept blocks one by
 * one, paced by spins (frees are not activity: at a 1 ms purge delay the
 * trim runs meanwhile). Each such free relists a full span: the free fast
 * path pushes the block, then its slow path waits for the trim to end. The
 * trim used to count the span's blocks as all in the inbox and retire it;
 * the waiting slow path then put the retired span back on its class list
 * while it sat in the span cache, whose list became a circle: the purge
 * thread looped for ever and main waited for it, or a block went out twice
 * (on that code: a crash or a hang in 6 of 6 runs). Every round checks the kept blocks' content before they are freed
 * (a block handed out twice shows); HZ_STRESS_SECONDS, 3 s by default.
 * Linked with hakozuna (hz_option_set, hz_collect). */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

enum { BLOCKS = 64 * 400, KEEP = 64, SIZE = 1000 };
static char *v[BLOCKS];
static atomic_int go, done;

static void *freer(void *arg) {
  (void)arg;
  for (int round = 1;; round++) {
    int g;
    while ((g = atomic_load_explicit(&go, memory_order_acquire)) < round && g >= 0) sched_yield();
    if (g < 0) return NULL;
    for (int i = 0; i < BLOCKS; i++)
      if (i % KEEP) free(v[i]);
    hz_collect(0); /* sends the last, partial batches */
    atomic_store_explicit(&done, round, memory_order_release);
  }
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 1) == 0);
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, freer, NULL) == 0)) return 1;
  uint64_t rng = 12345;
  double stop = tu_now() + tu_env_double("HZ_STRESS_SECONDS", 3.0);
  int round = 1;
  for (; round <= 3 || (tu_now() < stop && !check_failed()); round++) {
    for (int i = 0; i < BLOCKS; i++) {
      if (!CHECK(v[i] = malloc(SIZE))) return 1;
      tu_fill(v[i], SIZE, (uint64_t)round * BLOCKS + (uint64_t)i);
    }
    atomic_store_explicit(&go, round, memory_order_release);
    /* (mallocs meanwhile: main is active, so the trim takes the inbox whole,
     * once main frees) */
    while (atomic_load_explicit(&done, memory_order_acquire) < round) free(tu_opaque_ptr(malloc(16)));
    for (int i = 0; i < BLOCKS; i += KEEP) {
      double until = tu_now() + (double)(tu_rand(&rng) % 30) * 1e-6;
      while (tu_now() < until) {
      }
      CHECKF(tu_verify(v[i], SIZE, (uint64_t)round * BLOCKS + (uint64_t)i) == 0,
             "round %d: a kept block changed", round);
      free(v[i]);
    }
  }
  atomic_store_explicit(&go, -1, memory_order_release);
  CHECK(pthread_join(t, NULL) == 0);
  printf("%d rounds\n", round - 1);
  return 0;
}
