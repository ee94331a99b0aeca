// SPDX-License-Identifier: MIT
/* tests/faults/soak.c SECONDS THREADS [INTERVAL]: a long multi-thread
 * stress for tools/soak.sh (which preloads the allocator). Each thread keeps
 * a table of blocks (sizes from 1 byte to 4 MiB, mostly small), replaces,
 * reallocs and frees them at random, and swaps blocks with other threads
 * through a shared table, so that frees are often remote. Every block holds
 * a pattern derived from its seed and is verified before it is freed,
 * reallocated or handed over. Every INTERVAL seconds (default 5) the main
 * thread prints the elapsed time, operations done and the RSS; with the
 * workload's live bytes bounded, a growing RSS means a leak or runaway
 * fragmentation. Exits 1 on any content error or failed allocation. */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 2048
#define SHARED 1024

typedef struct {
  unsigned char *p;
  size_t n;
  uint64_t seed;
} blk_t;

static blk_t shared[SHARED];
static pthread_mutex_t shared_lock[SHARED / 64];
static atomic_long ops, live_bytes;
static atomic_int stop;

static size_t pick_size(uint64_t r) {
  unsigned k = (unsigned)(r % 1000);
  r >>= 10;
  if (k < 2) return 2 * MiB + r % (2 * MiB); /* huge */
  if (k < 30) return 32 * KiB + r % (1 * MiB); /* large */
  if (k < 300) return 256 + r % (32 * KiB - 256);
  return 1 + r % 256;
}

static int check_blk(const blk_t *b, const char *when) {
  if (b->p == NULL) return 1;
  size_t bad = tu_verify(b->p, b->n, b->seed);
  return CHECKF(bad == 0, "block %p (%zu bytes) corrupted at offset %zu %s", (void *)b->p, b->n, bad - 1, when);
}

static void put(blk_t *b, size_t n, uint64_t seed) {
  b->p = malloc(n);
  if (!CHECKF(b->p != NULL, "malloc(%zu) failed (errno %d)", n, errno)) exit(1);
  b->n = n;
  b->seed = seed;
  tu_fill(b->p, n, seed);
  atomic_fetch_add(&live_bytes, (long)n);
}

static void drop(blk_t *b) {
  if (b->p == NULL) return;
  check_blk(b, "before free");
  free(b->p);
  atomic_fetch_sub(&live_bytes, (long)b->n);
  b->p = NULL;
}

static void *worker(void *arg) {
  uint64_t rng = tu_mix((uintptr_t)arg) | 1;
  blk_t *t = calloc(SLOTS, sizeof *t);
  if (!CHECK(t != NULL)) exit(1);
  long done = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    uint64_t r = tu_rand(&rng);
    blk_t *b = &t[(r >> 8) % SLOTS];
    switch (r & 7) {
    case 0: case 1: case 2: /* replace */
      drop(b);
      put(b, pick_size(tu_rand(&rng)), r);
      break;
    case 3: { /* realloc: the prefix must survive */
      if (b->p == NULL) break;
      check_blk(b, "before realloc");
      size_t n = pick_size(tu_rand(&rng));
      unsigned char *q = realloc(b->p, n);
      if (!CHECKF(q != NULL, "realloc(%zu) failed", n)) exit(1);
      size_t keep = n < b->n ? n : b->n;
      CHECKF(tu_verify(q, keep, b->seed) == 0, "realloc(%zu -> %zu) lost contents", b->n, n);
      atomic_fetch_add(&live_bytes, (long)n - (long)b->n);
      b->p = q;
      b->n = n;
      b->seed = r;
      tu_fill(q, n, r);
      break;
    }
    case 4: /* free */
      drop(b);
      break;
    default: { /* swap with the shared table */
      unsigned s = (unsigned)(r >> 40) % SHARED;
      check_blk(b, "before handing over");
      pthread_mutex_lock(&shared_lock[s / 64]);
      blk_t tmp = shared[s];
      shared[s] = *b;
      pthread_mutex_unlock(&shared_lock[s / 64]);
      *b = tmp;
      check_blk(b, "taken from another thread");
    }
    }
    if (++done % 1024 == 0) atomic_fetch_add_explicit(&ops, 1024, memory_order_relaxed);
  }
  for (int i = 0; i < SLOTS; i++) drop(&t[i]);
  free(t);
  return NULL;
}

TEST_MAIN() {
  if (argc < 3) {
    fprintf(stderr, "usage: soak SECONDS THREADS [INTERVAL]\n");
    return 2;
  }
  double seconds = atof(argv[1]);
  int nthreads = atoi(argv[2]);
  double interval = argc > 3 ? atof(argv[3]) : 5;
  if (nthreads < 1 || nthreads > 256 || seconds <= 0 || interval <= 0) return 2;
  for (int i = 0; i < SHARED / 64; i++) pthread_mutex_init(&shared_lock[i], NULL);
  pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
  for (int i = 0; i < nthreads; i++)
    if (!CHECK(pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0)) return 1;
  double start = tu_now(), next = start + interval;
  long peak = 0;
  printf("%8s %12s %10s %10s\n", "seconds", "ops", "live_MiB", "rss_MiB");
  while (tu_now() - start < seconds && !check_failed()) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the reporting clock, not synchronisation */
    if (tu_now() < next) continue;
    next += interval;
    long rss = tu_rss();
    if (rss > peak) peak = rss;
    printf("%8.0f %12ld %10.1f %10.1f\n", tu_now() - start, atomic_load(&ops),
           (double)atomic_load(&live_bytes) / (double)MiB, (double)rss / (double)MiB);
    fflush(stdout);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < nthreads; i++) pthread_join(tid[i], NULL);
  for (int i = 0; i < SHARED; i++) drop(&shared[i]);
  free(tid);
  printf("soak: %d threads, %.0f s, %ld ops, peak RSS %.1f MiB, %s\n", nthreads, tu_now() - start, atomic_load(&ops),
         (double)peak / (double)MiB, check_failed() ? "FAILED" : "no errors");
  return check_failed() ? 1 : 0;
}
