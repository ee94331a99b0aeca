// SPDX-License-Identifier: MIT
/* tests/threads/stress.c: several threads allocate, hand blocks to each other
 * through a shared table and free what others allocated. Every block carries
 * a pattern derived from its address and its allocating thread, checked
 * before it is freed or reallocated, so a block handed out twice, freed
 * memory reused while live, or a lost remote free shows as corruption.
 * Runs with 2, 4 and 8 threads, HZ_STRESS_SECONDS (default 1) each. */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 4096
#define NSIZES 4096

/* A slot holds address << 16 | thread << 12 | size index, or 0. */
static uint64_t slots[SLOTS];
static size_t size_table[NSIZES];
static int stop; /* atomic loads and stores: ThreadSanitizer runs this test too */
static long ops;
static pthread_barrier_t start;

static uint64_t block_seed(void *p, unsigned tid) {
  return tu_mix((uint64_t)(uintptr_t)p * 16 + tid);
}

static void check_block(void *p, size_t n, unsigned tid, const char *when) {
  size_t bad = tu_verify(p, n, block_seed(p, tid));
  CHECKF(bad == 0, "block %p (%zu bytes, thread %u) corrupted at offset %zu "
         "%s", p, n, tid, bad - 1, when);
}

static uint64_t pack(void *p, unsigned tid, unsigned sizeidx) {
  return (uint64_t)(uintptr_t)p << 16 | (uint64_t)tid << 12 | sizeidx;
}

/* Allocate size_table[idx] bytes in one of several ways and fill it. */
static void *make_block(unsigned tid, unsigned idx, uint64_t r) {
  size_t n = size_table[idx];
  void *p;
  switch (r % 16) {
  case 0:
    p = calloc(1, n);
    if (p) CHECKF(tu_nonzero(p, n) == 0, "calloc(1, %zu) not zeroed", n);
    break;
  case 1: {
    size_t al = (size_t)16 << (r >> 8) % 9;
    p = aligned_alloc(al, n);
    if (p) CHECKF(((uintptr_t)p & (al - 1)) == 0, "aligned_alloc(%zu) = %p", al, p);
    break;
  }
  default:
    p = malloc(n);
  }
  if (!CHECKF(p != NULL, "allocation of %zu bytes failed (errno %d)", n, errno))
    return NULL;
  CHECKF(((uintptr_t)p & 15) == 0, "%p not 16-byte aligned", p);
  CHECKF(malloc_usable_size(p) >= n, "usable %zu < %zu", malloc_usable_size(p), n);
  tu_fill(p, n, block_seed(p, tid));
  return p;
}

static void release(uint64_t v, const char *when) {
  if (!v) return;
  void *p = (void *)(uintptr_t)(v >> 16);
  check_block(p, size_table[v & 0xfff], (v >> 12) & 0xf, when);
  free(p);
}

static void *worker(void *arg) {
  unsigned tid = (unsigned)(uintptr_t)arg;
  uint64_t rng = tu_mix(tid + 1) | 1;
  void *local[32];
  unsigned local_idx[32];
  pthread_barrier_wait(&start);
  for (; !__atomic_load_n(&stop, __ATOMIC_RELAXED); __atomic_add_fetch(&ops, 1, __ATOMIC_RELAXED)) {
    uint64_t r = tu_rand(&rng);
    unsigned idx = (unsigned)(r % NSIZES);
    if (r % 64 == 0) {
      /* A burst freed in reverse order by the same thread. */
      for (int i = 0; i < 32; i++) {
        local_idx[i] = (unsigned)(tu_rand(&rng) % 1024);
        local[i] = make_block(tid, local_idx[i], tu_rand(&rng));
      }
      for (int i = 31; i >= 0; i--) {
        if (!local[i]) continue;
        check_block(local[i], size_table[local_idx[i]], tid, "in a local burst");
        free(local[i]);
      }
      continue;
    }
    size_t s = (size_t)((r >> 20) % SLOTS);
    if (r % 8 == 1) {
      /* Take a block from the table, realloc it, put it back. */
      uint64_t v = __atomic_exchange_n(&slots[s], 0, __ATOMIC_ACQ_REL);
      if (!v) continue;
      void *p = (void *)(uintptr_t)(v >> 16);
      unsigned otid = (v >> 12) & 0xf;
      size_t old = size_table[v & 0xfff], n = size_table[idx];
      check_block(p, old, otid, "before realloc");
      void *q = realloc(p, n);
      if (!CHECKF(q != NULL, "realloc(%zu -> %zu) failed", old, n)) {
        free(p);
        continue;
      }
      size_t keep = old < n ? old : n;
      size_t bad = tu_verify(q, keep, block_seed(p, otid));
      CHECKF(bad == 0, "realloc %zu -> %zu lost content at %zu", old, n, bad - 1);
      tu_fill(q, n, block_seed(q, tid));
      release(__atomic_exchange_n(&slots[s], pack(q, tid, idx), __ATOMIC_ACQ_REL),
              "in the table (after realloc)");
      continue;
    }
    void *p = make_block(tid, idx, r >> 32);
    if (!p) continue;
    /* Put it in the table; whatever was there is freed here, usually a
     * block another thread allocated. */
    release(__atomic_exchange_n(&slots[s], pack(p, tid, idx), __ATOMIC_ACQ_REL),
            "in the table");
  }
  return NULL;
}

/* Mostly small sizes, some medium and large, a few huge. */
static void init_sizes(void) {
  uint64_t rng = 99;
  for (int i = 0; i < NSIZES; i++) {
    uint64_t r = tu_rand(&rng);
    size_t n;
    if (i < 1024)
      n = (size_t)(r % 1024); /* the local bursts use these */
    else if (i < 3000)
      n = (size_t)(r % 512);
    else if (i < 3800)
      n = (size_t)(r % (64 * KiB));
    else if (i < 4090)
      n = (size_t)(r % MiB);
    else
      n = (size_t)(r % (8 * MiB));
    size_table[i] = n;
  }
}

static void run(unsigned nthreads, double seconds) {
  pthread_t th[8];
  __atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
  ops = 0;
  pthread_barrier_init(&start, NULL, nthreads + 1);
  for (unsigned t = 0; t < nthreads; t++)
    CHECK(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) == 0);
  pthread_barrier_wait(&start);
  /* Bounded runtime: the main thread checks the clock, the workers poll
   * the flag (a timer, not a stand-in for synchronisation). They run for
   * `seconds` and on until they did HZ_STRESS_MIN_OPS operations each: on
   * a loaded machine (2 cores, load 10) 8 threads did 300 in a second. An
   * allocator that stalls them still fails, at 20 times `seconds`. (Fewer
   * under ThreadSanitizer, whose checks make each copy slow.) */
  long min_ops = (long)tu_env_double("HZ_STRESS_MIN_OPS", 1000) * (long)nthreads;
  double start_at = tu_now(), now;
  struct timespec ts = {0, 10 * 1000 * 1000};
  while (!check_failed() && ((now = tu_now()) < start_at + seconds ||
                             (__atomic_load_n(&ops, __ATOMIC_RELAXED) < min_ops && now < start_at + 20 * seconds)))
    nanosleep(&ts, NULL);
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  for (unsigned t = 0; t < nthreads; t++) CHECK(pthread_join(th[t], NULL) == 0);
  pthread_barrier_destroy(&start);
  CHECKF(ops >= min_ops, "%u threads did only %ld operations in %.1f s", nthreads, ops, tu_now() - start_at);
  /* The workers are gone; main frees what they left behind. */
  for (size_t s = 0; s < SLOTS; s++) {
    release(slots[s], "left in the table");
    slots[s] = 0;
  }
}

TEST_MAIN() {
  double seconds = tu_env_double("HZ_STRESS_SECONDS", 1.0);
  init_sizes();
  static const unsigned counts[] = {2, 4, 8};
  for (int i = 0; i < 3; i++) run(counts[i], seconds);
  return 0;
}
