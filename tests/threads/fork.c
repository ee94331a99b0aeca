// SPDX-License-Identifier: MIT
/* tests/threads/fork.c: fork while other threads allocate. Two threads keep
 * allocating and freeing (also each other's blocks, and large and huge ones,
 * so that every lock the allocator has is taken now and then), a third
 * thread forks too, and main forks repeatedly. Every child checks and frees
 * blocks it inherited, allocates in all size ranges, starts a thread that
 * allocates, sometimes forks a grandchild, and exits 0. A deadlock in a
 * child ends it by its alarm (SIGALRM), one in the parent by the watchdog.
 * Up to 100 + 30 forks, fewer if HZ_FORK_SECONDS (4) run out first. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

#define INHERITED 64
#define TABLE 256
#define MAIN_FORKS 100
#define THREAD_FORKS 30
#define MIN_FORKS 10 /* each, even on a slow machine */

static double deadline; /* stop forking after HZ_FORK_SECONDS (default 4) */

static void *inherited[INHERITED];
static void *table[TABLE];
static volatile int stop;

static size_t inherited_size(int i) {
  return (size_t)i * i * 61 + (i % 7 == 0 ? 3 * MiB : 0);
}

static size_t pick_size(uint64_t r) {
  switch (r % 1000) {
  case 0: return (size_t)(r >> 10) % (16 * MiB);
  case 1 ... 20: return (size_t)(r >> 10) % MiB;
  case 21 ... 200: return (size_t)(r >> 10) % (64 * KiB);
  default: return (size_t)(r >> 10) % 512;
  }
}

static void *thread_alloc(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) {
    size_t n = (size_t)i * 50;
    void *p = malloc(n);
    if (!CHECK(p)) continue;
    tu_fill(p, n, i);
    CHECK(tu_verify(p, n, i) == 0);
    free(p);
  }
  return NULL;
}

/* What every child does; returns its exit status. */
static int child_main(int depth) {
  alarm(10);
  /* A child frees the even blocks, a grandchild the odd ones left. */
  for (int i = depth; i < INHERITED; i += 2) {
    CHECKF(tu_verify(inherited[i], inherited_size(i), i) == 0,
           "inherited block %d changed", i);
    free(inherited[i]);
  }
  uint64_t rng = (uint64_t)getpid() * 7919 + 1;
  void *mine[100];
  for (int i = 0; i < 100; i++) {
    /* a huge, a large, then random */
    size_t n = i == 0 ? 5 * MiB : i == 1 ? 300 * KiB : pick_size(tu_rand(&rng));
    mine[i] = i % 5 == 0 ? calloc(1, n) : malloc(n);
    if (!CHECKF(mine[i], "child malloc(%zu) failed", n)) continue;
    tu_fill(mine[i], n, n);
    if (i % 3 == 0) {
      void *q = realloc(mine[i], n * 2 + 10);
      if (CHECK(q)) mine[i] = q;
      CHECK(tu_verify(mine[i], n, n) == 0);
    }
  }
  for (int i = 0; i < 100; i++) free(mine[i]);
  pthread_t th;
  if (CHECK(pthread_create(&th, NULL, thread_alloc, NULL) == 0))
    CHECK(pthread_join(th, NULL) == 0);
  if (depth == 0 && getpid() % 4 == 0) {
    pid_t g = fork();
    if (g == 0) exit(child_main(1));
    int st;
    CHECK(waitpid(g, &st, 0) == g);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "grandchild status %#x", st);
  }
  return check_failed() ? 1 : 0;
}

static void fork_and_wait(const char *who) {
  pid_t pid = fork();
  if (pid < 0) {
    CHECKF(pid >= 0, "fork failed");
    return;
  }
  /* exit(), not _exit(): the child also runs the at-exit path. */
  if (pid == 0) exit(child_main(0));
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0,
         "child forked by %s: %s %d (SIGALRM = deadlock)", who,
         WIFSIGNALED(st) ? "killed by signal" : "exit status",
         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

static void *allocator(void *arg) {
  uint64_t rng = (uintptr_t)arg * 1000003 + 1;
  while (!stop) {
    uint64_t r = tu_rand(&rng);
    size_t n = pick_size(r);
    void *p = malloc(n);
    if (!CHECK(p)) continue;
    tu_fill(p, n < 256 ? n : 256, n); /* (a full fill makes fork slow) */
    if (r % 3 == 0) {
      void *q = realloc(p, n / 2 + 1);
      if (CHECK(q)) p = q;
    }
    /* Swap through the table: frees are often of the other thread's. */
    free(__atomic_exchange_n(&table[r % TABLE], p, __ATOMIC_ACQ_REL));
  }
  return NULL;
}

static int keep_forking(int done, int max) {
  return done < max && !check_failed() && (done < MIN_FORKS || tu_now() < deadline);
}

static void *forker(void *arg) {
  int *done = arg;
  for (; keep_forking(*done, THREAD_FORKS); ++*done) fork_and_wait("a thread");
  return NULL;
}

TEST_MAIN() {
  alarm(120); /* watchdog: a deadlock fails the test instead of hanging */
  for (int i = 0; i < INHERITED; i++) {
    inherited[i] = malloc(inherited_size(i));
    if (CHECK(inherited[i])) tu_fill(inherited[i], inherited_size(i), i);
  }
  deadline = tu_now() + tu_env_double("HZ_FORK_SECONDS", 4);
  pthread_t th[3];
  int main_forks = 0, thread_forks = 0;
  CHECK(pthread_create(&th[0], NULL, allocator, (void *)1) == 0);
  CHECK(pthread_create(&th[1], NULL, allocator, (void *)2) == 0);
  CHECK(pthread_create(&th[2], NULL, forker, &thread_forks) == 0);
  for (; keep_forking(main_forks, MAIN_FORKS); main_forks++) fork_and_wait("main");
  CHECK(pthread_join(th[2], NULL) == 0);
  printf("%d forks from main, %d from a thread\n", main_forks, thread_forks);
  stop = 1;
  CHECK(pthread_join(th[0], NULL) == 0);
  CHECK(pthread_join(th[1], NULL) == 0);
  for (int i = 0; i < TABLE; i++) free(table[i]);
  for (int i = 0; i < INHERITED; i++) {
    CHECKF(tu_verify(inherited[i], inherited_size(i), i) == 0,
           "block %d changed in the parent", i);
    free(inherited[i]);
  }
  return 0;
}
