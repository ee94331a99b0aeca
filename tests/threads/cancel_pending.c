// SPDX-License-Identifier: MIT
/* tests/threads/cancel_pending.c: malloc and free are not cancellation
 * points, even where the allocator does file I/O. A thread cancels itself
 * (deferred: the cancel stays pending until a cancellation point), then
 * makes allocator calls that write or read files: a 40,000-byte block (the
 * checked build's first guard page counts the process's mappings in /proc),
 * a 1 GiB block over an address-space limit (RLIMIT_AS), which fails and
 * has hakozuna write "out of memory" to stderr (HAKOZUNA_VERBOSE=1),
 * malloc_stats and hz_stats_print (stdio). Then it sets a flag and calls
 * pthread_testcancel: the flag must be set and the join must see
 * PTHREAD_CANCELED. Before, the thread was cancelled inside malloc (in
 * write(2) of the message; in the checked build already in open(2) of
 * /proc/sys/vm/max_map_count) and unwound out of the allocator halfway: the
 * flag stayed 0. The same calls are made with a heap claimed or an arena
 * lock held (the checked build's free of a large block, a failed mapping of
 * a segment). Then main and a second thread allocate and free blocks of
 * every kind and malloc_trim walks every heap: nothing may be left half
 * done.
 *
 * The options are read at start-up, so the cases run in a child (this
 * program again, with HAKOZUNA_VERBOSE=1), whose stderr the parent reads:
 * on hakozuna the message must be there (the write really happened with
 * the cancel pending). On glibc nothing is written; the checks hold. */
#include "check.h"
#include "testutil.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void stats_print_fn(FILE *);

static volatile int reached, big_failed, small_ok;

/* Nothing here may print (stdio is a cancellation point): main checks. */
static void *cancelled(void *arg) {
  stats_print_fn *print = (stats_print_fn *)arg;
  pthread_cancel(pthread_self());
  char *p = malloc(40000);
  char *big = malloc(tu_opaque((size_t)1 << 30));
  big_failed = big == NULL;
  free(big);
  malloc_stats();
  if (print) print(NULL);
  if (p) tu_fill(p, 40000, 7);
  small_ok = p != NULL && tu_verify(p, 40000, 7) == 0;
  free(p);
  reached = 1;
  pthread_testcancel();
  return NULL; /* (not reached: the cancel was pending) */
}

/* Blocks of every kind, filled and checked, then freed. */
static void *churn(void *arg) {
  static const size_t sizes[] = {16, 100, 1000, 32768, 40000, 300000, 3 << 20};
  enum { N = sizeof sizes / sizeof sizes[0], ROUNDS = 50 };
  uint64_t seed = (uintptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) {
    char *p[N];
    for (int i = 0; i < N; i++) {
      p[i] = malloc(sizes[i]);
      if (!CHECKF(p[i] != NULL, "malloc(%zu) after the cancelled thread", sizes[i])) return NULL;
      tu_fill(p[i], sizes[i], seed + (uint64_t)i);
    }
    for (int i = N; i-- > 0;) {
      CHECK(tu_verify(p[i], sizes[i], seed + (uint64_t)i) == 0);
      free(p[i]);
    }
  }
  return NULL;
}

static int child(void) {
  stats_print_fn *print = (stats_print_fn *)dlsym(RTLD_DEFAULT, "hz_stats_print");
  /* Room for the thread and its small blocks, none for 1 GiB. */
  struct rlimit old, lim;
  long vm = tu_statm_mib_quiet(1);
  if (!CHECK(vm > 0 && getrlimit(RLIMIT_AS, &old) == 0)) return 1;
  lim = old;
  rlim_t want = ((rlim_t)vm + 512) << 20;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > want) lim.rlim_cur = want;
  if (!CHECK(setrlimit(RLIMIT_AS, &lim) == 0)) return 1;

  pthread_t t;
  void *ret = NULL;
  if (!CHECK(pthread_create(&t, NULL, cancelled, (void *)print) == 0)) return 1;
  CHECK(pthread_join(t, &ret) == 0);
  CHECK(setrlimit(RLIMIT_AS, &old) == 0);
  CHECKF(reached == 1, "the thread was cancelled inside an allocator call (never reached its flag)");
  CHECKF(ret == PTHREAD_CANCELED, "join value %p, not PTHREAD_CANCELED: the cancel was not pending", ret);
  if (reached) {
    CHECKF(big_failed, "malloc(1 GiB) succeeded under RLIMIT_AS (address space %ld MiB at the start)", vm);
    CHECK(small_ok);
  }

  /* Whatever the cancelled thread left must not stop anyone else. */
  malloc_trim(0);
  churn((void *)1);
  pthread_t u;
  if (CHECK(pthread_create(&u, NULL, churn, (void *)2) == 0)) CHECK(pthread_join(u, NULL) == 0);
  malloc_trim(0);
  churn((void *)3);
  return check_failed() ? 1 : 0;
}

TEST_MAIN() {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) return child();
  int err_fd;
  pid_t pid = tu_fork_capturing(&err_fd, 30);
  if (pid == 0) {
    setenv("HAKOZUNA_VERBOSE", "1", 1);
    char *args[] = {argv[0], "--child", NULL};
    execv("/proc/self/exe", args);
    _exit(127);
  }
  if (!CHECK(pid > 0)) return 1;
  static char out[1 << 18], rest[4096];
  tu_read_all(err_fd, out, sizeof out);
  for (ssize_t r; (r = read(err_fd, rest, sizeof rest)) != 0;) /* (a child that says more must not block) */
    if (r < 0 && errno != EINTR) break;
  close(err_fd);
  int st = -1;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  fprintf(stderr, "--- the child's stderr ---\n%s--- end ---\n", out);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %s %d (SIGALRM %d: hung)",
         WIFSIGNALED(st) ? "killed by signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
         SIGALRM);
  if (strncmp(hz_target(), "hakozuna", 8) == 0)
    CHECKF(strstr(out, "out of memory") != NULL,
           "no \"out of memory\" message: the allocator wrote nothing while the cancel was pending");
  return 0;
}
