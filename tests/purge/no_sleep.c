// SPDX-License-Identifier: MIT
/* tests/purge/no_sleep.c: where the OS refuses the purge thread its sleep,
 * the thread stops, and memory still goes back.
 *
 * tor's sandbox refuses clock_nanosleep (what glibc's nanosleep calls)
 * with EPERM: the purge thread's sleep returned at once, and the thread
 * looped through its purge without pause for as long as the program ran
 * (5.9 s of CPU in 40 s of an idle tor; a helper's run, 2026-11-29). Here a
 * threaded program (a thread has run) refuses clock_nanosleep and nanosleep
 * with EPERM, frees 64 blocks of 256 KiB (which starts the purge thread),
 * then waits 1 s in poll: the allocator may make at most 100 system calls
 * meanwhile (hz_stats_get's other_os_calls; thousands while it spun), and
 * /proc/self/status must show one thread again. Then, at allocator calls,
 * the freed memory must go back (bytes_returned grows), as in a program
 * that has no purge thread. Skipped where a filter cannot be installed,
 * and under qemu. */
#include "check.h"
#include "seccomp.h"
#include "testutil.h"

#include <poll.h>
#include <pthread.h>

enum { BLOCKS = 64, SIZE = 256 << 10 };

static void *nothing(void *arg) { return arg; }

static hz_stats_t stats(void) {
  hz_stats_t st;
  CHECK(tu_stats(&st) == 0);
  return st;
}

TEST_MAIN() {
  free(malloc(16));
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, nothing, NULL) == 0)) return 1;
  pthread_join(t, NULL);
  static const long nrs[] = {SYS_clock_nanosleep,
#ifdef SYS_nanosleep
                             SYS_nanosleep
#endif
  };
  if (tu_refuse_syscalls(nrs, (int)(sizeof nrs / sizeof nrs[0]), EPERM) != 0) {
    printf("SKIP seccomp filter: cannot be installed here\n");
    return 77;
  }
  static char *p[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    p[i] = malloc(SIZE);
    if (CHECK(p[i] != NULL)) memset(p[i], 1, SIZE);
  }
  for (int i = 0; i < BLOCKS; i++) free(p[i]);
  hz_stats_t before = stats();
  poll(NULL, 0, 1000); /* (the subject: an idle second; poll is not refused) */
  hz_stats_t after = stats();
  uint64_t calls = after.other_os_calls - before.other_os_calls;
  CHECKF(calls <= 100, "%llu system calls in an idle second with sleeps refused (the purge thread spins)",
         (unsigned long long)calls);
  int n = tu_threads();
  CHECKF(n == 1, "%d threads after the idle second (1: the purge thread stopped)", n);
  /* allocator calls return the memory now: each large malloc+free is a safe point */
  for (int i = 0; i < 256 && stats().bytes_returned == before.bytes_returned; i++) {
    free(malloc(SIZE));
    poll(NULL, 0, 2);
  }
  hz_stats_t end = stats();
  CHECKF(end.bytes_returned > before.bytes_returned, "nothing returned at allocator calls (%llu bytes committed)",
         (unsigned long long)end.bytes_committed);
  printf("%llu calls while idle, %d thread, %llu KiB returned after\n", (unsigned long long)calls, n,
         (unsigned long long)(end.bytes_returned - before.bytes_returned) >> 10);
  return 0;
}
