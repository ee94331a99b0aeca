// SPDX-License-Identifier: MIT
/* tests/purge/errno.c: free() keeps errno although the purge thread it
 * wants to start cannot be created. Freeing a huge block leaves it in a
 * reuse cache that the purge thread empties later; with the address space
 * limited to what the process maps already, the thread's stack cannot be
 * mapped and pthread_create fails inside free (issue 10, case 4). In a
 * child, so the limit ends with it. */
#include "check.h"
#include "testutil.h"

#include <sys/mman.h>
#include <sys/resource.h>

static long vm_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = -1;
  if (f && fscanf(f, "%ld", &size) != 1) size = -1;
  if (f) fclose(f);
  return size < 0 ? -1 : size * sysconf(_SC_PAGESIZE);
}

static int child_main(void *arg) {
  (void)arg;
  void *p = malloc(8 * MiB);
  if (!CHECK(p)) return 1;
  memset(p, 1, 8 * MiB);
  long vm = vm_bytes();
  struct rlimit rl = {(rlim_t)vm, (rlim_t)vm};
  if (!CHECKF(vm > 0 && setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit(RLIMIT_AS, %ld)", vm)) return 1;
  CHECKF(mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED,
         "the address space limit does not hold");
  errno = EDOM;
  free(p);
  CHECKF(errno == EDOM, "errno %d (%s) after free, expected EDOM", errno, strerror(errno));
  errno = EDOM;
  free(malloc(100)); /* and a plain malloc/free pair */
  CHECKF(errno == EDOM, "errno %d (%s) after malloc/free", errno, strerror(errno));
  return check_failed() ? 1 : 0;
}

TEST_MAIN() {
  char why[80];
  int st = tu_child(child_main, NULL, 30, why, sizeof why);
  CHECKF(st == 0, "child: %s", why);
  return 0;
}
