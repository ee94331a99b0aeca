// SPDX-License-Identifier: MIT
/* tests/faults/squeeze.h: address-space limits for the out-of-memory tests.
 *
 * squeeze(headroom) sets RLIMIT_AS to the process's present size plus
 * headroom bytes, so that the next few OS requests of the allocator fail;
 * unsqueeze() puts the original limit back. Nothing here allocates: the
 * size comes from /proc/self/statm through open/read, and the watchdog's
 * message is written with write(2). Usable from C and C++. */
#ifndef HZ_TEST_SQUEEZE_H
#define HZ_TEST_SQUEEZE_H

#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static struct rlimit squeeze_saved;
static int squeeze_have_saved;

/* The process's mapped address space in bytes (the first field of statm). */
static inline size_t squeeze_vm_bytes(void) {
  char buf[128];
  size_t pages = 0;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
    pages = pages * 10 + (size_t)(buf[i] - '0');
  return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Returns 0 on success, -1 if the limit could not be set. */
static inline int squeeze(size_t headroom) {
  if (!squeeze_have_saved) {
    if (getrlimit(RLIMIT_AS, &squeeze_saved) != 0) return -1;
    squeeze_have_saved = 1;
  }
  size_t vm = squeeze_vm_bytes();
  if (vm == 0) return -1;
  struct rlimit r = squeeze_saved;
  r.rlim_cur = (rlim_t)(vm + headroom);
  return setrlimit(RLIMIT_AS, &r);
}

static inline int unsqueeze(void) {
  return squeeze_have_saved ? setrlimit(RLIMIT_AS, &squeeze_saved) : 0;
}

/* A hang (deadlock in the allocator) ends the test with a message and
 * exit status 3 instead of stalling the suite. */
static const char *squeeze_watchdog_name = "test";
static void squeeze_watchdog_fired(int sig) {
  (void)sig;
  static const char msg[] = ": watchdog expired (deadlock or livelock?)\n";
  ssize_t w = write(2, squeeze_watchdog_name, strlen(squeeze_watchdog_name));
  w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(3);
}
static inline void squeeze_watchdog(const char *name, unsigned seconds) {
  squeeze_watchdog_name = name;
  signal(SIGALRM, squeeze_watchdog_fired);
  alarm(seconds);
}

#endif /* HZ_TEST_SQUEEZE_H */
