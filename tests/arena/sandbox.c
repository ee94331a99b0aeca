// SPDX-License-Identifier: MIT
/* tests/arena/sandbox.c: malloc works where a sandbox refuses the system
 * calls it can do without.
 *
 * A seccomp filter (Chrome's and Firefox's content processes, systemd's
 * SystemCallFilter, container profiles) may make calls fail that hakozuna
 * uses but does not need: madvise (purges, THP advice), munmap (returning
 * segments and huge blocks), mremap (growing huge blocks in place),
 * getrandom (the free-list key), membarrier, getcpu and
 * sched_getaffinity (the arena of the CPU a thread runs on). (Not rseq:
 * glibc's pthread_create aborts when it fails after start-up.) For each
 * errno a sandbox gives, ENOSYS and EPERM, a child installs a filter that
 * refuses all of them after its first malloc, then runs the work of a
 * program: 4 threads making and freeing blocks of 16 B-300 KB, some passed
 * to the next thread, huge blocks grown with realloc, malloc_trim and
 * hz_collect (which purge and unmap), and a fork whose child allocates.
 * Every block is filled from its address and checked before its free; the
 * child must end with status 0 (no abort, no hang, no NULL). mprotect is
 * arena/no_mprotect's. Skipped where a filter cannot be installed, and
 * under qemu (it would filter the emulator's own calls). */
#include "check.h"
#include "seccomp.h"
#include "testutil.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>

enum { THREADS = 4, SLOTS = 256, ROUNDS = 20000 };
static char *ring[THREADS][SLOTS];
static size_t ring_len[THREADS][SLOTS];
static pthread_mutex_t ring_lock[THREADS];
static _Atomic int bad;

static char *make(size_t n, uint64_t seed) {
  char *p = malloc(n);
  if (p == NULL) {
    bad++;
    return NULL;
  }
  tu_fill(p, n, seed ^ (uint64_t)(uintptr_t)p);
  return p;
}
static void drop(char *p, size_t n, uint64_t seed) {
  if (p == NULL) return;
  if (tu_verify(p, n, seed ^ (uint64_t)(uintptr_t)p) != 0) bad++;
  free(p);
}

static void *worker(void *arg) {
  int id = (int)(uintptr_t)arg, next = (id + 1) % THREADS;
  uint64_t r = (uint64_t)id * 0x9e3779b97f4a7c15u + 7;
  char *own[64] = {0};
  size_t own_len[64] = {0};
  for (int i = 0; i < ROUNDS; i++) {
    r = r * 6364136223846793005u + 1442695040888963407u;
    size_t n = (r >> 40) % 8 == 0 ? 32768 + (r >> 20) % 270000 : 16 + (r >> 24) % 4000;
    unsigned k = (unsigned)(r >> 56) % 64;
    drop(own[k], own_len[k], 1);
    own[k] = make(n, 1);
    own_len[k] = n;
    if (i % 4 == 0) { /* pass one to the next thread, which frees it (a remote free) */
      unsigned s = (unsigned)(r >> 8) % SLOTS;
      char *p = make(n, 2);
      pthread_mutex_lock(&ring_lock[next]);
      char *old = ring[next][s];
      size_t old_n = ring_len[next][s];
      ring[next][s] = p;
      ring_len[next][s] = n;
      pthread_mutex_unlock(&ring_lock[next]);
      drop(old, old_n, 2);
    }
  }
  for (int k = 0; k < 64; k++) drop(own[k], own_len[k], 1);
  return NULL;
}

static void work(void) {
  pthread_t t[THREADS];
  bool made[THREADS] = {0};
  for (int i = 0; i < THREADS; i++) pthread_mutex_init(&ring_lock[i], NULL);
  for (int i = 0; i < THREADS; i++) {
    made[i] = pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0;
    if (!made[i]) bad++;
  }
  for (int i = 0; i < THREADS; i++)
    if (made[i]) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    for (int s = 0; s < SLOTS; s++) drop(ring[i][s], ring_len[i][s], 2);
  /* huge blocks, grown (mremap), freed (munmap or the cache), purged */
  for (int round = 0; round < 8; round++) {
    size_t n = (size_t)(3 + round) << 20;
    char *p = make(n, 3);
    char *q = p ? realloc(p, 2 * n) : NULL;
    if (q == NULL || tu_verify(q, n, 3 ^ (uint64_t)(uintptr_t)p) != 0) bad++;
    free(q);
  }
  malloc_trim(0);
  hz_collect(1);
  pid_t pid = fork();
  if (pid == 0) {
    char *p = make(100000, 4);
    drop(p, 100000, 4);
    _exit(bad != 0);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
}

static int run_child(int err) {
  pid_t pid = fork();
  if (pid == 0) {
    void *first = malloc(16);
    static const long nrs[] = {SYS_madvise, SYS_munmap, SYS_mremap, SYS_getrandom, SYS_membarrier, SYS_getcpu,
                               SYS_sched_getaffinity};
    if (tu_refuse_syscalls(nrs, (int)(sizeof nrs / sizeof nrs[0]), err) != 0) _exit(77);
    work();
    free(first);
    _exit(bad != 0 ? 1 : 0);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST_MAIN() {
  static const struct {
    int err;
    const char *name;
  } errs[] = {{ENOSYS, "ENOSYS"}, {EPERM, "EPERM"}};
  for (int i = 0; i < 2; i++) {
    int rc = run_child(errs[i].err);
    if (rc == 77) {
      printf("SKIP seccomp filter: cannot be installed here\n");
      return 77;
    }
    CHECKF(rc == 0, "with madvise, munmap, mremap, getrandom, membarrier, getcpu and sched_getaffinity "
                    "failing with %s: the child ended with %d (1: a block was NULL or changed; above 128: a signal)",
           errs[i].name, rc);
    if (rc == 0) printf("%s: the work ran\n", errs[i].name);
  }
  return 0;
}
