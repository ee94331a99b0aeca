// SPDX-License-Identifier: MIT
/* tests/options/live.c: options changed while threads allocate. Programs
 * call mallopt or hz_option_set at any time, not only before their first
 * malloc: the stash size shrinks under blocks already stashed, the purge
 * delay and the thread caches change while spans wait in them, the
 * profiler starts sampling blocks whose neighbours were not sampled.
 *
 * Four threads swap blocks of 16 bytes to 4 MiB through a shared table (so
 * half the frees are remote), reallocating some. Every block holds its size
 * in its first word and a pattern from its address after it, checked at
 * each handover. A fifth thread meanwhile sets one option after another to
 * values across its range, calls mallopt, malloc_trim and hz_collect. A
 * block handed out twice, one freed while live or a lost free shows as a
 * corrupt pattern, a crash or a hakozuna report. HZ_STRESS_SECONDS (default 2). */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 2048 /* about 70 MiB live */
#define WORKERS 4

static _Atomic(unsigned char *) slots[SLOTS];
static atomic_int stop;
static atomic_long ops, changes;

static size_t pick_size(uint64_t r) {
  unsigned k = (unsigned)(r % 100);
  r >>= 8;
  if (k < 70) return 16 + r % 1009;           /* small classes */
  if (k < 90) return 1024 + r % (31 * 1024);  /* stashed classes */
  if (k < 99) return 32768 + r % (256 * 1024); /* large */
  return 1048576 + r % (3 * 1048576);         /* large and huge */
}

static void fill(unsigned char *p, size_t n) {
  memcpy(p, &n, sizeof n);
  tu_fill(p + sizeof n, n - sizeof n, (uint64_t)(uintptr_t)p);
}

/* The block's size, after checking its pattern; 0 if it is corrupt. */
static size_t verify(unsigned char *p, const char *when) {
  size_t n;
  memcpy(&n, p, sizeof n);
  if (!CHECKF(n >= 16 && n <= 4 * MiB, "block %p holds size %zu %s", (void *)p, n, when)) return 0;
  size_t bad = tu_verify(p + sizeof n, n - sizeof n, (uint64_t)(uintptr_t)p);
  if (!CHECKF(bad == 0, "block %p (%zu bytes) corrupted at offset %zu %s", (void *)p, n,
              bad + sizeof n - 1, when))
    return 0;
  return n;
}

static void *worker(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
  long n_ops = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    uint64_t r = tu_rand(&rng);
    size_t i = r % SLOTS;
    unsigned char *p = atomic_exchange(&slots[i], NULL);
    if (p != NULL) {
      size_t n = verify(p, "when taken");
      if (n != 0 && (r >> 40) % 4 == 0) { /* grow or shrink it, keep it */
        size_t m = pick_size(tu_rand(&rng));
        unsigned char *q = realloc(p, m);
        if (!CHECKF(q != NULL, "realloc(%p, %zu) failed", (void *)p, m)) continue;
        size_t keep = n < m ? n : m, bad;
        bad = tu_verify(q + sizeof n, keep - sizeof n, (uint64_t)(uintptr_t)p);
        CHECKF(bad == 0, "realloc %zu -> %zu lost content at %zu", n, m, bad + sizeof n - 1);
        fill(q, m);
        p = atomic_exchange(&slots[i], q);
        if (p != NULL) free(p); /* (another thread filled the slot meanwhile) */
      } else {
        free(p);
      }
    } else {
      size_t m = pick_size(r >> 16);
      unsigned char *q = (r >> 8) % 8 == 0 ? calloc(1, m) : malloc(m);
      if (!CHECKF(q != NULL, "allocation of %zu bytes failed", m)) continue;
      fill(q, m);
      p = atomic_exchange(&slots[i], q);
      if (p != NULL && verify(p, "when displaced") != 0) free(p);
    }
    n_ops++;
  }
  atomic_fetch_add(&ops, n_ops);
  return NULL;
}

typedef struct {
  hz_option_t option;
  long values[6];
} option_values_t;

/* Values across each option's range (none that ends the program or
 * changes what a misuse does: CHECK stays 1, VERBOSE and STATS 0). */
static const option_values_t changed[] = {
  {HZ_OPTION_STASH, {0, 1, 64, 256, 4096, 256}},
  {HZ_OPTION_PURGE_DELAY, {-1, 0, 1, 10, 100, 100}},
  {HZ_OPTION_PURGE_THREAD, {0, 1, 2, 1, 0, 1}},
  {HZ_OPTION_THREAD_CACHE, {0, 64, 4096, 1048576, 32, 4096}},
  {HZ_OPTION_HUGE_CACHE, {0, 1, 256, 4, 0, 256}},
  {HZ_OPTION_MMAP_THRESHOLD, {32768, 65536, 2097152, 1048576, 40000, 2097152}},
  {HZ_OPTION_THP, {1, 0, 1, 0, 1, 0}},
  {HZ_OPTION_PROFILE, {1, 0, 1, 0, 1, 0}},
  {HZ_OPTION_PROFILE_RATE, {64, 4096, 524288, 1, 100000, 524288}},
  {HZ_OPTION_ARENA_RESERVE, {4, 64, 1024, 8, 64, 64}},
};
#define NCHANGED (sizeof changed / sizeof changed[0])

static void *changer(void *arg) {
  (void)arg;
  uint64_t rng = 12345;
  long n = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    uint64_t r = tu_rand(&rng);
    const option_values_t *o = &changed[r % NCHANGED];
    long v = o->values[(r >> 8) % 6];
    CHECKF(hz_option_set(o->option, v) == 0, "hz_option_set(%s, %ld) failed", hz_option_name(o->option), v);
    switch ((r >> 16) % 16) {
#ifdef M_MMAP_THRESHOLD /* (glibc's parameters; musl has none) */
    case 0: CHECK(mallopt(M_MMAP_THRESHOLD, (int)(32768 << (r >> 24) % 7)) == 1); break;
    case 1: CHECK(mallopt(M_TRIM_THRESHOLD, (int)((r >> 24) % 3) - 1) == 1); break; /* -1, 0, 1 */
#endif
    case 2: malloc_trim(0); break;
    case 3: hz_collect((r >> 24) % 2 == 0); break;
    case 4: {
      hz_stats_t st = {.size = sizeof st};
      CHECK(hz_stats_get(&st) == 0);
      break;
    }
    default: break;
    }
    n++;
    /* a change every ~0.1 ms: thousands a second, yet the workers run between them */
    for (volatile int spin = 0; spin < 20000; spin++) {}
  }
  atomic_store(&changes, n);
  return NULL;
}

static long initial[NCHANGED];

int test_main(int argc, char **argv) {
  (void)argc, (void)argv;
  double seconds = tu_env_double("HZ_STRESS_SECONDS", 2);
  pthread_t w[WORKERS], c;
  for (size_t i = 0; i < NCHANGED; i++) initial[i] = hz_option_get(changed[i].option);
  hz_stats_t st0 = {.size = sizeof st0}; /* (what the runtime holds: UBSan's keeps a large block) */
  CHECK(hz_stats_get(&st0) == 0);
  for (uintptr_t i = 0; i < WORKERS; i++) CHECK(pthread_create(&w[i], NULL, worker, (void *)(i + 1)) == 0);
  CHECK(pthread_create(&c, NULL, changer, NULL) == 0);
  double end = tu_now() + seconds;
  while (tu_now() < end) usleep(10000); /* (the run's length, not a wait for the threads) */
  atomic_store(&stop, 1);
  for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
  pthread_join(c, NULL);
  for (size_t i = 0; i < NCHANGED; i++) CHECK(hz_option_set(changed[i].option, initial[i]) == 0);
  for (size_t i = 0; i < SLOTS; i++) {
    unsigned char *p = atomic_exchange(&slots[i], NULL);
    if (p != NULL && verify(p, "at the end") != 0) free(p);
  }
  malloc_trim(0);
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  /* Everything was freed, the threads are gone and malloc_trim(0) returns
   * all that no block uses: what is committed is the blocks still live
   * (stdio's, the runtime's), the room in their spans, and segment headers. */
  CHECKF(st.large_live_bytes == st0.large_live_bytes && st.huge_live_bytes == st0.huge_live_bytes,
         "large and huge bytes live: %llu and %llu, at the start %llu and %llu",
         (unsigned long long)st.large_live_bytes, (unsigned long long)st.huge_live_bytes,
         (unsigned long long)st0.large_live_bytes, (unsigned long long)st0.huge_live_bytes);
  CHECKF(st.unused_span_cache == 0 && st.unused_empty_spans == 0 && st.unused_purge_backlog == 0 &&
             st.unused_huge_cache == 0 && st.unused_stashed == 0,
         "malloc_trim(0) kept %llu bytes in span caches (the checked build's quarantine too), %llu in "
         "empty spans, %llu waiting to be purged, %llu of huge blocks, %llu in stashes",
         (unsigned long long)st.unused_span_cache, (unsigned long long)st.unused_empty_spans,
         (unsigned long long)st.unused_purge_backlog, (unsigned long long)st.unused_huge_cache,
         (unsigned long long)st.unused_stashed);
  long n_ops = atomic_load(&ops), n_changes = atomic_load(&changes);
  printf("%ld operations, %ld option changes in %.1f s\n", n_ops, n_changes, seconds);
  CHECKF(n_ops > 1000 && n_changes > 10, "too little ran: %ld operations, %ld changes", n_ops, n_changes);
  return 0;
}
