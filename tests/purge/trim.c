// SPDX-License-Identifier: MIT
/* tests/purge/trim.c: malloc_trim(0) from a thread that has never allocated,
 * while an exited thread's blocks, freed by main, wait in its abandoned
 * heap's inbox and no purge thread runs. Trimming returns the spans those
 * blocks empty, which wants the purge thread started; starting a thread
 * allocates its TLS in the trimming thread, whose first malloc sets up a
 * heap. hakozuna hung there when it started the purge thread with its heap
 * list locked (issue 10, case 1). Three rounds, each in a fresh child, which
 * an alarm ends if it hangs. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>

#define BLOCKS 1000
#define ROUNDS 3

static void *blocks[BLOCKS];

static void *maker(void *arg) {
  (void)arg;
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(24);
    if (CHECK(blocks[i])) tu_fill(blocks[i], 24, (uint64_t)i);
  }
  return NULL;
}

static void *trimmer(void *arg) {
  (void)arg;
  malloc_trim(0);
  return NULL;
}

static int round_main(void *arg) {
  (void)arg;
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, maker, NULL) == 0)) return 1;
  CHECK(pthread_join(t, NULL) == 0);
  /* A purge thread (if the maker's exit started one) ends once nothing
   * waits to be purged: wait for it, so that trimming must start one. */
  double give_up = tu_now() + 10;
  while (tu_threads() > 1 && tu_now() < give_up) usleep(1000);
  CHECKF(tu_threads() == 1, "%d threads after the maker exited", tu_threads());
  for (int i = 0; i < BLOCKS; i++) {
    CHECK(tu_verify(blocks[i], 24, (uint64_t)i) == 0);
    free(blocks[i]);
  }
  /* Allocating in sizes not used before sends the frees main still
   * batches (allocators that batch remote frees do it on such a refill). */
  for (size_t n = 1000; n < 20000; n += 1000) free(malloc(n));
  if (CHECK(pthread_create(&t, NULL, trimmer, NULL) == 0)) CHECK(pthread_join(t, NULL) == 0);
  /* and everything still works */
  void *p = malloc(100);
  CHECK(p != NULL);
  free(p);
  return check_failed() ? 1 : 0;
}

TEST_MAIN() {
  for (int r = 0; r < ROUNDS && !check_failed(); r++) {
    char why[80];
    int st = tu_child(round_main, NULL, 20, why, sizeof why);
    CHECKF(st == 0, "round %d: %s", r, why);
  }
  return 0;
}
