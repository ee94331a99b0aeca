// SPDX-License-Identifier: MIT
/* tests/heap/maps.c: large blocks when the process runs out of mappings.
 *
 * The checked build puts an inaccessible guard page after each large block
 * and closes freed large spans (mprotect): each splits a mapping, and a
 * process has vm.max_map_count of them. This test keeps enough large blocks
 * live to use them all, then frees a third and allocates again, for a few
 * rounds, with small blocks coming and going in between: every malloc must
 * return a block whose first and last bytes can be written (a span handed
 * out still closed crashed on the allocator's own first write to it), and
 * none may fail: guards stop short of the limit (heap.c,
 * hz_heap_guard_may_split). Before, mprotect failed at the limit, and
 * mallocs (small ones too) returned NULL for spans that could not be opened
 * again. Then everything is freed and large blocks must be served again. */
#include "check.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

/* Large blocks of 33,000 to 233,000 bytes: spans of 2 to 8 slices with a
 * guard page each, which the pool splits and joins as they come and go. */
#define MIN_SIZE 33000
#define SIZES 200000

static long max_map_count(void) {
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  long n = 0;
  if (f == NULL) return 65530;
  if (fscanf(f, "%ld", &n) != 1) n = 65530;
  fclose(f);
  return n;
}

/* Malloc's answer: a writable block, or NULL for lack of mappings. */
static char *take(size_t size, long *nulls) {
  errno = 0;
  char *p = malloc(size);
  if (p == NULL) {
    CHECKF(errno == ENOMEM, "malloc(%zu) returned NULL with errno %d", size, errno);
    ++*nulls;
    return NULL;
  }
  p[0] = 1;
  p[size - 1] = 2;
  return p;
}

TEST_MAIN() {
  long maps = max_map_count();
  if (maps > 300000) {
    printf("SKIP vm.max_map_count is %ld: the blocks to use them all would not fit this test\n", maps);
    exit(77); /* tests/run.sh: skipped */
  }
  long n = maps / 2 + 4000, nulls = 0, served = 0, small_nulls = 0;
  char **p = calloc((size_t)n, sizeof *p);
  size_t *size = calloc((size_t)n, sizeof *size);
  enum { SMALL = 4096 };
  static char *small[SMALL];
  CHECK(p != NULL && size != NULL);
  if (p == NULL || size == NULL) return 1;
  uint64_t seed = 1;
  for (int round = 0; round < 6; round++) {
    for (long i = 0; i < n; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      if (p[i] != NULL && (seed >> 33) % 3 == 0) {
        CHECK(p[i][0] == 1 && p[i][size[i] - 1] == 2);
        free(p[i]);
        p[i] = NULL;
      } else if (p[i] == NULL) {
        size[i] = MIN_SIZE + (seed >> 40) % SIZES;
        if ((p[i] = take(size[i], &nulls)) != NULL) served++;
      }
      size_t k = (seed >> 20) % SMALL; /* small blocks of 16 B - 16 KiB: new spans of every class */
      free(small[k]);
      small[k] = take(16 + (seed >> 44) % 16384, &small_nulls);
    }
  }
  printf("%ld blocks served, %ld refused for lack of mappings, %ld small ones refused (vm.max_map_count %ld)\n",
         served, nulls, small_nulls, maps);
  CHECKF(nulls == 0 && small_nulls == 0, "%ld large and %ld small mallocs failed with memory to spare", nulls,
         small_nulls);
  for (int i = 0; i < SMALL; i++) free(small[i]);
  for (long i = 0; i < n; i++) free(p[i]);
  free(p);
  free(size);
  /* With the blocks gone, so are their guard pages: large blocks again. */
  long after = 0;
  for (int i = 0; i < 64; i++) free(take(MIN_SIZE + (size_t)i * 3000, &after));
  CHECKF(after == 0, "%ld of 64 large blocks refused after everything was freed", after);
  return 0;
}
