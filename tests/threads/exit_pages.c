// SPDX-License-Identifier: MIT
/* tests/threads/exit_pages.c: a thread that exits gives back the pages of
 * the blocks over a page it freed next to blocks still live, and a thread
 * that takes its heap over and exits does not purge them again.
 *
 * 1. A thread allocates and writes 1,024 blocks of 32 KiB, frees all but
 *    every 8th (main frees those at the end) and exits: within 5 s the
 *    resident set must be within 12 MiB of where it started (4 MiB stay
 *    live, and each free block's first page).
 * 2. 100 threads one after another, each taking over that heap, allocate,
 *    write and free one block of 32 KiB and exit. At most 5 madvise calls a
 *    thread: purging every free block of the heap again at every exit (the
 *    head of each of its ~128 partly used spans' lists at least) made a
 *    program running a thread per task spend 4x glibc's system time, 107
 *    madvise calls a thread (docs/perf.md §81).
 * 3. A thread allocates 896 blocks of 32 KiB (the free ones first, purged
 *    in 1), writes them whole and frees them all: within 5 s the resident
 *    set must again be within 12 MiB of the start. A block handed out and
 *    written since its pages went back is purged again.
 * 4. Those pages wait a purge delay after the exit (here 10 s): a thread
 *    that takes the heap over at once and writes 896 blocks of 32 KiB
 *    (7 of every 8 freed ones) faults in fewer than 896 pages (38). Purged
 *    at the exit, they faulted in again: 2,653 pages (a program running a
 *    thread per task: docs/perf.md §90). */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <pthread.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>

#define BLOCK (32 * KiB)
#define BLOCKS 1024
#define THREADS 100

static void *kept[BLOCKS / 8];
static size_t kept_n;

typedef struct {
  size_t blocks, keep_every; /* keep_every 0: free them all */
} job_t;

static long faults_here(void) {
  struct rusage u;
  return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_minflt : -1;
}

static long reuse_faults = -1;
static void *reuser(void *arg) {
  (void)arg;
  long before = faults_here();
  void **v = malloc((BLOCKS - BLOCKS / 8) * sizeof *v);
  for (size_t i = 0; v != NULL && i < BLOCKS - BLOCKS / 8; i++) {
    if ((v[i] = malloc(BLOCK)) == NULL) return (void *)1;
    memset(v[i], 2, BLOCK);
  }
  reuse_faults = faults_here() - before;
  for (size_t i = 0; v != NULL && i < BLOCKS - BLOCKS / 8; i++) free(v[i]);
  free(v);
  return v == NULL ? (void *)1 : NULL;
}

static void *worker(void *arg) {
  const job_t *job = arg;
  size_t n = job->blocks;
  void **v = malloc(n * sizeof *v);
  if (v == NULL) return (void *)1;
  for (size_t i = 0; i < n; i++) {
    v[i] = malloc(BLOCK);
    if (v[i] == NULL) return (void *)1;
    memset(v[i], 1, BLOCK);
  }
  for (size_t i = 0; i < n; i++) {
    if (job->keep_every && i % job->keep_every == 0) kept[kept_n++] = v[i];
    else free(v[i]);
  }
  free(v);
  return NULL;
}

static int run_one(size_t blocks, size_t keep_every) {
  job_t job = {blocks, keep_every};
  pthread_t t;
  void *r = (void *)1;
  if (!CHECK(pthread_create(&t, NULL, worker, &job) == 0)) return 0;
  CHECK(pthread_join(t, &r) == 0);
  return CHECKF(r == NULL, "a worker's malloc failed");
}

/* main makes no allocator call while it waits */
static void rss_back(long start, const char *after) {
  long exited = tu_rss(), now = exited;
  double give_up = tu_now() + 5;
  struct timespec tick = {0, 20 * 1000 * 1000};
  while (now - start > 12 * (long)MiB && tu_now() < give_up) {
    nanosleep(&tick, NULL);
    now = tu_rss();
  }
  CHECKF(start > 0 && now - start <= 12 * (long)MiB,
         "resident set %ld MiB above the start 5 s after %s (%ld MiB when it had exited)", (now - start) / (long)MiB,
         after, (exited - start) / (long)MiB);
}

TEST_MAIN() {
  long start = tu_rss();
  if (!run_one(BLOCKS, 8)) return 1;
  rss_back(start, "a thread that freed 28 MiB in partly used spans exited");

  hz_stats_t before = {.size = sizeof before}, after = {.size = sizeof after};
  CHECK(hz_stats_get(&before) == 0);
  for (int i = 0; i < THREADS; i++)
    if (!run_one(1, 0)) return 1;
  CHECK(hz_stats_get(&after) == 0);
  uint64_t calls = after.madvise_calls - before.madvise_calls;
  CHECKF(calls <= 5 * THREADS, "%llu madvise calls for %d threads that each freed one block and exited",
         (unsigned long long)calls, THREADS);

  if (!run_one(BLOCKS - BLOCKS / 8, 0)) return 1;
  rss_back(start, "a thread wrote 28 MiB of blocks purged before, freed them and exited");
  for (size_t i = 0; i < kept_n; i++) free(kept[i]);

  kept_n = 0;
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 10000) == 0);
  if (!run_one(BLOCKS, 8)) return 1;
  pthread_t t;
  void *r = (void *)1;
  if (CHECK(pthread_create(&t, NULL, reuser, NULL) == 0)) {
    CHECK(pthread_join(t, &r) == 0);
    CHECKF(r == NULL && reuse_faults >= 0 && reuse_faults < BLOCKS - BLOCKS / 8,
           "a thread that took over an exited one's heap faulted in %ld pages writing %d of its freed blocks of 32 KiB",
           reuse_faults, BLOCKS - BLOCKS / 8);
    printf("a thread that took over an exited one's heap: %ld page faults writing %d blocks of 32 KiB\n", reuse_faults,
           BLOCKS - BLOCKS / 8);
  }
  for (size_t i = 0; i < kept_n; i++) free(kept[i]);
  return 0;
}
