// SPDX-License-Identifier: MIT
/* tests/trim/race.c: the purge thread's idle trim takes free blocks off
 * a thread's span lists and returns their pages while that thread goes on
 * freeing onto the same lists (src/trim.c, hz_trim_span_pages): frees do not
 * count as activity, so a thread that only frees is trimmed meanwhile.
 *
 * Each round the thread fills every slot (176-byte blocks, 40 spans of them,
 * each block written whole), then frees all but the blocks that start in
 * one page of each span, in random order, paced by short spins that make no
 * allocator call; four spans go whole, in a row, which takes the slow path
 * after which the still idle heap is trimmed again. The purge delay is 2 ms
 * and another thread keeps the purge thread running (every millisecond it
 * frees a 64 KiB block, which the purge thread has to return). Then:
 * - the pages that hold no live block go back (mincore), bar one a span
 *   (the list head's) and those of the current span (never trimmed), within
 *   3 s of idling, in at least half the rounds, or the trim did not run (on
 *   a quiet machine they do in every round, within milliseconds);
 * - every live block still holds what was written (a returned page that held
 *   one reads back as zero);
 * - refilling the freed slots hands out no block twice (a block left on a
 *   list whose page went back would be handed out by its list and again
 *   when the refill puts the page's blocks back).
 * Linked with hakozuna (hz_option_set); 4 KiB pages. */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <time.h>

enum { SIZE = 170, BLOCK = 176, SLOTS = 40 * 186, ROUNDS = 40, SPAN = 32768, PAGE = 4096 };
static char *slot[SLOTS], *sorted[SLOTS];
static uint64_t seed_of[SLOTS];
static size_t order[SLOTS];
static atomic_int done;

static void *kicker(void *arg) {
  (void)arg;
  struct timespec ms = {0, 1000000};
  while (!atomic_load(&done)) {
    free(malloc(65536));
    nanosleep(&ms, NULL);
  }
  return NULL;
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (char *const *)a, y = (uintptr_t) * (char *const *)b;
  return x < y ? -1 : x > y;
}

/* Busy for about us microseconds, with no allocator call. */
static void spin(double us) {
  double until = tu_now() + us * 1e-6;
  while (tu_now() < until) {
  }
}

/* The page of its span whose blocks stay live this round. */
static unsigned live_page(uintptr_t span, int round) { return (unsigned)(tu_mix(span * 31 + (uint64_t)round) % 8); }

static bool stays(const char *p, int round) {
  uintptr_t a = (uintptr_t)p;
  return (a % SPAN) / PAGE == live_page(a / SPAN, round);
}

/* Resident pages that hold no live block (not the live page, nor the next,
 * into which its last block may reach), and the spans counted. */
static size_t resident_free_pages(int round, size_t *spans) {
  size_t n = 0;
  *spans = 0;
  for (size_t i = 0; i < SLOTS; i++) {
    if (sorted[i] == NULL || (i > 0 && (uintptr_t)sorted[i] / SPAN == (uintptr_t)sorted[i - 1] / SPAN)) continue;
    uintptr_t span = (uintptr_t)sorted[i] / SPAN;
    unsigned lp = live_page(span, round);
    unsigned char v[SPAN / PAGE];
    if (mincore((void *)(span * SPAN), SPAN, v) != 0) continue;
    (*spans)++;
    for (unsigned q = 0; q < SPAN / PAGE; q++) n += q != lp && q != lp + 1 && (v[q] & 1);
  }
  return n;
}

TEST_MAIN() {
  if (tu_page_size() != PAGE) {
    printf("SKIP: the geometry assumed here needs 4 KiB pages (have %zu)\n", tu_page_size());
    return 77;
  }
  uint64_t rng = 12345;
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 2) == 0);
  pthread_t kick;
  if (!CHECK(pthread_create(&kick, NULL, kicker, NULL) == 0)) return 1;
  double stop = tu_now() + tu_env_double("HZ_STRESS_SECONDS", 2.0);
  int rounds = 0, trimmed = 0;
  size_t freed = 0;
  for (; rounds < ROUNDS && (rounds < 4 || tu_now() < stop) && !check_failed(); rounds++) {
    for (size_t i = 0; i < SLOTS; i++) {
      if (slot[i] != NULL) continue;
      slot[i] = malloc(SIZE);
      if (!CHECK(slot[i] != NULL)) return 1;
      seed_of[i] = tu_rand(&rng);
      tu_fill(slot[i], SIZE, seed_of[i]);
    }
    uintptr_t whole[4];
    for (int w = 0; w < 4; w++) whole[w] = (uintptr_t)slot[tu_rand(&rng) % SLOTS] / SPAN;
    size_t n = 0;
    for (size_t i = 0; i < SLOTS; i++) {
      bool in_whole = false;
      for (int w = 0; w < 4; w++) in_whole |= (uintptr_t)slot[i] / SPAN == whole[w];
      if (!in_whole && !stays(slot[i], rounds)) order[n++] = i;
    }
    for (size_t i = n - 1; i > 0; i--) {
      size_t j = (size_t)(tu_rand(&rng) % (i + 1)), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (size_t k = 0; k <= n; k++) {
      for (int w = 0; w < 4; w++)
        if (k == n * (size_t)(w + 1) / 5)
          for (size_t i = 0; i < SLOTS; i++)
            if (slot[i] != NULL && (uintptr_t)slot[i] / SPAN == whole[w]) {
              free(slot[i]);
              slot[i] = NULL;
              freed++;
            }
      if (k == n) break;
      free(slot[order[k]]);
      slot[order[k]] = NULL;
      freed++;
      if (k % 16 == 0) spin((double)(tu_rand(&rng) % 200));
    }
    /* Idle until the free pages are back (3 s at most). */
    size_t m = 0;
    for (size_t i = 0; i < SLOTS; i++)
      if (slot[i] != NULL) sorted[m++] = slot[i];
    for (size_t i = m; i < SLOTS; i++) sorted[i] = NULL;
    qsort(sorted, m, sizeof *sorted, by_address);
    size_t spans = 0, left = 0;
    for (double give_up = tu_now() + 3; tu_now() < give_up; spin(500))
      if ((left = resident_free_pages(rounds, &spans)) <= spans + SPAN / PAGE) break;
    trimmed += left <= spans + SPAN / PAGE;
    for (size_t i = 0; i < SLOTS; i++)
      if (slot[i] != NULL && tu_verify(slot[i], SIZE, seed_of[i]) != 0) {
        CHECKF(0, "round %d: a live block (%p) changed while its thread freed others", rounds, (void *)slot[i]);
        break;
      }
    for (size_t i = 0; i < SLOTS; i++) {
      if (slot[i] == NULL) {
        slot[i] = malloc(SIZE);
        if (!CHECK(slot[i] != NULL)) return 1;
        seed_of[i] = tu_rand(&rng);
        tu_fill(slot[i], SIZE, seed_of[i]);
      }
      sorted[i] = slot[i];
    }
    qsort(sorted, SLOTS, sizeof *sorted, by_address);
    for (size_t i = 1; i < SLOTS; i++)
      if (sorted[i] == sorted[i - 1]) {
        CHECKF(0, "round %d: block %p handed out twice", rounds, (void *)sorted[i]);
        break;
      }
    for (size_t i = 0; i < SLOTS; i++)
      if (tu_verify(slot[i], SIZE, seed_of[i]) != 0) {
        CHECKF(0, "round %d: block %p overwritten (handed out twice?)", rounds, (void *)slot[i]);
        break;
      }
  }
  atomic_store(&done, 1);
  pthread_join(kick, NULL);
  printf("%d rounds, %zu frees; free pages back in %d rounds\n", rounds, freed, trimmed);
  CHECKF(trimmed * 2 >= rounds, "the free pages went back in %d of %d rounds: the trim did not run", trimmed, rounds);
  for (size_t i = 0; i < SLOTS; i++) free(slot[i]);
  return check_failed() ? 1 : 0;
}
