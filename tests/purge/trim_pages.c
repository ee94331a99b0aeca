// SPDX-License-Identifier: MIT
/* tests/purge/trim_pages.c: malloc_trim(0) returns the pages that hold only
 * free blocks inside spans that still hold live ones, and says so.
 *
 * 40 MB of 200-byte blocks, every 64th kept (every 1,024th with 64 KiB
 * pages assumed: HAKOZUNA_PAGE_SIZE), the others freed: about 72% of the
 * pages then hold no live block, but every span holds some. hakozuna's
 * malloc_trim returned nothing of that (only empty spans, and the insides
 * of free blocks over a page) while it returned 1; glibc's returns about
 * two thirds. Checks: malloc_trim returns 1 and the RSS above the program's
 * start falls to under 60% of what it was; the kept blocks read back; then
 * every freed slot is allocated again (the returned pages' blocks come
 * back) and filled, and every block must read back (none handed out twice).
 * (Not in the checked build, whose free blocks carry a fill, not the free
 * tag the page walk relies on: there malloc_trim returns empty spans only.) */
#include "check.h"
#include "testutil.h"

enum { SIZE = 200, N = 200000 };
static char *v[N];

TEST_MAIN() {
  const char *ps = getenv("HAKOZUNA_PAGE_SIZE");
  int keep = ps != NULL && atol(ps) > 4096 ? (int)(64 * (atol(ps) / 4096)) : 64;
  long start = tu_rss_mib_quiet();
  for (int i = 0; i < N; i++) {
    if (!CHECK(v[i] = malloc(SIZE))) return 1;
    tu_fill(v[i], SIZE, (uint64_t)i);
  }
  long full = tu_rss_mib_quiet();
  for (int i = 0; i < N; i++)
    if (i % keep != 0) {
      free(v[i]);
      v[i] = NULL;
    }
  long before = tu_rss_mib_quiet();
  int r = malloc_trim(0);
  long after = tu_rss_mib_quiet();
  printf("RSS above the start: %ld MiB before malloc_trim, %ld after (it returned %d)\n", before - start,
         after - start, r);
  CHECKF(full - start >= 30, "RSS only %ld MiB above the start with 40 MB allocated", full - start);
  CHECKF(r == 1, "malloc_trim(0) returned %d, memory was released", r);
  CHECKF((after - start) * 10 < (before - start) * 6, "RSS %ld MiB above the start after malloc_trim (was %ld)",
         after - start, before - start);
  for (int i = 0; i < N; i += keep) CHECK(tu_verify(v[i], SIZE, (uint64_t)i) == 0);
  for (int i = 0; i < N; i++)
    if (v[i] == NULL && !CHECK(v[i] = malloc(SIZE))) return 1;
  for (int i = 0; i < N; i++)
    if (i % keep != 0) tu_fill(v[i], SIZE, (uint64_t)i + N);
  size_t bad = 0;
  for (int i = 0; i < N; i++) bad += tu_verify(v[i], SIZE, (uint64_t)i + (i % keep ? N : 0)) != 0;
  CHECKF(bad == 0, "%zu of %d blocks lost their content to another block", bad, N);
  for (int i = 0; i < N; i++) free(v[i]);
  return 0;
}
