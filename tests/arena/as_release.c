// SPDX-License-Identifier: MIT
/* tests/arena/as_release.c: under an address-space limit (RLIMIT_AS,
 * `ulimit -v`), what the program frees is room for its own mappings again.
 *
 * The limit is the program's address space at start plus 400 MiB. Blocks of
 * 200,000 bytes (large spans in segments) fill it until malloc fails, are
 * all freed, then the program maps 8 MiB itself and starts a thread (whose
 * stack glibc maps): with glibc both succeed. hakozuna kept its emptied
 * segments mapped until its own next mapping failed, so the program's mmap
 * failed and pthread_create returned EAGAIN (Python under `ulimit -v`:
 * "can't start new thread"). Now a segment whose slices are all free again
 * goes back at once under a limit, but for one kept per arena (arena.c,
 * segment_emptied). Then (not with glibc, whose thread arenas keep their
 * memory) the same again from a second thread, where the purge thread runs,
 * and the blocks come back once more (every block written and read back). */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

enum { SIZE = 200000, MANY = 4000 };
static char *v[MANY];

static void *idle(void *arg) { return arg; }

/* Fills until malloc fails, frees all, then needs room for the program's
 * own mapping and a thread's stack; the blocks filled. */
static int round_trip(const char *who) {
  int n = 0;
  while (n < MANY && (v[n] = malloc(SIZE)) != NULL) {
    tu_fill(v[n], SIZE, (uint64_t)n);
    n++;
  }
  CHECKF(n < MANY, "%s: %d blocks of %d bytes and no limit reached", who, n, SIZE);
  for (int i = 0; i < n; i++) CHECK(tu_verify(v[i], SIZE, (uint64_t)i) == 0);
  for (int i = 0; i < n; i++) free(v[i]);
  void *m = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECKF(m != MAP_FAILED, "%s: after %d blocks were freed, mmap(8 MiB) failed (errno %d)", who, n, errno);
  if (m != MAP_FAILED) munmap(m, 8 << 20);
  pthread_t t;
  int rc = pthread_create(&t, NULL, idle, NULL);
  CHECKF(rc == 0, "%s: after %d blocks were freed, pthread_create failed (%d)", who, n, rc);
  if (rc == 0) pthread_join(t, NULL);
  printf("%s: %d blocks, freed: mmap %s, pthread_create %d\n", who, n, m != MAP_FAILED ? "ok" : "failed", rc);
  return n;
}

static void *second(void *arg) {
  *(int *)arg = round_trip("a second thread");
  return NULL;
}

TEST_MAIN() {
  long vm = tu_statm_mib_quiet(1);
  if (!CHECK(vm > 0)) return 1;
  struct rlimit r = {.rlim_cur = (rlim_t)(vm + 400) << 20, .rlim_max = RLIM_INFINITY};
  if (!CHECK(setrlimit(RLIMIT_AS, &r) == 0)) return 1;
  int first = round_trip("main");
  if (!hz_strict()) return 0;
  int again = 0;
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, second, &again) == 0)) return 1;
  pthread_join(t, NULL);
  CHECKF(again >= first * 9 / 10, "the second fill got %d blocks, the first %d", again, first);
  return 0;
}
