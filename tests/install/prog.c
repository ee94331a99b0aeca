// SPDX-License-Identifier: MIT
/* Built against an installed hakozuna by tests/install/run.sh. Checks that
 * malloc in this program is hakozuna's: the blocks it hands out are counted
 * in hz_stats_get and hz_usable_size knows them. Built with -DHZ_PROBE it is
 * not linked with hakozuna and finds the hz_ functions with dlsym, to tell
 * whether the launcher preloaded the library. Prints one line, exits 0 if so. */
#include <hakozuna.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HZ_PROBE
#include <dlfcn.h>
static int (*stats_get)(hz_stats_t *);
static size_t (*usable_size)(const void *);
static int bind_hz(void) {
  stats_get = (int (*)(hz_stats_t *))dlsym(RTLD_DEFAULT, "hz_stats_get");
  usable_size = (size_t(*)(const void *))dlsym(RTLD_DEFAULT, "hz_usable_size");
  return stats_get && usable_size;
}
#else
#define stats_get hz_stats_get
#define usable_size hz_usable_size
static int bind_hz(void) { return 1; }
#endif

enum { N = 10000, SIZE = 48 };

static uint64_t total_mallocs(void) {
  static hz_stats_t st; /* large: keep it off the stack */
  memset(&st, 0, sizeof st);
  st.size = sizeof st;
  if (stats_get(&st) != 0 || st.version != HZ_STATS_VERSION) {
    printf("FAIL: hz_stats_get failed (version %u)\n", st.version);
    exit(1);
  }
  uint64_t n = st.large_allocs + st.huge_allocs;
  for (uint32_t i = 0; i < st.class_count && i < HZ_STATS_MAX_CLASSES; i++)
    n += st.classes[i].mallocs;
  return n;
}

int main(void) {
  if (!bind_hz()) {
    printf("FAIL: hakozuna is not loaded\n");
    return 1;
  }
  static void *blocks[N];
  uint64_t before = total_mallocs();
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(SIZE);
    if (!blocks[i]) {
      printf("FAIL: malloc returned NULL\n");
      return 1;
    }
    memset(blocks[i], i & 0xff, SIZE);
  }
  uint64_t counted = total_mallocs() - before;
  size_t usable = usable_size(blocks[N / 2]);
  for (int i = 0; i < N; i++) free(blocks[i]);
  if (counted < N || usable < SIZE) {
    printf("FAIL: malloc is not hakozuna's (%llu of %d mallocs counted, usable size %zu)\n",
           (unsigned long long)counted, N, usable);
    return 1;
  }
  printf("hakozuna %d.%d.%d OK: %llu mallocs counted, usable size %zu\n", HZ_VERSION_MAJOR,
         HZ_VERSION_MINOR, HZ_VERSION_PATCH, (unsigned long long)counted, usable);
  return 0;
}
