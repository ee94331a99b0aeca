// SPDX-License-Identifier: MIT
/* tests/purge/single.c: a program that never starts a thread stays
 * single-threaded (HAKOZUNA_PURGE_THREAD=1, the default). A purge thread of
 * ours made glibc treat it as multi-threaded for good: fork then takes
 * glibc's atfork lock, and a fork from a signal handler that interrupted
 * fork hung (glibc's malloc/tst-mallocfork2); unshare(CLONE_NEWUSER) failed
 * with EINVAL while the thread ran. Checks: after freeing large and medium
 * blocks and idling three purge delays, the process has one thread and
 * glibc still counts it single-threaded; allocator calls a purge delay
 * apart return what waited (RSS drops); 2,000 forks while a 1.5 ms timer's handler forks
 * too finish (alarm: a hang fails the test). */
#include "check.h"
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A number after `key` in a /proc file, read with open/read (stdio allocates). */
static long proc_number(const char *path, const char *key, int field) {
  char buf[4096];
  int fd = open(path, O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char *p = key ? strstr(buf, key) : buf;
  if (p == NULL) return -1;
  p += key ? strlen(key) : 0;
  long v = -1;
  for (int i = 0; i <= field; i++) v = strtol(p, (char **)&p, 10);
  return v;
}
static long threads(void) { return proc_number("/proc/self/status", "Threads:", 0); }
static long rss_kib(void) { return proc_number("/proc/self/statm", NULL, 1) * sysconf(_SC_PAGESIZE) / 1024; }

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, ms % 1000 * 1000000};
  while (nanosleep(&t, &t) != 0) {
  }
}

static void fork_and_wait(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  if (p > 0)
    while (waitpid(p, NULL, 0) < 0) {
    }
}

static void on_timer(int sig) {
  (void)sig;
  fork_and_wait();
}

enum { LARGE = 100, MEDIUM = 64 };
static void *large[LARGE], *medium[MEDIUM];

TEST_MAIN() {
  CHECK(__libc_single_threaded);
  for (int i = 0; i < LARGE; i++) memset(large[i] = malloc(70000), 1, 70000);
  for (int i = 0; i < MEDIUM; i++) memset(medium[i] = malloc(64 * 1024), 1, 64 * 1024);
  long live = rss_kib();
  for (int i = 0; i < LARGE; i++) free(large[i]);
  for (int i = 0; i < MEDIUM; i++) free(medium[i]);
  sleep_ms(300); /* three purge delays */
  CHECKF(threads() == 1, "%ld threads after freeing and idling (a purge thread in a single-threaded program)",
         threads());
  CHECK(__libc_single_threaded);
  /* calls a delay apart return what waited (span caches go to the pool
   * first; the clock is read at every 8th safe point) */
  for (int i = 0; i < 16; i++) free(malloc(70000));
  sleep_ms(150);
  for (int i = 0; i < 16; i++) free(malloc(70000));
  long after = rss_kib();
  CHECKF(after >= 0 && after + 8 * 1024 < live, "RSS %ld KiB with 11 MiB of blocks live, %ld KiB after freeing "
         "them, idling and two more calls", live, after);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_timer;
  sa.sa_flags = SA_RESTART;
  CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
  struct itimerval every = {{0, 1500}, {0, 1500}}, off = {{0, 0}, {0, 0}};
  CHECK(setitimer(ITIMER_REAL, &every, NULL) == 0);
  /* (SIGALRM is the timer's: a hang is caught by the runner's time limit) */
  for (int i = 0; i < 2000; i++) fork_and_wait();
  CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
  CHECK(threads() == 1);
  return 0;
}
