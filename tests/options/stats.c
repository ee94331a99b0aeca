// SPDX-License-Identifier: MIT
/* tests/options/stats.c: statistics through the header API.
 *
 *   stats        counters move as the program allocates; hz_stats_print and
 *                hz_stats_json produce text; malloc_trim(0) after freeing a
 *                large working set lowers bytes_committed; blocks freed by
 *                another thread count as freed the moment they are
 *   stats json   print hz_stats_json's text (env.sh parses it as JSON) */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#ifndef _WIN32
#include <sys/mman.h>
#endif

static hz_stats_t get(void) {
  hz_stats_t s;
  memset(&s, 0xff, sizeof s);
  s.version = HZ_STATS_VERSION;
  s.size = sizeof s;
  CHECK(hz_stats_get(&s) == 0);
  CHECK(s.class_count > 0 && s.class_count <= HZ_STATS_MAX_CLASSES);
  return s;
}

/* The row of the class that serves n-byte requests, or NULL. */
static const hz_class_stats_t *row(const hz_stats_t *s, size_t n) {
  size_t g = hz_good_size(n);
  for (uint32_t i = 0; i < s->class_count; i++)
    if (s->classes[i].block_size == g) return &s->classes[i];
  return NULL;
}

static uint64_t sum(const hz_stats_t *s, size_t field) {
  uint64_t t = 0;
  for (uint32_t i = 0; i < s->class_count; i++)
    t += *(const uint64_t *)((const char *)&s->classes[i] + field);
  return t;
}
#define SUM(s, f) sum(&(s), offsetof(hz_class_stats_t, f))

enum { N = 1000 };
static void *blocks[N];
static pthread_barrier_t bar;

static void *owner(void *arg) {
  (void)arg;
  for (int i = 0; i < N; i++) blocks[i] = malloc(48);
  pthread_barrier_wait(&bar); /* main takes stats and frees them */
  pthread_barrier_wait(&bar); /* stay alive (the owner) until it has */
  return NULL;
}

static void test_counters(void) {
  hz_stats_t s0 = get();
  CHECK(s0.version == HZ_STATS_VERSION);
  CHECK(s0.thread_count >= 1);
  CHECK(s0.bytes_reserved >= s0.bytes_committed);
  CHECK(s0.segments >= 1 && s0.mmap_calls >= 1);
  CHECK(s0.peak_rss > 0);
  for (uint32_t i = 1; i < s0.class_count; i++)
    CHECKF(s0.classes[i].block_size == 0 ||
           s0.classes[i].block_size > s0.classes[i - 1].block_size,
           "class %u size %zu after %zu", i, s0.classes[i].block_size,
           s0.classes[i - 1].block_size);
  if (!CHECKF(row(&s0, 48) != NULL, "no class row for 48-byte blocks "
              "(hz_good_size %zu)", hz_good_size(48)))
    return;

  /* Small blocks: mallocs, live, frees. */
  void *b[N];
  for (int i = 0; i < N; i++) b[i] = malloc(48);
  hz_stats_t s1 = get();
  CHECKF(SUM(s1, mallocs) >= SUM(s0, mallocs) + N, "mallocs %llu -> %llu",
         (unsigned long long)SUM(s0, mallocs), (unsigned long long)SUM(s1, mallocs));
  CHECKF(row(&s1, 48)->live >= row(&s0, 48)->live + N, "live 48-byte blocks "
         "%llu -> %llu", (unsigned long long)row(&s0, 48)->live,
         (unsigned long long)row(&s1, 48)->live);
  CHECK(s1.bytes_in_use >= s0.bytes_in_use);
  for (int i = 0; i < N; i++) free(b[i]);
  hz_stats_t s2 = get();
  CHECKF(SUM(s2, frees) >= SUM(s1, frees) + N, "frees %llu -> %llu",
         (unsigned long long)SUM(s1, frees), (unsigned long long)SUM(s2, frees));
  CHECK(row(&s2, 48)->live + N <= row(&s1, 48)->live);

  /* Huge blocks. */
  void *h = malloc(16 * MiB);
  hz_stats_t s3 = get();
  CHECK(s3.huge_allocs == s2.huge_allocs + 1);
  CHECK(s3.huge_live_bytes >= s2.huge_live_bytes + 16 * MiB);
  free(h);
  hz_stats_t s4 = get();
  CHECK(s4.huge_frees == s3.huge_frees + 1);
  CHECK(s4.huge_live_bytes + 16 * MiB <= s3.huge_live_bytes);

  /* A 200 KiB block shows somewhere: in a class row or as large. */
  void *l = malloc(200 * KiB);
  hz_stats_t s5 = get();
  CHECK(SUM(s5, mallocs) + s5.large_allocs + s5.huge_allocs >
        SUM(s4, mallocs) + s4.large_allocs + s4.huge_allocs);
  free(l);

  /* Frees by a thread other than the owner are remote frees; another live
   * thread cache shows in thread_count. */
  pthread_t th;
  pthread_barrier_init(&bar, NULL, 2);
  if (!CHECK(pthread_create(&th, NULL, owner, NULL) == 0)) return;
  pthread_barrier_wait(&bar);
  hz_stats_t s6 = get();
  CHECKF(s6.thread_count >= 2, "thread_count %u with two threads allocating",
         s6.thread_count);
  for (int i = 0; i < N; i++) free(blocks[i]);
  hz_stats_t s7 = get();
  CHECKF(SUM(s7, remote_frees) >= SUM(s6, remote_frees) + N, "remote_frees "
         "%llu -> %llu after freeing %d blocks of another thread",
         (unsigned long long)SUM(s6, remote_frees),
         (unsigned long long)SUM(s7, remote_frees), N);
  pthread_barrier_wait(&bar);
  CHECK(pthread_join(th, NULL) == 0);
  pthread_barrier_destroy(&bar);
}

/* A thread that frees and then makes no call keeps nothing for long: its
 * span cache goes back within a few purge delays (100 ms), by the purge
 * thread, which starts in a program that has started a thread of its own
 * (HAKOZUNA_PURGE_THREAD=1: purge/single has the single-threaded case).
 * Polls for up to 10 s (the machine may be loaded). */
static void *nothing(void *arg) { return arg; }

static void test_idle(void) {
  enum { M = 64 };
  static void *b[M];
  pthread_t th;
  if (CHECK(pthread_create(&th, NULL, nothing, NULL) == 0)) pthread_join(th, NULL);
  malloc_trim(0);
  hz_stats_t s0 = get();
  for (int i = 0; i < M; i++) {
    b[i] = malloc(64 * KiB);
    if (CHECK(b[i])) memset(b[i], 1, 64 * KiB);
  }
  hz_stats_t s1 = get();
  for (int i = 0; i < M; i++) free(b[i]);
  uint64_t limit = s0.bytes_committed + 1 * MiB, now = s1.bytes_committed;
  for (int t = 0; t < 200 && now > limit; t++) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    hz_stats_t s = {.version = HZ_STATS_VERSION, .size = sizeof s};
    hz_stats_get(&s);
    now = s.bytes_committed;
  }
  CHECKF(now <= limit, "bytes_committed %llu KiB, %llu KiB with 4 MiB live, still %llu KiB 10 s after freeing it",
         (unsigned long long)s0.bytes_committed / 1024, (unsigned long long)s1.bytes_committed / 1024,
         (unsigned long long)now / 1024);
}

/* Blocks freed by another thread count as freed at once, while they still
 * wait in the freeing thread's outbox or the owner's inbox: live, frees and
 * remote_frees agree at every moment (issue: live 8, frees 992,
 * remote_frees 1000 until hz_collect). Large blocks likewise. */
enum { R = 1000, R_SIZE = 1500, R_LARGE = 40 };
static void *rblocks[R], *rlarge[R_LARGE];

/* The owner's side of the exact check below hands over through an atomic,
 * not a barrier: it must make no allocator call while main reads the
 * figures, and a barrier's own code may (winpthreads': 1 run in 40 saw a
 * 32-byte block appear in use between two counters). */
static _Atomic int remote_phase;
static void phase_wait(int want) {
  while (atomic_load(&remote_phase) != want) sched_yield();
}

static void *remote_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < R; i++) rblocks[i] = malloc(R_SIZE);
  for (int i = 0; i < R_LARGE; i++) rlarge[i] = malloc(100 * KiB);
  atomic_store(&remote_phase, 1); /* main frees them */
  phase_wait(2);                  /* main reads stats while we live */
  return NULL;
}

static void check_remote(const hz_stats_t *a, const hz_stats_t *b, const char *when) {
  const hz_class_stats_t *ra = row(a, R_SIZE), *rb = row(b, R_SIZE);
  if (!CHECK(ra && rb)) return;
  CHECKF(rb->mallocs - ra->mallocs == R && rb->frees - ra->frees == R &&
             rb->remote_frees - ra->remote_frees == R && rb->live == ra->live,
         "%s: %d blocks of %d bytes malloced by a thread, freed by main: mallocs +%llu, "
         "frees +%llu, remote_frees +%llu, live %llu -> %llu",
         when, R, R_SIZE, (unsigned long long)(rb->mallocs - ra->mallocs),
         (unsigned long long)(rb->frees - ra->frees),
         (unsigned long long)(rb->remote_frees - ra->remote_frees),
         (unsigned long long)ra->live, (unsigned long long)rb->live);
  CHECKF(b->large_allocs - a->large_allocs == R_LARGE &&
             b->large_frees - a->large_frees == R_LARGE &&
             b->large_live_bytes == a->large_live_bytes,
         "%s: %d large blocks freed remotely: allocs +%llu, frees +%llu, live bytes "
         "%llu -> %llu", when, R_LARGE, (unsigned long long)(b->large_allocs - a->large_allocs),
         (unsigned long long)(b->large_frees - a->large_frees),
         (unsigned long long)a->large_live_bytes, (unsigned long long)b->large_live_bytes);
}

static void test_remote_counts(void) {
  long delay = hz_option_get(HZ_OPTION_PURGE_DELAY);
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, -1) == 0); /* nothing returned behind our back */
  free(malloc(R_SIZE)); /* this thread's heap exists */
  free(malloc(100 * KiB));
  hz_stats_t s0 = get();
  pthread_t th;
  atomic_store(&remote_phase, 0);
  if (!CHECK(pthread_create(&th, NULL, remote_owner, NULL) == 0)) return;
  phase_wait(1);
  for (int i = 0; i < R; i++) free(rblocks[i]);
  for (int i = 0; i < R_LARGE; i++) free(rlarge[i]);
  hz_stats_t s1 = get();
  check_remote(&s0, &s1, "owner alive");
  /* the blocks on their way back are unused room in spans: committed memory
   * stays accounted for exactly */
  uint64_t parts = s1.bytes_in_use + s1.unused_in_spans + s1.unused_stashed + s1.unused_empty_spans + s1.unused_span_cache +
                   s1.unused_huge_cache + s1.unused_purge_backlog + s1.metadata;
  CHECKF(parts == s1.bytes_committed, "committed %llu, in use + unused + metadata %llu",
         (unsigned long long)s1.bytes_committed, (unsigned long long)parts);
  atomic_store(&remote_phase, 2);
  CHECK(pthread_join(th, NULL) == 0);
  hz_stats_t s2 = get();
  check_remote(&s0, &s2, "owner exited");
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, delay) == 0);
}

/* A thread's blocks, freed by main after it exited, then collected: the
 * peak read after each step never goes down (it did at each of these steps:
 * the first reads took statm's resident set, above getrusage's peak). */
static void *peak_blocks[10100];
static void *peak_alloc(void *arg) {
  for (int i = 0; i < 10000; i++) peak_blocks[i] = malloc(64);
  for (int i = 0; i < 100; i++) peak_blocks[10000 + i] = malloc(50000);
  return arg;
}

static void test_peak_kept(void) {
  pthread_t th;
  if (!CHECK(pthread_create(&th, NULL, peak_alloc, NULL) == 0)) return;
  pthread_join(th, NULL);
  hz_stats_t a = get();
  for (int i = 0; i < 10100; i++) free(peak_blocks[i]);
  hz_stats_t b = get();
  hz_collect(1);
  hz_stats_t c = get();
  CHECKF(a.peak_rss <= b.peak_rss && b.peak_rss <= c.peak_rss, "peak rss %llu, %llu, %llu KiB",
         (unsigned long long)a.peak_rss / 1024, (unsigned long long)b.peak_rss / 1024,
         (unsigned long long)c.peak_rss / 1024);
}

#ifndef _WIN32 /* (the grower maps memory with mmap) */
/* RSS "now" is never above "peak", even while another thread makes the
 * resident set grow between the two readings. */
static volatile int rss_stop;

static void *rss_grower(void *arg) {
  (void)arg;
  char *m = mmap(NULL, 256 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  for (size_t off = 0; off < 256 * MiB && !rss_stop; off += 4096) m[off] = 1;
  munmap(m, 256 * MiB);
  return NULL;
}

static void test_rss(void) {
  pthread_t th;
  rss_stop = 0;
  if (!CHECK(pthread_create(&th, NULL, rss_grower, NULL) == 0)) return;
  int bad = 0;
  uint64_t peak = 0;
  for (int i = 0; i < 3000 && !bad; i++) {
    hz_stats_t s = get();
    bad = !CHECKF(s.current_rss <= s.peak_rss, "rss %llu KiB now, %llu KiB peak",
                  (unsigned long long)s.current_rss / 1024, (unsigned long long)s.peak_rss / 1024);
    /* (the peak came from getrusage, now from statm, which can be ahead:
     * it went down from one read to the next) */
    bad = bad || !CHECKF(s.peak_rss >= peak, "read %d: peak rss %llu KiB, %llu KiB before", i,
                         (unsigned long long)s.peak_rss / 1024, (unsigned long long)peak / 1024);
    peak = s.peak_rss;
  }
  rss_stop = 1;
  pthread_join(th, NULL);
}
#endif

/* Counters read while other threads allocate and free each other's blocks
 * are a snapshot, but a consistent one: in every class, remote frees are
 * frees, and frees are mallocs (an exit report once showed remote frees >
 * frees); and no count is absurd (a span read while its owner changed it
 * counted 2^30 blocks live: a class showed 2 GB live in 200 MB committed,
 * and the unused bytes were near 2^64). Two producers hand blocks to two
 * consumers through a ring; main reads the statistics throughout. */
enum { SNAP_SLOTS = 4096, SNAP_OPS = 400000 };
static void *_Atomic snap_ring[SNAP_SLOTS];
static _Atomic int snap_done, snap_finished;

static void *snap_producer(void *arg) {
  unsigned x = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < SNAP_OPS; i++) {
    x = x * 1103515245u + 12345u;
    void *p = malloc(16 + (x >> 16) % 600), *old;
    if (!p) abort();
    old = atomic_exchange(&snap_ring[(x >> 4) % SNAP_SLOTS], p);
    if (old) free(old); /* (another producer's block, or its own) */
  }
  atomic_fetch_add(&snap_finished, 1);
  return NULL;
}

static void *snap_consumer(void *arg) {
  unsigned x = (unsigned)(uintptr_t)arg;
  while (!atomic_load(&snap_done)) {
    x = x * 1103515245u + 12345u;
    void *old = atomic_exchange(&snap_ring[(x >> 4) % SNAP_SLOTS], NULL);
    if (old) free(old);
  }
  return NULL;
}

/* No count of a snapshot is absurd. */
static int sane(const hz_stats_t *s, const hz_class_stats_t *r, int read) {
  uint64_t bound = s->bytes_committed + 64 * MiB; /* (committed may have shrunk since) */
  return CHECKF(r->live * r->block_size <= bound && s->unused_in_spans <= bound,
                "read %d: %llu blocks of %llu bytes live, %llu bytes unused in spans, %llu committed", read,
                (unsigned long long)r->live, (unsigned long long)r->block_size,
                (unsigned long long)s->unused_in_spans, (unsigned long long)s->bytes_committed);
}

/* Threads that keep a few blocks of 1-1024 bytes, replacing them, and swap
 * some with each other: their spans fill up and leave their class list, and
 * a block back lists them again, the count and the flag changing under
 * main's reads (the 2^30 above: 128 of 622,009 reads before the fix). */
static void *_Atomic mix_ring[1024];
static void *snap_mixer(void *arg) {
  unsigned x = (unsigned)(uintptr_t)arg * 7919u;
  void *own[128] = {0};
  while (!atomic_load(&snap_done)) {
    x = x * 1103515245u + 12345u;
    int k = (x >> 5) % 128;
    free(own[k]);
    own[k] = malloc(1 + (x >> 12) % 1024);
    own[k] = atomic_exchange(&mix_ring[(x >> 9) % 1024], own[k]);
  }
  for (int k = 0; k < 128; k++) free(own[k]);
  return NULL;
}

static void test_snapshot_mix(void) {
  enum { MIXERS = 3 };
  pthread_t mix[MIXERS];
  atomic_store(&snap_done, 0);
  for (int i = 0; i < MIXERS; i++)
    if (!CHECK(pthread_create(&mix[i], NULL, snap_mixer, (void *)(uintptr_t)(i + 1)) == 0)) return;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int bad = 0, reads = 0;
  for (double dt = 0; dt < 1.5 && !bad; reads++) {
    hz_stats_t s = get();
    for (uint32_t c = 0; c < s.class_count && !bad; c++) bad = !sane(&s, &s.classes[c], reads);
    clock_gettime(CLOCK_MONOTONIC, &t);
    dt = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
  }
  atomic_store(&snap_done, 1);
  for (int i = 0; i < MIXERS; i++) pthread_join(mix[i], NULL);
  for (int i = 0; i < 1024; i++) free(atomic_exchange(&mix_ring[i], NULL));
}

/* A class's mallocs never go back, read while threads allocate: they are
 * a count minus a countdown (sample_left) that restarts every 65,536 mallocs
 * of a class, or at each sampled one while the profiler runs, and a read
 * across a restart counted one without the other (2^64 - 45,536 once, in
 * an outside user's run; a step back of up to a gap). The profiler, on at
 * a rate that samples about every 1,000th 48-byte block, makes restarts
 * frequent; each sampled malloc is then counted as a large one instead (a
 * step back of one while it is made), so steps of up to 8 are allowed. */
static void *mono_worker(void *arg) {
  (void)arg;
  void *p[64] = {0};
  for (unsigned i = 0; !atomic_load(&snap_done); i++) {
    free(p[i % 64]);
    p[i % 64] = malloc(48);
  }
  for (int k = 0; k < 64; k++) free(p[k]);
  return NULL;
}

static void test_snapshot_monotonic(void) {
  long rate = hz_option_get(HZ_OPTION_PROFILE_RATE), on = hz_option_get(HZ_OPTION_PROFILE);
  CHECK(hz_option_set(HZ_OPTION_PROFILE_RATE, 48 * 1000) == 0 && hz_option_set(HZ_OPTION_PROFILE, 1) == 0);
  enum { WORKERS = 2 };
  pthread_t w[WORKERS];
  atomic_store(&snap_done, 0);
  for (int i = 0; i < WORKERS; i++)
    if (!CHECK(pthread_create(&w[i], NULL, mono_worker, NULL) == 0)) return;
  static uint64_t last[HZ_STATS_MAX_CLASSES];
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int bad = 0, reads = 0;
  for (double dt = 0; dt < 1.5 && !bad; reads++) {
    hz_stats_t s = get();
    for (uint32_t c = 0; c < s.class_count && !bad; c++) {
      uint64_t m = s.classes[c].mallocs;
      bad = !CHECKF(m + 8 >= last[c] && m < ((uint64_t)1 << 40),
                    "read %d, %llu-byte class: mallocs %llu after %llu", reads,
                    (unsigned long long)s.classes[c].block_size, (unsigned long long)m, (unsigned long long)last[c]);
      if (m > last[c]) last[c] = m;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    dt = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
  }
  atomic_store(&snap_done, 1);
  for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
  hz_option_set(HZ_OPTION_PROFILE, on);
  hz_option_set(HZ_OPTION_PROFILE_RATE, rate);
}

static void test_snapshot(void) {
  pthread_t prod[2], cons[2];
  atomic_store(&snap_done, 0);
  atomic_store(&snap_finished, 0);
  for (int i = 0; i < 2; i++) {
    if (!CHECK(pthread_create(&prod[i], NULL, snap_producer, (void *)(uintptr_t)(i + 1)) == 0)) return;
    if (!CHECK(pthread_create(&cons[i], NULL, snap_consumer, (void *)(uintptr_t)(i + 7)) == 0)) return;
  }
  int bad = 0, reads = 0;
  for (; atomic_load(&snap_finished) < 2 && !bad; reads++) {
    hz_stats_t s = get();
    for (uint32_t c = 0; c < s.class_count && !bad; c++) {
      const hz_class_stats_t *r = &s.classes[c];
      bad = !CHECKF(r->remote_frees <= r->frees && r->frees <= r->mallocs && r->live == r->mallocs - r->frees,
                    "read %d, %llu-byte class: mallocs %llu, frees %llu, remote_frees %llu, live %llu", reads,
                    (unsigned long long)r->block_size, (unsigned long long)r->mallocs,
                    (unsigned long long)r->frees, (unsigned long long)r->remote_frees,
                    (unsigned long long)r->live);
      bad = bad || !sane(&s, r, reads);
    }
  }
  atomic_store(&snap_done, 1);
  for (int i = 0; i < 2; i++) pthread_join(prod[i], NULL), pthread_join(cons[i], NULL);
  for (int i = 0; i < SNAP_SLOTS; i++) free(atomic_exchange(&snap_ring[i], NULL));
}

/* Free a large working set; malloc_trim(0) returns and bytes_committed
 * drops by at least half of it. */
static void test_trim(void) {
  enum { M = 2048 };
  static void *b[M];
  for (int i = 0; i < M; i++) { /* 2048 * 64 KiB = 128 MiB, mixed sizes */
    size_t n = i % 4 == 0 ? 256 * KiB - 100 : i % 4 == 1 ? 1000 : 21 * KiB;
    b[i] = malloc(n);
    if (CHECK(b[i])) memset(b[i], 1, n);
  }
  hz_stats_t s1 = get();
  for (int i = 0; i < M; i++) free(b[i]);
  int t = malloc_trim(0);
  CHECK(t == 0 || t == 1);
  hz_stats_t s2 = get();
  CHECKF(s2.bytes_committed + 64 * MiB <= s1.bytes_committed, "bytes_committed "
         "%llu KiB with 140 MiB live, %llu KiB after freeing it and malloc_trim(0)",
         (unsigned long long)s1.bytes_committed / 1024,
         (unsigned long long)s2.bytes_committed / 1024);
  CHECK(s2.bytes_returned > s1.bytes_returned);
}

static void test_text(void) {
  /* hz_stats_print into a file, read back. */
  FILE *f = tmpfile();
  if (CHECK(f)) {
    hz_stats_print(f);
    long n = ftell(f);
    CHECK(n > 0);
    rewind(f);
    char *buf = calloc(1, (size_t)n + 1);
    CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    CHECKF(strstr(buf, "hakozuna") != NULL, "hz_stats_print: \"%.200s\"", buf);
    free(buf);
    fclose(f);
  }
  /* hz_stats_json measures like snprintf and truncates with a NUL. */
  size_t need = hz_stats_json(NULL, 0);
  CHECK(need > 2);
  char *j = malloc(need + 256);
  if (!CHECK(j)) return;
  size_t got = hz_stats_json(j, need + 256); /* numbers may have changed */
  CHECKF(got < need + 256 && strlen(j) == got && j[0] == '{',
         "hz_stats_json: %zu then %zu bytes, strlen %zu", need, got, strlen(j));
  char small[16];
  memset(small, 'x', sizeof small);
  size_t full = hz_stats_json(small, sizeof small);
  CHECK(full > sizeof small && small[15] == 0 && strlen(small) == 15);
  free(j);
}

TEST_MAIN() {
  if (argc == 2 && strcmp(argv[1], "json") == 0) {
    char *buf = NULL;
    size_t n = hz_stats_json(NULL, 0);
    for (int i = 0; i < 4; i++) { /* the text may grow while allocating */
      free(buf);
      buf = malloc(n + 4096);
      if (!CHECK(buf)) return 1;
      size_t m = hz_stats_json(buf, n + 4096);
      if (m < n + 4096) break;
      n = m;
    }
    fputs(buf, stdout);
    free(buf);
    return 0;
  }
  test_peak_kept(); /* (first: while the peak is the present) */
  test_idle();
  test_counters();
  test_remote_counts();
  test_snapshot();
  test_snapshot_mix();
  test_snapshot_monotonic();
#ifndef _WIN32
  test_rss();
#endif
  test_trim();
  test_text();
  return 0;
}
