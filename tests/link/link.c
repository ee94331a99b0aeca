// SPDX-License-Identifier: MIT
/* tests/link/link.c: hakozuna linked in instead of preloaded. Built four
 * ways: -lhakozuna (shared), with libhakozuna.a, with the single object
 * hakozuna.o, and -static with hakozuna.o. In each, malloc (also malloc
 * called inside libc) must be hakozuna's: hz_usable_size accepts its blocks
 * (it aborts on a block that is not hakozuna's) and the statistics count
 * them. */
#define CHECK_NO_TARGET /* dlsym is not for static programs; checked here */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <pthread.h>
#include <stdint.h>

static uint64_t total_mallocs(void) {
  hz_stats_t s;
  memset(&s, 0, sizeof s);
  s.version = HZ_STATS_VERSION;
  s.size = sizeof s;
  if (!CHECK(hz_stats_get(&s) == 0)) return 0;
  uint64_t n = s.large_allocs + s.huge_allocs;
  for (uint32_t i = 0; i < s.class_count && i < HZ_STATS_MAX_CLASSES; i++)
    n += s.classes[i].mallocs;
  return n;
}

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    void *p = malloc((size_t)i * 64);
    CHECK(p && hz_usable_size(p) == malloc_usable_size(p));
    free(p);
  }
  return NULL;
}

TEST_MAIN() {
  static const size_t sizes[] = {1, 100, 20 * KiB, 300 * KiB, 16 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = malloc(sizes[i]);
    if (!CHECK(p)) continue;
    CHECKF(hz_usable_size(p) == malloc_usable_size(p) &&
           hz_usable_size(p) >= sizes[i], "malloc(%zu): hz_usable_size %zu, "
           "malloc_usable_size %zu", sizes[i], hz_usable_size(p),
           malloc_usable_size(p));
    p = realloc(p, sizes[i] * 2);
    CHECK(p && hz_usable_size(p) >= sizes[i] * 2);
    hz_free(p);
    p = hz_malloc(sizes[i]);
    free(p); /* and the other way round */
  }
  /* Blocks that libc allocates for itself. */
  char *s = strdup("static");
  CHECK(s && hz_usable_size(s) >= 7);
  free(s);
  FILE *f = fopen("/proc/self/maps", "r");
  if (CHECK(f)) {
    char *line = NULL;
    size_t cap = 0;
    CHECK(getline(&line, &cap, f) > 0 && hz_usable_size(line) >= cap);
    free(line);
    fclose(f);
  }
  /* The statistics see malloc calls. */
  uint64_t before = total_mallocs();
  void *b[1000];
  for (int i = 0; i < 1000; i++) b[i] = malloc(64);
  uint64_t after = total_mallocs();
  CHECKF(after >= before + 1000, "hakozuna counted %llu mallocs of 1000",
         (unsigned long long)(after - before));
  for (int i = 0; i < 1000; i++) free(b[i]);
  pthread_t th;
  if (CHECK(pthread_create(&th, NULL, worker, NULL) == 0))
    CHECK(pthread_join(th, NULL) == 0);
  return 0;
}
