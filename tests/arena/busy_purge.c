// SPDX-License-Identifier: MIT
/* tests/arena/busy_purge.c: memory freed after a peak goes back to the OS
 * while the program stays busy in the same segments: a free slice that no
 * span took for a whole purge delay goes back. The pools returned a
 * segment's free slices only once it had seen no free for a delay, and a
 * program that frees somewhere in every segment within each delay (two
 * threads passing blocks to each other do) kept what it freed after its
 * peak, for good while the purge thread ran (docs/perf.md §56; 25 MiB
 * of RSS after 10 s in this test). The test takes 48 MiB of 64 KiB blocks
 * and frees three quarters of them while it keeps freeing and replacing
 * the others all over the segments. The thread cache is off, so that
 * every free reaches the pool at once; a second thread makes the program
 * threaded, so the purge thread does the purging. RSS is read with
 * open/read. */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (64 * 1024)
#define BLOCKS 768 /* 48 MiB */

static void *live[BLOCKS];
static pthread_barrier_t done;

static void *bystander(void *arg) {
  (void)arg;
  pthread_barrier_wait(&done);
  return NULL;
}

static void *fill(void) {
  char *p = malloc(BLOCK);
  if (p != NULL) memset(p, 0x5a, BLOCK);
  return p;
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_THREAD_CACHE, 0) == 0);
  pthread_t t;
  pthread_barrier_init(&done, NULL, 2);
  if (!CHECK(pthread_create(&t, NULL, bystander, NULL) == 0)) return 1;
  for (int i = 0; i < BLOCKS; i++)
    if (!CHECK((live[i] = fill()) != NULL)) return 1;
  long peak = tu_rss_mib_quiet();
  /* what the process holds besides the blocks (under qemu-user, RSS counts
   * the emulator's memory too: 17 MiB more) */
  long other = peak > 48 ? peak - 48 : 0, bound = 12 + 6 + other;
  /* Every millisecond a live block picked at random is freed and replaced
   * (each segment sees a free every 13 ms or so, many a purge delay), and
   * until they are all gone one of the others is freed for good (so that
   * the purge thread runs by then, as in a program that frees as it goes):
   * 12 MiB stay live, spread over every segment. */
  long now = peak;
  int gone = 0;
  uint64_t rng = 42;
  double until = tu_now() + 10;
  for (int i = 0; tu_now() < until; i++) {
    if (gone == BLOCKS / 4 * 3 && i % 16 == 0 && (now = tu_rss_mib_quiet()) <= bound) break;
    int k = (int)(tu_rand(&rng) % (BLOCKS / 4)) * 4;
    CHECK(((unsigned char *)live[k])[BLOCK - 1] == 0x5a);
    free(live[k]);
    if (!CHECK((live[k] = fill()) != NULL)) return 1;
    if (gone < BLOCKS / 4 * 3) {
      int j = gone / 3 * 4 + gone % 3 + 1; /* the three after each kept one, in order */
      free(live[j]);
      live[j] = NULL;
      gone++;
    }
    struct timespec tick = {0, 1000 * 1000};
    nanosleep(&tick, NULL);
  }
  pthread_barrier_wait(&done);
  pthread_join(t, NULL);
  CHECKF(peak >= 48, "RSS %ld MiB with 48 MiB of blocks live", peak);
  CHECKF(now >= 0 && now <= bound,
         "RSS %ld MiB after 10 s of freeing and replacing blocks across the segments, with 12 MiB live (was %ld with "
         "48; at most %ld expected)",
         now, peak, bound);
  for (int i = 0; i < BLOCKS; i++) free(live[i]);
  return 0;
}
