// SPDX-License-Identifier: MIT
/* tests/faults/oom.c: out of memory under RLIMIT_AS.
 *
 * Blocks of every size range are allocated and filled first ("kept"
 * blocks). Then the address space is limited to its present size plus a
 * little, and each API is called with small, large and huge requests until
 * it fails: every failure must be NULL with errno ENOMEM (posix_memalign:
 * ENOMEM returned and in errno, *out untouched), a failed realloc must leave
 * the old block intact, and everything handed out before the failure must
 * keep its contents. Memory freed under the limit must be reusable under
 * it. Then the limit goes back up and every size range must work again.
 * A second round does the same with THREADS threads hitting the limit at
 * once (their first allocation happens under the limit), freeing each
 * other's blocks under it. An alarm ends a hang.
 *
 * Linked against libhakozuna.so (hz_stats_get checks at the end that no
 * large or huge block is left live). Usage: oom [THREADS] (default 8). */
#include "check.h"
#include "testutil.h"
#include "squeeze.h"
#include <hakozuna.h>

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define HEADROOM (16 * MiB)
#define SMALL ((size_t)200)
#define LARGE MiB
#define HUGE_MID (6 * MiB)
#define HUGE (64 * MiB)
#define MAX_THREADS 64

/* ---- block marks: the whole block if small, else its first and last
 * pages (so the test's own footprint stays small) ---- */
static void mark(void *p, size_t n, uint64_t seed) {
  if (n <= 64 * KiB) {
    tu_fill(p, n, seed);
    return;
  }
  tu_fill(p, 4 * KiB, seed);
  tu_fill((char *)p + n - 4 * KiB, 4 * KiB, ~seed);
}
static int marked(const void *p, size_t n, uint64_t seed) {
  if (n <= 64 * KiB) return tu_verify(p, n, seed) == 0;
  return tu_verify(p, 4 * KiB, seed) == 0 && tu_verify((const char *)p + n - 4 * KiB, 4 * KiB, ~seed) == 0;
}

typedef struct {
  void *p;
  size_t n;
  uint64_t seed;
} blk_t;

static int blk_ok(const blk_t *b) { return marked(b->p, b->n, b->seed); }

/* ---- the APIs, called uniformly ---- */
enum { A_MALLOC, A_CALLOC, A_REALLOC_NULL, A_ALIGNED, A_POSIX, A_MEMALIGN, A_VALLOC, A_COUNT };
static const char *const api_name[A_COUNT] = {"malloc",         "calloc",   "realloc(NULL)", "aligned_alloc",
                                              "posix_memalign", "memalign", "valloc"};

static size_t api_align(int api, size_t n) {
  switch (api) {
  case A_ALIGNED:
  case A_POSIX:
  case A_MEMALIGN:
    return n >= HUGE_MID ? 2 * MiB : n >= LARGE ? 64 * KiB : 64;
  case A_VALLOC:
    return (size_t)sysconf(_SC_PAGESIZE);
  default:
    return 16;
  }
}

/* Returns the block or NULL; *err is errno after the call (posix_memalign:
 * its return value; errno unchanged on success, ENOMEM with ENOMEM, as glibc
 * does). */
static void *api_call(int api, size_t n, int *err) {
  size_t al = api_align(api, n);
  void *p = NULL;
  errno = 0;
  switch (api) {
  case A_MALLOC: p = malloc(n); break;
  case A_CALLOC: p = n % 8 ? calloc(n, 1) : calloc(n / 8, 8); break;
  case A_REALLOC_NULL: p = realloc(NULL, n); break;
  case A_ALIGNED: p = aligned_alloc(al, n); break;
  case A_MEMALIGN: p = memalign(al, n); break;
  case A_VALLOC: p = valloc(n); break;
  case A_POSIX: {
    static char sentinel;
    p = &sentinel;
    int rc = posix_memalign(&p, al, n);
    *err = rc;
    CHECKF(errno == (rc == ENOMEM ? ENOMEM : 0), "posix_memalign(%zu, %zu) = %d set errno to %d", al, n, rc,
           errno);
    if (rc != 0) {
      CHECKF(p == &sentinel, "failed posix_memalign(%zu, %zu) wrote *out = %p", al, n, p);
      return NULL;
    }
    CHECKF(p != NULL, "posix_memalign(%zu, %zu) returned 0 and a NULL block", al, n);
    return p;
  }
  }
  *err = errno;
  return p;
}

/* A block the API just returned: aligned, big enough, zero for calloc. */
static void check_fresh(int api, void *p, size_t n) {
  size_t al = api_align(api, n);
  CHECKF(((uintptr_t)p & (al - 1)) == 0, "%s(%zu) = %p not %zu-aligned", api_name[api], n, p, al);
  CHECKF(malloc_usable_size(p) >= n, "%s(%zu): usable size %zu", api_name[api], n, malloc_usable_size(p));
  if (api == A_CALLOC) CHECKF(tu_nonzero(p, n) == 0, "calloc(%zu) not zero at %zu", n, tu_nonzero(p, n) - 1);
}

/* ---- single thread: exhaust each API at each size ---- */
#define TABLE ((size_t)1 << 20)
static blk_t blocks[TABLE];
static size_t nblocks;
static uint64_t next_seed = 1;

/* Calls api(n) until it fails; returns how many calls succeeded. */
static size_t exhaust(int api, size_t n) {
  size_t got = 0, cap = 1024 * MiB / n + 16;
  for (;;) {
    if (!CHECKF(got < cap && nblocks < TABLE, "%s(%zu): the limit was never reached (%zu blocks)", api_name[api], n,
                got))
      return got;
    int err;
    void *p = api_call(api, n, &err);
    if (p == NULL) {
      CHECKF(err == ENOMEM, "%s(%zu) failed with error %d, not ENOMEM", api_name[api], n, err);
      p = api_call(api, n, &err);
      CHECKF(p == NULL && err == ENOMEM, "%s(%zu) = %p (error %d) right after failing", api_name[api], n, p, err);
      if (p != NULL) free(p);
      return got;
    }
    check_fresh(api, p, n);
    blk_t *b = &blocks[nblocks++];
    *b = (blk_t){p, n, next_seed++};
    mark(p, n, b->seed);
    got++;
  }
}

static void verify_table(const blk_t *t, size_t count, const char *when) {
  for (size_t i = 0; i < count; i++)
    if (t[i].p != NULL && !CHECKF(blk_ok(&t[i]), "block %p (%zu bytes) changed %s", t[i].p, t[i].n, when)) return;
}

/* Blocks allocated before any limit, checked at every stage. */
static const size_t kept_sizes[] = {8, SMALL, 1000, 5000, 30000, 100000, LARGE, 3 * MiB, HUGE_MID, HUGE};
#define NKEPT (sizeof kept_sizes / sizeof kept_sizes[0])
static blk_t kept[NKEPT];

static void realloc_under_limit(void) {
  /* growing into sizes that cannot be had: NULL, ENOMEM, old block intact */
  static const size_t from[] = {1000, 30000, LARGE, HUGE_MID};
  for (size_t i = 0; i < NKEPT; i++) {
    for (size_t f = 0; f < sizeof from / sizeof from[0]; f++) {
      if (kept[i].n != from[f]) continue;
      size_t before = malloc_usable_size(kept[i].p);
      errno = 0;
      void *q = realloc(kept[i].p, HUGE);
      CHECKF(q == NULL && errno == ENOMEM, "realloc(%zu -> %zu) under the limit = %p, errno %d", kept[i].n, HUGE, q,
             errno);
      if (q != NULL) { /* keep the test going with the moved block */
        kept[i].p = q;
        continue;
      }
      CHECKF(blk_ok(&kept[i]), "failed realloc(%zu -> %zu) changed the old block", kept[i].n, HUGE);
      CHECKF(malloc_usable_size(kept[i].p) == before, "failed realloc changed the usable size %zu -> %zu", before,
             malloc_usable_size(kept[i].p));
    }
  }
  /* impossible sizes fail the same way with or without a limit */
  errno = 0;
  void *q = reallocarray(kept[1].p, tu_opaque(SIZE_MAX / 4), 8);
  CHECKF(q == NULL && errno == ENOMEM, "reallocarray overflow = %p, errno %d", q, errno);
  CHECK(blk_ok(&kept[1]));
}

/* Free every other block of size n, then the same number of allocations of
 * n must succeed again without raising the limit. */
static void reuse_under_limit(size_t n) {
  size_t freed = 0;
  for (size_t i = 0; i < nblocks; i += 2) {
    if (blocks[i].p == NULL || blocks[i].n != n) continue;
    CHECK(blk_ok(&blocks[i]));
    free(blocks[i].p);
    blocks[i].p = NULL;
    freed++;
  }
  CHECKF(freed > 0, "no block of %zu bytes to free", n);
  size_t again = 0;
  for (size_t i = 0; i < nblocks && again < freed; i++) {
    if (blocks[i].p != NULL || blocks[i].n != n) continue;
    errno = 0;
    void *p = malloc(n);
    if (!CHECKF(p != NULL, "malloc(%zu) failed (errno %d) under the limit with %zu of %zu freed blocks not reused",
                n, errno, freed - again, freed))
      break;
    blocks[i].p = p;
    blocks[i].seed = next_seed++;
    mark(p, n, blocks[i].seed);
    again++;
  }
}

/* After the limit is lifted: each API at each size works and is usable. */
static void recovered(const char *when) {
  static const size_t sizes[] = {8, SMALL, 4000, 32000, LARGE, 2 * MiB, HUGE_MID, HUGE};
  for (int api = 0; api < A_COUNT; api++) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      size_t n = sizes[s];
      int err;
      void *p = api_call(api, n, &err);
      if (!CHECKF(p != NULL, "%s %s(%zu) failed (error %d)", when, api_name[api], n, err)) continue;
      check_fresh(api, p, n);
      mark(p, n, n);
      CHECK(marked(p, n, n));
      free(p);
    }
  }
  /* and many small ones */
  for (size_t i = 0; i < 20000; i++) {
    blk_t *b = &blocks[i];
    b->n = 16 + i % 500;
    b->seed = next_seed++;
    b->p = malloc(b->n);
    if (!CHECKF(b->p != NULL, "%s malloc(%zu) failed", when, b->n)) break;
    mark(b->p, b->n, b->seed);
  }
  for (size_t i = 0; i < 20000 && blocks[i].p; i++) {
    CHECK(blk_ok(&blocks[i]));
    free(blocks[i].p);
    blocks[i].p = NULL;
  }
}

static void single_thread_round(void) {
  static const size_t sizes[] = {HUGE, HUGE_MID, LARGE, SMALL};
  if (!CHECK(squeeze(HEADROOM) == 0)) return;
  nblocks = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int api = 0; api < A_COUNT; api++) exhaust(api, sizes[s]);
  CHECKF(nblocks > 0, "nothing could be allocated under the limit");
  verify_table(blocks, nblocks, "after the limit was reached");
  verify_table(kept, NKEPT, "after the limit was reached");
  realloc_under_limit();
  reuse_under_limit(SMALL);
  reuse_under_limit(LARGE);
  verify_table(blocks, nblocks, "after reuse under the limit");
  for (size_t i = 0; i < nblocks; i++) free(blocks[i].p);
  memset(blocks, 0, nblocks * sizeof blocks[0]);
  CHECK(unsqueeze() == 0);
  recovered("after the limit was lifted:");
  verify_table(kept, NKEPT, "after the limit was lifted");
}

/* ---- many threads at once ---- */
#define PER_THREAD ((size_t)1 << 16)
typedef struct {
  unsigned id;
  blk_t *t;
  size_t n;
  size_t fails;
} worker_t;

static unsigned nthreads;
static worker_t workers[MAX_THREADS];
static pthread_barrier_t barrier;

static size_t pick_size(uint64_t r) {
  unsigned k = (unsigned)(r % 1000);
  r >>= 10;
  if (k < 5) return 3 * MiB + r % (64 * MiB);
  if (k < 50) return 40 * KiB + r % (1536 * KiB);
  return 1 + r % 2048;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  uint64_t rng = tu_mix(w->id + 1) | 1;
  pthread_barrier_wait(&barrier); /* 1: the limit is set */
  /* allocate until a small request fails (the first one may) */
  for (;;) {
    if (!CHECKF(w->n < PER_THREAD, "thread %u never reached the limit", w->id)) break;
    uint64_t r = tu_rand(&rng);
    size_t n = pick_size(r);
    static const int apis[4] = {A_MALLOC, A_CALLOC, A_ALIGNED, A_MALLOC};
    int api = apis[(r >> 40) & 3];
    int err;
    void *p = api_call(api, n, &err);
    if (p == NULL) {
      CHECKF(err == ENOMEM, "thread %u: %s(%zu) failed with error %d", w->id, api_name[api], n, err);
      w->fails++;
      if (n <= 2048) break;
      continue;
    }
    check_fresh(api, p, n);
    blk_t *b = &w->t[w->n++];
    *b = (blk_t){p, n, tu_mix(r)};
    mark(p, n, b->seed);
  }
  pthread_barrier_wait(&barrier); /* 2: everyone is at the limit */
  verify_table(w->t, w->n, "in a thread at the limit");
  pthread_barrier_wait(&barrier); /* 3: free half of the next thread's blocks */
  worker_t *v = &workers[(w->id + 1) % nthreads];
  for (size_t i = 1; i < v->n; i += 2) {
    CHECK(blk_ok(&v->t[i]));
    free(v->t[i].p);
    v->t[i].p = NULL;
  }
  pthread_barrier_wait(&barrier); /* 4: main lifts the limit */
  pthread_barrier_wait(&barrier); /* 5: everything must work again */
  for (int i = 0; i < 300; i++) {
    uint64_t r = tu_rand(&rng);
    size_t n = i == 0 ? HUGE : pick_size(r);
    void *p = malloc(n);
    if (!CHECKF(p != NULL, "thread %u: malloc(%zu) failed after the limit was lifted", w->id, n)) continue;
    mark(p, n, r);
    CHECK(marked(p, n, r));
    free(p);
  }
  verify_table(w->t, w->n, "in a thread after the limit was lifted");
  for (size_t i = 0; i < w->n; i++) free(w->t[i].p);
  return NULL;
}

static void threads_round(void) {
  pthread_t tid[MAX_THREADS];
  pthread_barrier_init(&barrier, NULL, nthreads + 1);
  for (unsigned i = 0; i < nthreads; i++) {
    workers[i] = (worker_t){.id = i, .t = calloc(PER_THREAD, sizeof(blk_t))};
    if (!CHECK(workers[i].t != NULL)) exit(1);
  }
  for (unsigned i = 0; i < nthreads; i++)
    if (!CHECK(pthread_create(&tid[i], NULL, worker_main, &workers[i]) == 0)) exit(1);
  CHECK(squeeze(HEADROOM) == 0);
  pthread_barrier_wait(&barrier); /* 1 */
  pthread_barrier_wait(&barrier); /* 2 */
  pthread_barrier_wait(&barrier); /* 3 */
  pthread_barrier_wait(&barrier); /* 4 */
  CHECK(unsqueeze() == 0);
  pthread_barrier_wait(&barrier); /* 5 */
  size_t total = 0, fails = 0;
  for (unsigned i = 0; i < nthreads; i++) {
    pthread_join(tid[i], NULL);
    total += workers[i].n;
    fails += workers[i].fails;
    free(workers[i].t);
  }
  pthread_barrier_destroy(&barrier);
  printf("oom: %u threads held %zu blocks at the limit, %zu failed requests\n", nthreads, total, fails);
}

/* The first span that goes back to the global pool starts the purge
 * thread (from inside free()), and creating a thread allocates. Under the
 * limit that allocation would take memory the reuse check counts on, so a
 * warm-up starts it first: more large blocks than a thread caches are
 * allocated and freed. (Reported: run with HZ_OOM_COLD=1 to see it.) */
static void warm_up(void) {
  if (getenv("HZ_OOM_COLD")) return;
  static void *warm[64];
  for (int i = 0; i < 64; i++) CHECK((warm[i] = malloc(LARGE)) != NULL);
  for (int i = 0; i < 64; i++) free(warm[i]);
}

static void live_bytes(uint64_t *large, uint64_t *huge) {
  hz_collect(1);
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  *large = st.large_live_bytes;
  *huge = st.huge_live_bytes;
}

TEST_MAIN() {
  nthreads = argc > 1 ? (unsigned)atoi(argv[1]) : 8;
  if (nthreads < 1 || nthreads > MAX_THREADS) nthreads = 8;
  squeeze_watchdog("oom", 120);
  warm_up();
  /* what others in the process (libc, a sanitizer runtime) hold already */
  uint64_t large0, huge0, large1, huge1;
  live_bytes(&large0, &huge0);
  for (size_t i = 0; i < NKEPT; i++) {
    kept[i] = (blk_t){malloc(kept_sizes[i]), kept_sizes[i], tu_mix(i)};
    if (!CHECK(kept[i].p != NULL)) return 1;
    mark(kept[i].p, kept[i].n, kept[i].seed);
  }
  single_thread_round();
  threads_round();
  recovered("after the threads' round:");
  verify_table(kept, NKEPT, "at the end");
  for (size_t i = 0; i < NKEPT; i++) free(kept[i].p);
  /* every large and huge block the test made is free again: a block lost
   * on a failure path shows here */
  live_bytes(&large1, &huge1);
  CHECKF(large1 == large0, "large blocks live: %llu bytes before, %llu after", (unsigned long long)large0,
         (unsigned long long)large1);
  CHECKF(huge1 == huge0, "huge blocks live: %llu bytes before, %llu after", (unsigned long long)huge0,
         (unsigned long long)huge1);
  return 0;
}
