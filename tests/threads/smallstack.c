// SPDX-License-Identifier: MIT
/* tests/threads/smallstack.c: the allocator's entry points run on the
 * caller's stack, which may be a thread's smallest (PTHREAD_STACK_MIN:
 * 16 KiB on x86-64). malloc_trim put three copies of the 5.6 KiB statistics
 * struct there and mallinfo2 one, and the exit-time reports
 * (HAKOZUNA_STATS, HAKOZUNA_LEAKS, HAKOZUNA_PROFILE), run by the thread
 * that calls exit(), had buffers of 8-12 KiB: each overflowed into the
 * guard page (SIGSEGV) where glibc's malloc works. Found by running
 * programs as a user would. Each exit case runs in a child (this program
 * again), whose status must be a clean exit. */
#include "check.h"
#include "testutil.h"

#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* (at least 16 KiB, glibc's minimum on x86-64: musl's is 2 KiB, on which
 * its own printf overflows, and hakozuna's malloc_info did) */
static size_t stack_min(void) {
  long m = sysconf(_SC_THREAD_STACK_MIN);
  size_t n = m > 0 ? (size_t)m : (size_t)PTHREAD_STACK_MIN;
  return n > 16384 ? n : 16384;
}

/* Runs fn on a thread with the smallest stack; false if it could not start. */
static bool on_small_stack(void *(*fn)(void *)) {
  pthread_attr_t at;
  pthread_t t;
  pthread_attr_init(&at);
  if (!CHECK(pthread_attr_setstacksize(&at, stack_min()) == 0)) return false;
  bool ok = CHECK(pthread_create(&t, &at, fn, NULL) == 0) && CHECK(pthread_join(t, NULL) == 0);
  pthread_attr_destroy(&at);
  return ok;
}

static volatile int calls_done;

static void *glibc_extras(void *arg) {
  void *p = malloc(100), *q = malloc(100000);
  CHECK(p != NULL && q != NULL);
  free(q);
  malloc_trim(0);
#ifdef __GLIBC__ /* (musl has no mallinfo) */
  struct mallinfo2 mi = mallinfo2();
  CHECK(mi.uordblks >= 100);
#endif
  FILE *null = fopen("/dev/null", "w");
  if (CHECK(null != NULL)) {
    CHECK(malloc_info(0, null) == 0);
    fclose(null);
  }
  free(p);
  calls_done = 1;
  return arg;
}

static void *exit_here(void *arg) {
  void *p = malloc(100); /* still live at exit: the leak report has a block */
  CHECK(p != NULL);
  exit(check_failed() ? 1 : 0);
  return arg;
}

TEST_MAIN() {
  if (argc == 2 && strcmp(argv[1], "--exit") == 0) {
    on_small_stack(exit_here);
    return 1; /* (exit_here ends the process) */
  }
  CHECK(on_small_stack(glibc_extras));
  CHECK(calls_done == 1);

  char dir[] = "/tmp/hz-smallstack-XXXXXX";
  if (!CHECK(mkdtemp(dir) != NULL)) return 1;
  static const char *const options[] = {"HAKOZUNA_STATS", "HAKOZUNA_LEAKS", "HAKOZUNA_PROFILE"};
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      char file[64];
      snprintf(file, sizeof file, "%s/p.pb.gz", dir);
      setenv(options[i], "1", 1);
      setenv("HAKOZUNA_PROFILE_FILE", file, 1);
      alarm(30);
      execl("/proc/self/exe", argv[0], "--exit", (char *)NULL);
      _exit(127);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s=1, exit() on a %zu-byte stack: %s %d", options[i],
           stack_min(), WIFSIGNALED(st) ? "killed by signal" : "exit status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  }
  static const char *const written[] = {"p.pb.gz", "p.folded", "p.alloc.folded", "p.txt"};
  for (size_t i = 0; i < sizeof written / sizeof written[0]; i++) {
    char path[64];
    snprintf(path, sizeof path, "%s/%s", dir, written[i]);
    unlink(path); /* (only the hakozuna run writes them) */
  }
  CHECK(rmdir(dir) == 0);
  return 0;
}
