// SPDX-License-Identifier: MIT
/* tests/threads/tiny_remote.c: a thread frees another's tiny blocks while
 * that one goes on allocating and freeing its own, as redis's background
 * thread frees a deleted set's 6-byte members. No misuse anywhere, so
 * nothing may be reported. The checked build's free looks at the 8 bytes
 * before a block for an underflow; in a 16-byte block those are the free
 * list's tag, which the owner rewrites in two stores, and a free from the
 * other thread that read them in between reported a buffer underflow
 * (redis-server aborted; this test, 0.4-2 s, in most runs). Blocks of 1 to
 * 8 bytes, handed over through a ring; HZ_TINY_SECONDS (default 2). */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RING = 4096, KEEP = 64 };
static void *ring[RING];
static long head, tail; /* written by one side each, read by the other (atomics) */
static int done;

static void *freer(void *arg) {
  (void)arg;
  for (long t = 0;; t++) {
    for (unsigned spins = 0; t == __atomic_load_n(&head, __ATOMIC_ACQUIRE); spins++) {
      if (__atomic_load_n(&done, __ATOMIC_ACQUIRE) && t == __atomic_load_n(&head, __ATOMIC_ACQUIRE)) return NULL;
      if (spins % 1024 == 1023) sched_yield(); /* (close on the owner's heels: the race was there) */
    }
    char *p = ring[t % RING];
    CHECKF(p[0] == (char)('a' + t % 8), "block %p changed before its free", (void *)p);
    free(p);
    __atomic_store_n(&tail, t + 1, __ATOMIC_RELEASE);
  }
}

TEST_MAIN() {
  double seconds = tu_env_double("HZ_TINY_SECONDS", 2.0);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, freer, NULL) == 0);
  void *mine[KEEP] = {0};
  double end = tu_now() + seconds;
  long sent = 0, rounds = 0;
  for (; (rounds % 4096 || tu_now() < end) && !check_failed(); rounds++) {
    size_t n = 1 + (size_t)rounds % 8;
    char *p = malloc(n);
    if (!CHECK(p != NULL)) break;
    memset(p, 'a' + (int)(sent % 8), n);
    if (rounds & 1) { /* ours: kept a while, freed here */
      free(mine[(rounds >> 1) % KEEP]);
      mine[(rounds >> 1) % KEEP] = p;
      continue;
    }
    while (sent - __atomic_load_n(&tail, __ATOMIC_ACQUIRE) >= RING - 1) sched_yield();
    ring[sent % RING] = p;
    __atomic_store_n(&head, ++sent, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  CHECK(pthread_join(th, NULL) == 0);
  for (int k = 0; k < KEEP; k++) free(mine[k]);
  printf("%ld mallocs, %ld freed by the other thread\n", rounds, sent);
  return 0;
}
