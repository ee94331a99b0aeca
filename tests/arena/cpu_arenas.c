// SPDX-License-Identifier: MIT
/* tests/arena/cpu_arenas.c: a threaded program takes spans from the span
 * pool (arena) of the CPU it runs on, and freed, still backed memory of
 * another pool before new pages of its own (docs/perf.md §65).
 *
 * A thread pinned to one CPU takes 24 MiB of 64 KiB blocks and frees them
 * (no span cache, no purge: they wait in its CPU's pool, backed), and
 * stays (an exited thread's heap, and with it its pool before, would go to
 * the next thread). A second thread pinned to another CPU then takes 16 MiB: the committed bytes
 * (hz_stats_get) must not grow by more than a segment, since the first
 * pool's freed slices serve it. Fails on the code before, where each thread
 * had a fixed pool and the second one's was the other (16 MiB more
 * committed). Before that, two live threads pinned to the same CPU take a
 * block each from the same segment (one pool), where with a pool per thread
 * they took them from two. On a machine with one allowed CPU all threads
 * share the one pool, where the same holds. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "hakozuna.h"

enum { BLOCK = 64 * 1024, FIRST = 24 * 16, SECOND = 16 * 16 };
static void *blocks[FIRST];

typedef struct {
  int cpu; /* -1: anywhere */
  int count;
  bool keep;
  size_t grew;
} job_t;
static pthread_barrier_t freed, done;

static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  CHECKF(sched_setaffinity(0, sizeof set, &set) == 0, "pinning to CPU %d failed", cpu);
}

/* One 64 KiB block taken on a CPU, kept until `done`. */
typedef struct {
  int cpu;
  void *block;
  pthread_barrier_t *taken, *done;
} one_t;

static void *take_one(void *arg) {
  one_t *o = arg;
  pin(o->cpu);
  o->block = malloc(BLOCK);
  pthread_barrier_wait(o->taken);
  pthread_barrier_wait(o->done);
  free(o->block);
  return NULL;
}

/* Two threads alive at once, both on `cpu`: their blocks' segments. */
static void same_cpu(int cpu) {
  pthread_barrier_t taken, done;
  pthread_barrier_init(&taken, NULL, 3);
  pthread_barrier_init(&done, NULL, 3);
  one_t o[2] = {{cpu, NULL, &taken, &done}, {cpu, NULL, &taken, &done}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    if (!CHECK(pthread_create(&t[i], NULL, take_one, &o[i]) == 0)) exit(1);
  pthread_barrier_wait(&taken);
  uintptr_t s0 = (uintptr_t)o[0].block >> 22, s1 = (uintptr_t)o[1].block >> 22;
  printf("two threads on CPU %d: blocks %p and %p\n", cpu, o[0].block, o[1].block);
  CHECKF(o[0].block && o[1].block && s0 == s1, "two threads on one CPU took blocks from different segments");
  pthread_barrier_wait(&done);
  for (int i = 0; i < 2; i++) CHECK(pthread_join(t[i], NULL) == 0);
}

static size_t committed(void) {
  hz_stats_t st = {.size = sizeof st};
  return hz_stats_get(&st) == 0 ? (size_t)st.bytes_committed : 0;
}

static void *worker(void *arg) {
  job_t *j = arg;
  pin(j->cpu);
  size_t before = committed();
  for (int i = 0; i < j->count; i++) {
    blocks[i] = malloc(BLOCK);
    if (!CHECK(blocks[i] != NULL)) return NULL;
    memset(blocks[i], 1, BLOCK); /* backed */
  }
  j->grew = committed() - before;
  if (j->keep) return NULL;
  for (int i = 0; i < j->count; i++) free(blocks[i]);
  pthread_barrier_wait(&freed);
  pthread_barrier_wait(&done);
  return NULL;
}

TEST_MAIN() {
  (void)argc, (void)argv;
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 600000) == 0); /* nothing goes back during the test */
  CHECK(hz_option_set(HZ_OPTION_THREAD_CACHE, 0) == 0);    /* freed spans go to their pool at once */
  cpu_set_t allowed;
  int cpus[2] = {-1, -1}, n = 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
      if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
  printf("CPUs used: %d and %d\n", cpus[0], n > 1 ? cpus[1] : cpus[0]);
  same_cpu(cpus[0]);
  pthread_barrier_init(&freed, NULL, 2);
  pthread_barrier_init(&done, NULL, 2);
  job_t first = {.cpu = cpus[0], .count = FIRST};
  job_t second = {.cpu = n > 1 ? cpus[1] : cpus[0], .count = SECOND, .keep = true};
  pthread_t t1, t2;
  if (!CHECK(pthread_create(&t1, NULL, worker, &first) == 0)) return 1;
  pthread_barrier_wait(&freed);
  if (CHECK(pthread_create(&t2, NULL, worker, &second) == 0)) CHECK(pthread_join(t2, NULL) == 0);
  pthread_barrier_wait(&done);
  CHECK(pthread_join(t1, NULL) == 0);
  printf("the second thread's %d KiB grew the committed bytes by %zu KiB\n", SECOND * BLOCK / 1024,
         second.grew / KiB);
  CHECKF(second.grew <= 4 * MiB, "the second thread committed %zu KiB of new memory, want at most 4096",
         second.grew / KiB);
  for (int i = 0; i < SECOND; i++) free(blocks[i]);
  return check_failed() ? 1 : 0;
}
