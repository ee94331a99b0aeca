// SPDX-License-Identifier: MIT
/* tests/arena/as_budget.c: a limit on address space (RLIMIT_AS) set from
 * the program's size leaves the program what it leaves with glibc.
 *
 * Tcl's test cmdIL-5.7 (lsort out of memory) limits its child to the
 * child's size plus 80,000,000 bytes, builds a 32 MB list and expects the
 * 96 MB sort buffer to fail cleanly. hakozuna had taken 64 MiB of address
 * space at start (its first region of segments, untouched) and counted in
 * that size; under the limit it gave the region's unused rest back, served
 * the 96 MB, and the next 32 MB failed, which Tcl cannot survive (the test
 * was skipped: "list creation failed"). Regions now start at one segment
 * and double (arena.c); on x86-64 the segment map, which covered all 2^47
 * bytes of address space in 32 MiB of it, covers the 2^44 where hakozuna
 * now places its mappings, in 4 MiB (os.c). (The limit is relative to the
 * size at start, so the test holds with either map.)
 *
 * Here, as there: once malloc has started up, the limit is the address
 * space now plus 80,000,000 bytes; 32,000,016 bytes must be served,
 * 96,000,000 must fail with ENOMEM, and 32,000,016 more must be served
 * (before: served, served, failed). glibc passes. */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

static long vm_bytes(void) {
  char buf[128];
  long size = -1;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f != NULL) {
    if (fgets(buf, sizeof buf, f) == NULL || sscanf(buf, "%ld", &size) != 1) size = -1;
    fclose(f);
  }
  return size < 0 ? -1 : size * sysconf(_SC_PAGESIZE);
}

TEST_MAIN() {
  free(malloc(16)); /* start-up done; the report's buffers too */
  long start = vm_bytes();
  if (!CHECK(start > 0)) return 1;
  rlim_t limit = (rlim_t)start + 80000000;
  struct rlimit rl = {.rlim_cur = limit, .rlim_max = limit};
  if (!CHECK(setrlimit(RLIMIT_AS, &rl) == 0)) return 1;
  char *a = malloc(32000016);
  CHECKF(a != NULL, "malloc(32,000,016) under a limit of the start's %ld bytes + 80,000,000", start);
  if (a) memset(a, 1, 32000016);
  errno = 0;
  char *big = malloc(96000000);
  CHECKF(big == NULL && errno == ENOMEM, "malloc(96,000,000) on top of it: %p, errno %d (the limit leaves 48 MB)",
         (void *)big, errno);
  free(big);
  char *b = malloc(32000016);
  CHECKF(b != NULL, "malloc(32,000,016) again after the failed 96 MB (address space %ld bytes, limit %ld)", vm_bytes(),
         (long)limit);
  if (b) memset(b, 2, 32000016);
  printf("address space at start %ld bytes; 32 MB %s, 96 MB %s, 32 MB %s\n", start, a ? "served" : "refused",
         big ? "served" : "refused", b ? "served" : "refused");
  free(a);
  free(b);
  return 0;
}
