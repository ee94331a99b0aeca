// SPDX-License-Identifier: MIT
/* tests/purge/mlock.c: calloc returns zeroed memory in a process that
 * locked its memory (mlockall).
 *
 * Returned pages read back as zero (MADV_DONTNEED), so calloc does not clear
 * memory it knows was returned. Locked pages cannot be dropped: madvise
 * fails with EINVAL and the pages keep what they held. calloc handed out
 * blocks of the 0xff bytes written before the free (1,015 of them in a
 * helper's run). The purge now clears what it cannot return (os.c). For
 * each size, from small blocks to huge ones: blocks are filled with 0xff
 * and freed, malloc_trim(0) returns all free memory (the pool, spans' free
 * pages, cached huge blocks), and as many callocs must read all zero. Skipped
 * where mlockall is not allowed. */
#include "check.h"

#include <errno.h>
#include <sys/mman.h>

static long nonzero_callocs(size_t size, int count) {
  unsigned char **v = malloc(sizeof *v * (size_t)count);
  long bad = 0;
  if (!CHECK(v != NULL)) return -1;
  for (int i = 0; i < count; i++) {
    v[i] = malloc(size);
    if (!CHECK(v[i] != NULL)) return -1;
    memset(v[i], 0xff, size);
  }
  for (int i = 0; i < count; i++) free(v[i]);
  malloc_trim(0);
  for (int i = 0; i < count; i++) {
    v[i] = calloc(1, size);
    if (!CHECK(v[i] != NULL)) return -1;
    for (size_t j = 0; j < size; j++)
      if (v[i][j] != 0) {
        if (bad++ == 0) printf("calloc(1, %zu): byte %zu is 0x%02x\n", size, j, v[i][j]);
        break;
      }
  }
  for (int i = 0; i < count; i++) free(v[i]);
  free(v);
  return bad;
}

TEST_MAIN() {
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    printf("SKIP mlockall: errno %d (not allowed here)\n", errno);
    return 77; /* tests/run.sh: skipped */
  }
  static const size_t sizes[] = {48, 1000, 5000, 20000, 40000, 200000, 1 << 20, 3 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int count = (int)((8u << 20) / sizes[k]);
    if (count > 20000) count = 20000;
    long bad = nonzero_callocs(sizes[k], count);
    CHECKF(bad == 0, "%ld of %d calloc(1, %zu) blocks were not zero after the memory was locked", bad, count,
           sizes[k]);
  }
  munlockall();
  return check_failed() ? 1 : 0;
}
