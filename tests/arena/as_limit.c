// SPDX-License-Identifier: MIT
/* tests/arena/as_limit.c: under an address-space limit (RLIMIT_AS,
 * `ulimit -v`), memory freed by one kind of block serves another.
 *
 * The limit is the program's address space at start plus 256 MiB. Main
 * fills 80 MiB with 40,000-byte blocks (spans in segments), frees them all,
 * then asks for one 200 MiB block (a mapping of its own), then frees it and
 * fills the 80 MiB again; with glibc all three succeed. Then (not with
 * glibc, whose thread arenas keep their memory) a thread fills them and
 * exits, main frees them (they wait in the exited thread's heap) and asks
 * for 200 MiB again. hakozuna kept its
 * emptied segments and the rest of its 64 MiB region mapped for good, so
 * the 200 MiB request failed with ENOMEM (a Python program under ulimit -v
 * got MemoryError); now a failed mapping first gives back what the span
 * pools hold unused (arena.c, hz_arena_release), after collecting exited
 * threads' heaps. Every block is filled and read back.
 *
 * Last, blocks of 20,000 bytes fill the address space until malloc fails
 * (ENOMEM), are all freed, and at least 99% as many must be served again,
 * then a 1 MiB block. The checked build's quarantine holds up to 1,024
 * freed small blocks back from reuse: it kept them so even when nothing
 * else was left (under `ulimit -v 65536`, 700 such blocks were freed and
 * none could be had again, nor 1 MiB); the thread's unused memory is now
 * collected, quarantine included, before a malloc fails (heap.c). */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>

enum { SIZE = 40000, N = 2000 };
static char *v[N];

static long vm_mib(void) { return tu_statm_mib_quiet(1); }

static void *thread_fill(void *arg) {
  (void)arg;
  for (int i = 0; i < N; i++)
    if ((v[i] = malloc(SIZE)) != NULL) tu_fill(v[i], SIZE, (uint64_t)i);
  return NULL;
}

static int fill(int round) {
  for (int i = 0; i < N; i++) {
    v[i] = malloc(SIZE);
    if (!CHECKF(v[i] != NULL, "round %d: malloc(%d) number %d failed under the limit (address space %ld MiB)",
                round, SIZE, i, vm_mib()))
      return 0;
    tu_fill(v[i], SIZE, (uint64_t)(i + round * N));
  }
  for (int i = 0; i < N; i++) CHECK(tu_verify(v[i], SIZE, (uint64_t)(i + round * N)) == 0);
  for (int i = 0; i < N; i++) free(v[i]);
  return 1;
}

/* Small blocks until malloc fails, all freed, then as many again. */
static int fill_to_the_limit(void) {
  enum { MANY = 40000, SMALL = 20000 };
  static char *w[MANY];
  int n = 0, m = 0;
  while (n < MANY && (w[n] = malloc(SMALL)) != NULL) memset(w[n++], 1, SMALL);
  CHECKF(n < MANY && errno == ENOMEM, "%d blocks of %d bytes, then errno %d", n, SMALL, errno);
  for (int i = 0; i < n; i++) free(w[i]);
  while (m < n && (w[m] = malloc(SMALL)) != NULL) memset(w[m++], 2, SMALL);
  printf("%d blocks of %d bytes until ENOMEM; %d again after all were freed\n", n, SMALL, m);
  CHECKF(m >= n - n / 100, "%d blocks of %d bytes until ENOMEM, all freed, then only %d again", n, SMALL, m);
  for (int i = 0; i < m; i++) free(w[i]);
  char *p = malloc(1 << 20);
  CHECKF(p != NULL, "malloc(1 MiB) after all the blocks were freed");
  free(p);
  return !check_failed();
}

TEST_MAIN() {
  long start = vm_mib();
  if (!CHECK(start > 0)) return 1;
  struct rlimit rl = {.rlim_cur = (rlim_t)(start + 256) << 20, .rlim_max = (rlim_t)(start + 256) << 20};
  if (!CHECK(setrlimit(RLIMIT_AS, &rl) == 0)) return 1;
  if (!fill(0)) return 1;
  size_t big = (size_t)200 << 20;
  char *p = malloc(big);
  if (!CHECKF(p != NULL, "malloc(200 MiB) after freeing 80 MiB failed (address space %ld MiB, limit %ld)", vm_mib(),
              start + 256))
    return 1;
  tu_fill(p, big, 7);
  CHECK(tu_verify(p, big, 7) == 0);
  free(p);
  if (!fill(1)) return 1;
  if (!hz_strict()) return fill_to_the_limit() ? 0 : 1;
  /* blocks of an exited thread, freed by main, wait in its heap's inbox */
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, thread_fill, NULL) == 0) || !CHECK(pthread_join(t, NULL) == 0)) return 1;
  for (int i = 0; i < N; i++) {
    if (!CHECKF(v[i] != NULL, "a thread's malloc(%d) number %d failed under the limit", SIZE, i)) return 1;
    CHECK(tu_verify(v[i], SIZE, (uint64_t)i) == 0);
    free(v[i]);
  }
  p = malloc(big);
  CHECKF(p != NULL, "malloc(200 MiB) after freeing an exited thread's 80 MiB failed (address space %ld MiB)", vm_mib());
  free(p);
  fill_to_the_limit();
  printf("address space: %ld MiB at the start, %ld MiB at the end\n", start, vm_mib());
  return 0;
}
