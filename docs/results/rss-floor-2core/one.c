// SPDX-License-Identifier: MIT
/* one [SIZE]: malloc one block (100 bytes), write to it, then print this
 * process's /proc/self/smaps with read and write only (no stdio, whose
 * pages would blur what the allocator maps). docs/perf.md §82. */
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
static char buf[1<<20];
int main(int argc, char **argv) {
  volatile char *p = malloc(argc > 1 ? atoi(argv[1]) : 100); p[0] = 1;
  int fd = open("/proc/self/smaps", O_RDONLY); ssize_t n, t = 0;
  while ((n = read(fd, buf + t, sizeof buf - t)) > 0) t += n;
  write(1, buf, t); return 0;
}
