// SPDX-License-Identifier: MIT
/* tests/arena/cpu_limit.c: under an address-space limit (RLIMIT_AS), a
 * threaded program's pool (arena) that can map no new segment takes the
 * free slices of another CPU's pool, purged ones too (src/arena.c,
 * arena_find_elsewhere).
 *
 * The limit is the process's size now plus 48 MiB. Main, threaded (a
 * thread has run), on the first allowed CPU takes 64 KiB blocks until
 * malloc fails, frees all but every 16th (so no segment can go back to the
 * OS) and purges them (hz_collect), then, on the second CPU, takes blocks
 * again: at least 99% of the freed ones must be served. The first pool's
 * purged slices are the only memory left, and a pool that took only its own
 * free slices, or another's still backed ones (docs/perf.md §65), served
 * none (tests/arena/as_limit failed 1 pass in 7 on a loaded machine: main
 * had run on both CPUs; 10,108 blocks served again of 10,361). With one
 * allowed CPU both parts run on it, where the same holds. */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

enum { BLOCK = 64 * 1024, MANY = 4096 };
static void *many[MANY];

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  CHECKF(sched_setaffinity(0, sizeof set, &set) == 0, "pinning to CPU %d failed", cpu);
}

static void *nothing(void *arg) { return arg; }

TEST_MAIN() {
  (void)argc, (void)argv;
  cpu_set_t allowed;
  int cpus[2] = {0, 0}, ncpu = 0;
  if (CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0))
    for (int c = 0; c < CPU_SETSIZE && ncpu < 2; c++)
      if (CPU_ISSET(c, &allowed)) cpus[ncpu++] = c;
  if (ncpu == 1) cpus[1] = cpus[0];
  pthread_t t; /* a threaded program: its pools follow the CPU */
  if (!CHECK(pthread_create(&t, NULL, nothing, NULL) == 0) || !CHECK(pthread_join(t, NULL) == 0)) return 1;
  long start = tu_statm_mib_quiet(1);
  struct rlimit rl = {.rlim_cur = (rlim_t)(start + 48) << 20, .rlim_max = RLIM_INFINITY};
  if (!CHECK(start > 0) || !CHECK(setrlimit(RLIMIT_AS, &rl) == 0)) return 1;
  pin(cpus[0]);
  int n = 0, kept = 0, m = 0;
  while (n < MANY && (many[n] = malloc(BLOCK)) != NULL) memset(many[n++], 1, BLOCK);
  CHECKF(n < MANY && errno == ENOMEM, "%d blocks under the limit, then errno %d", n, errno);
  for (int i = 0; i < n; i++)
    if (i % 16 == 0) many[kept++] = many[i];
    else free(many[i]);
  hz_collect(1); /* purged: another pool lends only its backed slices otherwise */
  pin(cpus[1]);
  while (kept + m < MANY && (many[kept + m] = malloc(BLOCK)) != NULL) memset(many[kept + m++], 2, BLOCK);
  printf("under the limit: %d blocks on CPU %d, %d freed, %d again on CPU %d\n", n, cpus[0], n - kept, m, cpus[1]);
  CHECKF(m >= (n - kept) - (n - kept) / 100, "%d blocks freed on CPU %d and purged, only %d served again on CPU %d",
         n - kept, cpus[0], m, cpus[1]);
  for (int i = 0; i < kept + m; i++) free(many[i]);
  return check_failed() ? 1 : 0;
}
