// SPDX-License-Identifier: MIT
/* tests/threads/remote.c: blocks freed by another thread all come back to
 * their owner, once each, whatever shape their batches take (src/remote.c):
 * a batch of blocks of one span is a run, which goes back onto the span
 * whole (blocks of 32 bytes and more, not of the stashed classes of 1 KiB
 * and more; docs/perf.md §66); any other travels as an array of addresses
 * written into its largest block, or as a linked list when no block of it
 * can carry the others (16-byte blocks; a 32-byte block carries one
 * address) and in the checked build.
 *
 * For each shape an owner thread allocates 2N blocks and keeps every other
 * one (so no span becomes empty and is handed elsewhere), main frees the
 * other N and sends its batches (hz_collect), and the owner allocates the
 * same sizes again until every freed address has come back: a block the
 * owner never got back never does (the round stops at 256 MiB), one
 * returned twice is handed out twice. And when all are freed again, the
 * live blocks counted (from the spans' counts, which a run lowers by its
 * length at once) are those of before the round. */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <pthread.h>
#include <stdint.h>

enum { N = 3000, MAX_AGAIN = 64 * N };
static void *again[MAX_AGAIN];

typedef struct {
  const char *name;
  size_t (*size)(size_t i, uint64_t *rng);
} shape_t;

static size_t s16(size_t i, uint64_t *r) { (void)i, (void)r; return 16; }
static size_t s32(size_t i, uint64_t *r) { (void)i, (void)r; return 32; }
static size_t s16_32(size_t i, uint64_t *r) { (void)r; return i % 3 ? 16 : 32; }
static size_t s_mixed(size_t i, uint64_t *r) { (void)i; return 16 + (size_t)(tu_rand(r) % 2033); }
static size_t s4k(size_t i, uint64_t *r) { (void)i, (void)r; return 4000; }
static size_t s_medium(size_t i, uint64_t *r) { (void)i; return 4096 + (size_t)(tu_rand(r) % 28000); }
static size_t s64(size_t i, uint64_t *r) { (void)i, (void)r; return 64; }
static size_t s800(size_t i, uint64_t *r) { (void)i, (void)r; return 800; }

static const shape_t shapes[] = {
    {"16 B (linked lists)", s16},        {"32 B (runs: a block carries one address)", s32},
    {"16 and 32 B", s16_32},             {"16-2048 B", s_mixed},
    {"4000 B (64 KiB batches)", s4k},   {"4-32 KiB", s_medium},
    {"64 B (runs)", s64},                {"800 B (runs of blocks that could carry)", s800},
};

static uint64_t blocks_live(void) {
  hz_stats_t st;
  CHECK(tu_stats(&st) == 0);
  return st.blocks_live;
}

static void *kept[N], *given[N];
static size_t sizes[N];
static pthread_barrier_t bar;
static const shape_t *shape;

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void *owner(void *arg) {
  (void)arg;
  uint64_t rng = 12345;
  for (size_t i = 0; i < N; i++) {
    sizes[i] = shape->size(i, &rng);
    kept[i] = malloc(sizes[i]);
    given[i] = malloc(sizes[i]);
    if (!CHECK(kept[i] && given[i])) return NULL;
    memset(given[i], 0xa5, sizes[i]); /* the freeing thread gets the lines written */
  }
  pthread_barrier_wait(&bar); /* main frees given[] */
  pthread_barrier_wait(&bar); /* and has sent its batches */
  /* The owner takes them back when a malloc finds its current span empty:
   * allocate until all are seen (spans still carve fresh blocks first). */
  qsort(given, N, sizeof *given, cmp_ptr);
  size_t n = 0, found = 0, bytes = 0;
  while (found < N && n < MAX_AGAIN && bytes < (256u << 20)) {
    void *p = again[n] = malloc(sizes[n % N]);
    if (!CHECK(p != NULL)) break;
    bytes += sizes[n % N];
    n++;
    found += bsearch(&p, given, N, sizeof *given, cmp_ptr) != NULL;
  }
  qsort(again, n, sizeof *again, cmp_ptr);
  size_t twice = 0;
  for (size_t i = 1; i < n; i++) twice += again[i] == again[i - 1];
  CHECKF(found == N && twice == 0, "%s: of %d blocks freed by another thread, %zu came back (%zu mallocs), "
         "%zu addresses handed out twice", shape->name, N, found, n, twice);
  for (size_t i = 0; i < n; i++) free(again[i]);
  for (size_t i = 0; i < N; i++) free(kept[i]);
  return NULL;
}

TEST_MAIN() {
  /* (a first round unchecked: its threads leave blocks of glibc's own live) */
  for (size_t k = 0, rounds = sizeof shapes / sizeof *shapes; k <= rounds; k++) {
    shape = &shapes[k == 0 ? 0 : k - 1];
    pthread_t t;
    uint64_t live = blocks_live();
    CHECK(pthread_barrier_init(&bar, NULL, 2) == 0);
    if (!CHECK(pthread_create(&t, NULL, owner, NULL) == 0)) break;
    pthread_barrier_wait(&bar);
    for (size_t i = 0; i < N; i++) free(given[i]);
    hz_collect(0); /* sends this thread's last batches */
    pthread_barrier_wait(&bar);
    CHECK(pthread_join(t, NULL) == 0);
    pthread_barrier_destroy(&bar);
    uint64_t after = blocks_live();
    CHECKF(k == 0 || after == live, "%s: %llu blocks live before the round, %llu after all were freed", shape->name,
           (unsigned long long)live, (unsigned long long)after);
  }
  return 0;
}
