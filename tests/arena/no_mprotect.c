// SPDX-License-Identifier: MIT
/* tests/arena/no_mprotect.c: malloc works where mprotect is refused.
 *
 * hakozuna opens with mprotect the pages of its segment map before their
 * first write, and, once the program called mlockall (or under
 * vm.overcommit_memory=2), its regions of segments a segment at a time
 * (so that mlockall locks only what is open: tests/arena/mlock_rss.c). A
 * sandbox may refuse mprotect and allow mmap (a seccomp filter); opening
 * then maps the range again (os.c, hz_os_readonly). Here a seccomp filter
 * makes every mprotect fail with EPERM after the first malloc, and 96 MiB
 * of 40,000-byte blocks (segments past the first region), filled and
 * checked, must all be served. Half of them come after 17 GiB of address
 * space taken below the first region, so that the next region's segments
 * fall in a page of the segment map not written yet (a page covers 16
 * GiB). Then, where mlockall(MCL_FUTURE) is allowed, 96 MiB more, the
 * first still live, from regions reserved inaccessible. Without the
 * fallback the first new segment failed and malloc returned NULL (63 of
 * 2,516 blocks served, when every region was opened so). Skipped where a
 * filter cannot be installed.
 * Also run on glibc (whose main arena grows with brk). */
#include "check.h"
#include "testutil.h"

#include "seccomp.h"

#include <errno.h>
#include <sys/mman.h>

static int refuse_mprotect(void) {
  static const long nrs[] = {SYS_mprotect};
  return tu_refuse_syscalls(nrs, 1, EPERM);
}

enum { SIZE = 40000, N = 96 * 1024 * 1024 / SIZE };
static char *v[N], *w[N];

TEST_MAIN() {
  void *first = malloc(16);
  CHECK(first != NULL);
  if (refuse_mprotect() != 0) {
    printf("SKIP seccomp filter: errno %d\n", errno);
    return 77; /* tests/run.sh: skipped */
  }
  char probe[1];
  if (mprotect((void *)((uintptr_t)probe & ~(uintptr_t)4095), 4096, PROT_READ | PROT_WRITE) == 0 || errno != EPERM) {
    printf("SKIP the filter did not refuse mprotect\n");
    return 77;
  }
  int got = 0;
  void *gap = NULL;
  for (int i = 0; i < N; i++) {
    if (i == N / 2) { /* (where the address space is limited, the second half shares the map's page) */
      gap = mmap(NULL, (size_t)17 << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (gap == MAP_FAILED) gap = NULL;
    }
    v[i] = malloc(SIZE);
    if (v[i] == NULL) break;
    tu_fill(v[i], SIZE, (uint64_t)i);
    got++;
  }
  CHECKF(got == N, "%d of %d blocks of %d bytes served with mprotect refused", got, N, SIZE);
  /* Once the program calls mlockall, hakozuna reserves regions
   * inaccessible and opens them a segment at a time: 96 MiB more, the
   * first blocks still live, need new regions opened so. */
  int more = 0;
  if (mlockall(MCL_FUTURE) == 0) {
    for (int i = 0; i < N; i++) {
      w[i] = malloc(SIZE);
      if (w[i] == NULL) break;
      tu_fill(w[i], SIZE, (uint64_t)(N + i));
      more++;
    }
    CHECKF(more == N, "after mlockall: %d of %d blocks of %d bytes served with mprotect refused", more, N, SIZE);
    munlockall();
  } else {
    printf("(mlockall refused, errno %d: the part after it is not run)\n", errno);
  }
  for (int i = 0; i < more; i++) {
    CHECKF(tu_verify(w[i], SIZE, (uint64_t)(N + i)) == 0, "block %d changed", N + i);
    free(w[i]);
  }
  for (int i = 0; i < got; i++) {
    CHECKF(tu_verify(v[i], SIZE, (uint64_t)i) == 0, "block %d changed", i);
    free(v[i]);
  }
  if (gap != NULL) munmap(gap, (size_t)17 << 30);
  free(first);
  return check_failed() ? 1 : 0;
}
