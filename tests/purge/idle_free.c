// SPDX-License-Identifier: MIT
/* tests/purge/idle_free.c: a program that allocates 100 MB in 1000-byte
 * blocks, frees them all and then idles without another allocator call
 * gets most of it back. The purge thread had not started (nothing waited
 * while the blocks were allocated) and a small free may not start it
 * (purge.c), so before HZ_PURGE_BUDGET all 100 MB stayed resident; now the
 * frees purge what waits over the budget themselves. RSS is read with
 * open/read (stdio would allocate). */
#include "check.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 100000

static void *v[N];

TEST_MAIN() {
  for (int i = 0; i < N; i++) {
    v[i] = malloc(1000);
    if (!CHECK(v[i])) return 1;
    memset(v[i], 1, 1000);
  }
  long full = tu_rss_mib_quiet();
  for (int i = 0; i < N; i++) free(v[i]);
  struct timespec pause = {1, 0}; /* a purge delay is 100 ms: ten of them */
  nanosleep(&pause, NULL);
  long idle = tu_rss_mib_quiet();
  CHECKF(full >= 95, "RSS %ld MiB with 100 MB of blocks live", full);
  CHECKF(idle >= 0 && idle < 40, "RSS %ld MiB 1 s after freeing 100 MB without another call (was %ld)", idle, full);
  return 0;
}
