// SPDX-License-Identifier: MIT
/* tests/stats/report.c: the statistics people read (run by report.sh).
 *
 *   report usage   committed bytes are accounted for exactly: in use plus
 *                  each place unused memory sits plus metadata; the peak of
 *                  committed stays after a big free; bytes allocated count
 *                  small, large and huge blocks; a version-1 caller gets the
 *                  version-1 fields
 *   report hooks   hz_set_output takes hz_stats_print(NULL) and
 *                  malloc_stats(); hz_set_error takes a misuse report
 *                  (HAKOZUNA_CHECK=0); NULL gives stderr back
 *   report exit    leaves 3 blocks live, an output hook prints "HOOK:" lines
 *                  to stdout (the exit report with HAKOZUNA_STATS=1)
 *   report counts  0-byte blocks and remote frees are counted at once
 *   report none    allocates nothing (its exit report must say 0 blocks live)
 *   report info    malloc_info(0, stdout) after a known workload */
#include "check.h"
#include "hakozuna.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static hz_stats_t get(void) {
  hz_stats_t s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  CHECK(hz_stats_get(&s) == 0);
  return s;
}

static uint64_t unused_sum(const hz_stats_t *s) {
  return s->unused_in_spans + s->unused_stashed + s->unused_empty_spans + s->unused_span_cache + s->unused_huge_cache +
         s->unused_purge_backlog;
}

static void check_accounted(const char *when) {
  hz_stats_t s = get();
  uint64_t sum = s.bytes_in_use + unused_sum(&s) + s.metadata;
  CHECKF(sum == s.bytes_committed,
         "%s: committed %llu != in use %llu + unused %llu (spans %llu, empty %llu, cache %llu, huge %llu, "
         "backlog %llu) + metadata %llu",
         when, (unsigned long long)s.bytes_committed, (unsigned long long)s.bytes_in_use,
         (unsigned long long)unused_sum(&s), (unsigned long long)s.unused_in_spans,
         (unsigned long long)s.unused_empty_spans, (unsigned long long)s.unused_span_cache,
         (unsigned long long)s.unused_huge_cache, (unsigned long long)s.unused_purge_backlog,
         (unsigned long long)s.metadata);
  CHECKF(s.bytes_committed_peak >= s.bytes_committed, "%s: peak %llu < committed %llu", when,
         (unsigned long long)s.bytes_committed_peak, (unsigned long long)s.bytes_committed);
}

static void *blocks[4000];

static int usage(void) {
  /* Nothing returns memory behind the test's back. */
  CHECK(hz_option_set(HZ_OPTION_PURGE_THREAD, 0) == 0);
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, -1) == 0);
  hz_stats_t s0 = get();
  check_accounted("start");
  for (int i = 0; i < 4000; i++) blocks[i] = malloc(i % 2 ? 100 : 3000);
  void *large = malloc(200000), *huge = malloc(16 << 20);
  memset(huge, 1, 16 << 20);
  hz_stats_t s1 = get();
  check_accounted("after mallocs");
  uint64_t want = 2000 * (uint64_t)hz_good_size(100) + 2000 * (uint64_t)hz_good_size(3000) + 200000 + (16 << 20);
  CHECKF(s1.bytes_allocated - s0.bytes_allocated >= want, "allocated grew by %llu, want >= %llu",
         (unsigned long long)(s1.bytes_allocated - s0.bytes_allocated), (unsigned long long)want);
  CHECKF(s1.blocks_live - s0.blocks_live == 4002, "blocks_live grew by %llu, want 4002",
         (unsigned long long)(s1.blocks_live - s0.blocks_live));
  for (int i = 0; i < 4000; i += 2) free(blocks[i]); /* the 3000-byte ones: spans empty out */
  free(large);
  free(huge);
  hz_stats_t s2 = get();
  check_accounted("after frees");
  CHECKF(s2.unused_empty_spans + s2.unused_span_cache + s2.unused_purge_backlog > 0,
         "freed spans are nowhere: empty %llu, cache %llu, backlog %llu", (unsigned long long)s2.unused_empty_spans,
         (unsigned long long)s2.unused_span_cache, (unsigned long long)s2.unused_purge_backlog);
  CHECKF(s2.unused_huge_cache >= (16 << 20), "huge cache %llu", (unsigned long long)s2.unused_huge_cache);
  hz_collect(1); /* everything free goes back */
  hz_stats_t s3 = get();
  check_accounted("after hz_collect(1)");
  CHECKF(s3.unused_huge_cache == 0 && s3.unused_purge_backlog == 0 && s3.unused_span_cache == 0,
         "after collect: huge cache %llu, backlog %llu, span cache %llu", (unsigned long long)s3.unused_huge_cache,
         (unsigned long long)s3.unused_purge_backlog, (unsigned long long)s3.unused_span_cache);
  CHECKF(s3.bytes_committed_peak >= s1.bytes_committed && s3.bytes_committed < s1.bytes_committed,
         "peak %llu, committed at most %llu, now %llu", (unsigned long long)s3.bytes_committed_peak,
         (unsigned long long)s1.bytes_committed, (unsigned long long)s3.bytes_committed);
  CHECK(s3.blocks_live == s0.blocks_live + 2000);
  for (int i = 1; i < 4000; i += 2) free(blocks[i]);
  /* A caller built for version 1 passes its smaller size. */
  hz_stats_t v1;
  memset(&v1, 0xab, sizeof v1);
  v1.size = (uint32_t)offsetof(hz_stats_t, bytes_allocated);
  CHECK(hz_stats_get(&v1) == 0);
  CHECK(v1.version == 1 && v1.size == offsetof(hz_stats_t, bytes_allocated));
  CHECK(v1.bytes_allocated == 0xababababababababull); /* not written past its size */
  v1.size = 8;
  CHECK(hz_stats_get(&v1) == -1);
  /* The JSON has the bytes of each class and the new totals. */
  char json[16384];
  CHECK(hz_stats_json(json, sizeof json) < sizeof json);
  CHECK(strstr(json, "\"allocated_bytes\":") && strstr(json, "\"peak_bytes\":") &&
        strstr(json, "\"unused_purge_backlog\":") && strstr(json, "\"bytes_committed_peak\":"));
  return check_failed() ? 1 : 0;
}

static char got[65536];
static size_t got_len;
static int calls;
static void collect(const char *msg, void *arg) {
  CHECK(arg == (void *)got);
  size_t n = strlen(msg);
  if (got_len + n < sizeof got) memcpy(got + got_len, msg, n + 1), got_len += n;
  calls++;
}

static int hooks(void) {
  hz_set_output(collect, got);
  hz_stats_print(NULL);
  CHECKF(strstr(got, "statistics, pid") && strstr(got, "options: verbose=") && strstr(got, "committed, not in use:"),
         "output hook got: %.300s", got);
  CHECKF(strstr(got, "still live at exit") == NULL, "hz_stats_print is not the exit report");
  CHECK(calls > 5); /* a line per call */
  got_len = 0, got[0] = 0;
  void *huge[3] = {malloc(5 << 20), malloc(9 << 20), NULL}; /* 2 huge blocks live at once */
  free(huge[0]);
  free(huge[1]);
  huge[2] = malloc(3 << 20);
  malloc_stats();
  free(huge[2]);
  CHECKF(strstr(got, "statistics, pid"), "malloc_stats through the hook: %.200s", got);
  /* then glibc's totals, in its words (glibc's tst-malloc-stats-cancellation reads them) */
  const char *t = strstr(got, "Total (incl. mmap):\nsystem bytes     = ");
  unsigned long long sys = 0, used = 0, regions = 0, mapped = 0;
  CHECKF(t && sscanf(t, "Total (incl. mmap):\nsystem bytes     = %llu\nin use bytes     = %llu\n"
                        "max mmap regions = %llu\nmax mmap bytes   = %llu\n", &sys, &used, &regions, &mapped) == 4,
         "malloc_stats has no glibc totals: %.300s", t ? t : got + (got_len > 300 ? got_len - 300 : 0));
  CHECKF(sys >= used && used >= (3 << 20) && regions >= 2 && mapped >= (14 << 20),
         "glibc totals: system %llu, in use %llu, max mmap regions %llu, bytes %llu", sys, used, regions, mapped);
  hz_set_output(NULL, NULL);
  got_len = 0, got[0] = 0;
  hz_set_error(collect, got);
  char *p = malloc(64);
  free(p + 16); /* HAKOZUNA_CHECK=0: reported, not aborted */
  CHECKF(strstr(got, "hakozuna: free(): ") && got[strlen(got) - 1] == '\n', "error hook got: %.200s", got);
  hz_set_error(NULL, NULL);
  free(p);
  return check_failed() ? 1 : 0;
}

static uint64_t class_sum(const hz_stats_t *s, int remote) {
  uint64_t n = 0;
  for (uint32_t c = 0; c < s->class_count; c++) n += remote ? s->classes[c].remote_frees : s->classes[c].mallocs;
  return n;
}

/* Counting that differed between the builds (report.sh runs this on both):
 * the checked build's 0-byte blocks (slots of a segment of no access) were
 * not counted at all, and its remote frees only once they left the freeing
 * thread's quarantine, though live and frees counted them at once. */
static pthread_barrier_t bar;
static void *owner(void *arg) {
  for (int i = 0; i < 1000; i++) blocks[i] = malloc(48);
  pthread_barrier_wait(&bar); /* main frees them */
  pthread_barrier_wait(&bar); /* the owner lives until it has counted */
  return arg;
}

static int counts(void) {
  hz_stats_t a = get();
  for (int i = 0; i < 100; i++) blocks[i] = malloc(0);
  hz_stats_t b = get();
  CHECKF(b.blocks_live - a.blocks_live == 100 && class_sum(&b, 0) - class_sum(&a, 0) == 100,
         "100 malloc(0): blocks live %llu -> %llu, mallocs +%llu", (unsigned long long)a.blocks_live,
         (unsigned long long)b.blocks_live, (unsigned long long)(class_sum(&b, 0) - class_sum(&a, 0)));
  for (int i = 0; i < 100; i++) free(blocks[i]);
  hz_stats_t c = get();
  CHECKF(c.blocks_live == a.blocks_live, "the 100 freed: blocks live %llu, %llu before",
         (unsigned long long)c.blocks_live, (unsigned long long)a.blocks_live);
  pthread_t th;
  pthread_barrier_init(&bar, NULL, 2);
  if (!CHECK(pthread_create(&th, NULL, owner, NULL) == 0)) return 1;
  pthread_barrier_wait(&bar);
  hz_stats_t d = get();
  for (int i = 0; i < 1000; i++) free(blocks[i]);
  hz_stats_t e = get();
  CHECKF(class_sum(&e, 1) - class_sum(&d, 1) == 1000 && d.blocks_live - e.blocks_live == 1000,
         "1000 blocks freed by main, their owner alive: remote frees +%llu, blocks live %llu -> %llu",
         (unsigned long long)(class_sum(&e, 1) - class_sum(&d, 1)), (unsigned long long)d.blocks_live,
         (unsigned long long)e.blocks_live);
  pthread_barrier_wait(&bar);
  pthread_join(th, NULL);
  return check_failed() ? 1 : 0;
}

static void to_stdout(const char *msg, void *arg) {
  (void)arg;
  printf("HOOK:%s", msg);
  fflush(stdout);
}

TEST_MAIN() {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "usage") == 0) return usage();
  if (strcmp(mode, "hooks") == 0) return hooks();
  if (strcmp(mode, "counts") == 0) return counts();
  if (strcmp(mode, "exit") == 0) {
    hz_set_output(to_stdout, NULL);
    for (int i = 0; i < 3; i++) blocks[i] = malloc(40);
    return 0;
  }
  if (strcmp(mode, "none") == 0) return 0; /* allocates nothing (the report's own memory is not counted) */
  if (strcmp(mode, "info") == 0) {
    for (int i = 0; i < 1000; i++) blocks[i] = malloc(200);
    for (int i = 0; i < 1000; i += 2) free(blocks[i]);
    blocks[1000] = malloc(32 << 20);
    return malloc_info(0, stdout) == 0 ? 0 : 1;
  }
  fprintf(stderr, "usage: report usage|hooks|counts|exit|none|info\n");
  return 2;
}
