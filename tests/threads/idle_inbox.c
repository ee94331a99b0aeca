// SPDX-License-Identifier: MIT
/* tests/threads/idle_inbox.c: blocks freed by another thread go back to the
 * OS while their owner idles. Main allocates about 144 MB (20,000-byte,
 * 1,000-byte and 100 KB blocks); a second thread frees all of them but the
 * first 1,000 small ones, the even small ones and every 8th of the last
 * 2,000 20,000-byte ones, and exits; main frees the even small ones
 * itself, keeps the others, then makes no allocator call. The remote frees
 * wait in main's inbox, which only main's own next slow path used to take:
 * they stayed resident however long main idled (144 MiB here). Now the
 * purge thread returns the blocks of spans that hold no other block out,
 * and the pages inside the others but their first (remote.c,
 * hz_remote_trim): within 10 s RSS must fall to under 28 MiB above the
 * program's start (18 here; with the first alone 42, the last 2,000
 * blocks' pages staying). Then everything is
 * allocated again and checked: the live blocks intact, no block handed out
 * twice or overlapping another.
 *
 * Then the race (HZ_STRESS_SECONDS, 2 s by default, at a 2 ms purge delay):
 * each round main hands a random half of its blocks (176, 1,000 and 20,000
 * bytes) to a second thread that frees them, and while that thread frees
 * and for a random while after, main frees more of its own blocks, paced by
 * spins without an allocator call (frees are not activity: the trim runs
 * meanwhile); then it refills every slot and checks every live block: a
 * block returned to its span while main could still free into the span, or
 * handed out twice, shows as a block whose content changed. RSS is read with open/read (stdio allocates). */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "hakozuna.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NMED 3000    /* 20,000 bytes: 60 MB */
#define NSMALL 40000 /* 1,000 bytes: 40 MB */
#define NLIVE 1000   /* small blocks main keeps */
#define NLARGE 40    /* 100 KB: 4 MB */
#define NPART 2000   /* 20,000 bytes, every 8th kept by main: 40 MB */
#define PART (NMED + NSMALL + NLARGE)
#define N (PART + NPART)

static char *v[N];
static size_t len[N];
static uint64_t seed[N];

static bool live(int i) { return (i >= NMED && i < NMED + NLIVE) || (i >= PART && (i - PART) % 8 == 0); }
static bool remote(int i) {
  return !live(i) && (i < NMED || i >= NMED + NSMALL || (i - NMED) % 2 == 1);
}

static void *freer(void *arg) {
  (void)arg;
  for (int i = 0; i < N; i++)
    if (remote(i)) free(v[i]);
  return NULL;
}

/* ---- the race ---- */
enum { RSLOTS = 3000 };
static char *rs[RSLOTS], *handoff[RSLOTS];
static size_t rlen[RSLOTS];
static uint64_t rseed[RSLOTS];
static atomic_int go, done, handoff_n;

static void *consumer(void *arg) {
  (void)arg;
  for (int round = 1;; round++) {
    int g;
    while ((g = atomic_load_explicit(&go, memory_order_acquire)) < round && g >= 0) sched_yield();
    if (g < 0) return NULL;
    for (int i = 0, n = atomic_load(&handoff_n); i < n; i++) free(handoff[i]);
    atomic_store_explicit(&done, round, memory_order_release);
  }
}

static void spin(double us) {
  double until = tu_now() + us * 1e-6;
  while (tu_now() < until) {
  }
}

static void race(void) {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 2) == 0);
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, consumer, NULL) == 0)) return;
  uint64_t rng = 777;
  double stop = tu_now() + tu_env_double("HZ_STRESS_SECONDS", 2.0);
  int round = 1;
  for (; round < 4 || (tu_now() < stop && !check_failed()); round++) {
    for (int i = 0; i < RSLOTS; i++) {
      if (rs[i] != NULL) {
        if (tu_verify(rs[i], rlen[i], rseed[i]) != 0) {
          CHECKF(0, "round %d: a live %zu-byte block changed", round, rlen[i]);
          return;
        }
        continue;
      }
      uint64_t r = tu_rand(&rng);
      rlen[i] = r % 8 == 0 ? 20000 : r % 8 < 4 ? 1000 : 176;
      if (!CHECK(rs[i] = malloc(rlen[i]))) return;
      rseed[i] = tu_rand(&rng);
      tu_fill(rs[i], rlen[i], rseed[i]);
    }
    int n = 0;
    for (int i = 0; i < RSLOTS; i++)
      if (tu_rand(&rng) % 2) {
        handoff[n++] = rs[i];
        rs[i] = NULL;
      }
    atomic_store(&handoff_n, n);
    atomic_store_explicit(&go, round, memory_order_release);
    /* No allocator call but frees until the refill. */
    double idle_until = tu_now() + (double)(tu_rand(&rng) % 8000) * 1e-6;
    while (atomic_load_explicit(&done, memory_order_acquire) < round || tu_now() < idle_until) {
      int i = (int)(tu_rand(&rng) % RSLOTS);
      if (rs[i] != NULL && tu_rand(&rng) % 4 == 0) {
        free(rs[i]);
        rs[i] = NULL;
      }
      spin((double)(tu_rand(&rng) % 100));
    }
  }
  atomic_store_explicit(&go, -1, memory_order_release);
  CHECK(pthread_join(t, NULL) == 0);
  for (int i = 0; i < RSLOTS; i++)
    if (rs[i] != NULL) {
      CHECK(tu_verify(rs[i], rlen[i], rseed[i]) == 0);
      free(rs[i]);
    }
  printf("race: %d rounds\n", round - 1);
}

TEST_MAIN() {
  long start = tu_rss_mib_quiet(); /* (under qemu-user, the emulator's own memory is counted too) */
  for (int i = 0; i < N; i++) {
    len[i] = i < NMED || i >= PART ? 20000 : i < NMED + NSMALL ? 1000 : 100000;
    v[i] = malloc(len[i]);
    if (!CHECK(v[i])) return 1;
    tu_fill(v[i], len[i], (uint64_t)i);
  }
  long full = tu_rss_mib_quiet();
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, freer, NULL) == 0) || !CHECK(pthread_join(t, NULL) == 0)) return 1;
  for (int i = 0; i < N; i++)
    if (!live(i) && !remote(i)) free(v[i]);

  /* No allocator call from here until the memory is back. */
  double give_up = tu_now() + 10;
  long now;
  while ((now = tu_rss_mib_quiet()) - start >= 28 && tu_now() < give_up) usleep(10000);
  CHECKF(full - start >= 140, "RSS %ld MiB above the start with 144 MB of blocks live", full - start);
  CHECKF(now >= 0 && now - start < 28, "RSS %ld MiB above the start after 10 s idle with 6 MB live (was %ld)",
         now - start, full - start);
  printf("RSS above the start: %ld MiB with the blocks, %ld MiB idle\n", full - start, now - start);

  for (int i = 0; i < N; i++)
    if (live(i)) CHECK(tu_verify(v[i], len[i], (uint64_t)i) == 0);
  /* Everything again: the blocks filled after all mallocs are done must all
   * read back (a block handed out twice, or overlapping another, does not). */
  for (int i = 0; i < N; i++) {
    seed[i] = (uint64_t)i;
    if (live(i)) continue;
    if (!CHECK(v[i] = malloc(len[i]))) return 1;
    seed[i] += N;
  }
  for (int i = 0; i < N; i++)
    if (seed[i] >= N) tu_fill(v[i], len[i], seed[i]);
  size_t bad = 0;
  for (int i = 0; i < N; i++) bad += tu_verify(v[i], len[i], seed[i]) != 0;
  CHECKF(bad == 0, "%zu of %d blocks lost their content to another block", bad, N);
  for (int i = 0; i < N; i++) free(v[i]);
  race();
  return 0;
}
